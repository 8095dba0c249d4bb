"""`ksearch run FILE.py` on a seedless KernelBench-format task: the language-model policies (stub
providers on 127.0.0.1) start from the reference, and the offline tuner says plainly it needs a model."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.driver.host_script import kernel
from tests.stubs.anthropic_stub import StubAnthropic
from tests.stubs.openai_stub import StubOpenAI

ROOT = Path(__file__).resolve().parents[2]
TASK = Path(__file__).parent / "fixtures" / "scaled_relu.py"
pytestmark = [pytest.mark.cpu, pytest.mark.timeout(600)]

INIT = {
    "analysis": "Elementwise, memory-bound: one read and one write of the matrix.",
    "intents": [{"title": "one program per 1024-element block", "priority": 0.9, "difficulty": 1}],
}
UPDATE = {"reflection": "correct; block size made no difference", "edits": [], "new_intents": []}


def _run(args: list[str], env_extra: dict[str, str], db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    cmd = [sys.executable, "-m", "ksearch.server.cli", "run", str(TASK), "--rounds", "1", "--stagnation", "1"]
    cmd += ["--plain", "--json", "--db", str(db), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=500)


def _result(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(p.stdout[p.stdout.index("{\n") :])


def _attempts(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return list(con.execute("SELECT node_id, round, status, base_attempt_id FROM attempts ORDER BY id"))
    finally:
        con.close()


def _check_prompts(init: str, first_write: str, second_write: str) -> None:
    assert "No seed candidate" in init and "Seed candidate" not in init
    assert "Correctness rule" in init and "atol" in init
    assert "class Model" in init  # the reference is the context
    assert "No base code" in first_write and "from scratch" in first_write
    assert "attempt 1 of at most 8" in first_write
    # the second attempt builds on the first (correct) one, named as such
    assert "Base code (attempt 1" in second_write and "No base code" not in second_write


@pytest.mark.slow
def test_openai_policy_starts_a_seedless_task_from_the_reference(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    script = [
        StubOpenAI.chat(json.dumps(INIT)),
        StubOpenAI.chat(json.dumps({"source": kernel(1024), "explanation": "flat grid"})),
        StubOpenAI.chat(json.dumps({"source": kernel(2048), "explanation": "wider blocks"})),
        StubOpenAI.chat(json.dumps(UPDATE)),
    ]
    with StubOpenAI(script) as stub:
        res = _result(
            _run(
                ["--policy", "openai", "--base-url", stub.base_url, "--model", "m"],
                {"OPENAI_API_KEY": "k"},
                db,
            )
        )
        assert stub.remaining == 0
        texts = [json.dumps(r.json()) for r in stub.requests]
    _check_prompts(texts[0], texts[1], texts[2])
    # no seed attempt: the first attempt is the intent's, built on nothing; the second on the first
    assert _attempts(db) == [(2, 1, "ok", None), (2, 1, "ok", 1)]
    assert res["rounds_run"] == 1 and res["final"] and res["final"][0]["status"] == "ok"


@pytest.mark.slow
def test_anthropic_policy_starts_a_seedless_task_from_the_reference(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    script = [
        StubAnthropic.tool_call(INIT),
        StubAnthropic.tool_call({"source": kernel(1024), "explanation": "flat grid"}),
        StubAnthropic.tool_call({"source": kernel(2048), "explanation": "wider blocks"}),
        StubAnthropic.tool_call(UPDATE),
    ]
    with StubAnthropic(script) as stub:
        res = _result(
            _run(["--policy", "anthropic", "--base-url", stub.root_url], {"ANTHROPIC_API_KEY": "k"}, db)
        )
        assert stub.remaining == 0
        texts = [json.dumps(r.json()) for r in stub.requests]
    _check_prompts(texts[0], texts[1], texts[2])
    assert _attempts(db) == [(2, 1, "ok", None), (2, 1, "ok", 1)]
    assert res["final"] and res["final"][0]["status"] == "ok"


@pytest.mark.slow
def test_tuner_on_a_seedless_task_says_it_needs_a_model(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    p = _run(["--policy", "tuner"], {}, db)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "needs a language model" in p.stdout and "--policy anthropic" in p.stdout
    assert "Traceback" not in p.stdout + p.stderr
    con = sqlite3.connect(db)
    try:
        assert list(con.execute("SELECT status FROM searches")) == [("stopped",)]  # never left `running`
    finally:
        con.close()
