"""`ksearch run` with LLM policies against stub providers on 127.0.0.1: the real anthropic SDK and httpx
client, scripted answers including rate limits, server errors, garbage, invalid edits and broken code."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.tasks import load_task
from tests.fixtures import SOFTMAX
from tests.stubs.anthropic_stub import StubAnthropic
from tests.stubs.openai_stub import StubOpenAI

ROOT = Path(__file__).resolve().parents[2]
SEED = load_task(SOFTMAX).seeds["triton"]
FASTER = SEED.replace("BLOCK_N = 2048", "BLOCK_N = 4096")
BROKEN = "import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n"

INIT = {
    "analysis": "softmax over rows: memory-bound, 2 reads + 1 write in the seed; aim for one read.",
    "intents": [
        {
            "title": "wider blocks for the row loop",
            "rationale": "fewer loop trips",
            "priority": 0.9,
            "difficulty": 1,
            "expected_speedup": 1.1,
        }
    ],
}


def _run(args: list[str], env_extra: dict[str, str], db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ksearch.server.cli",
            "run",
            SOFTMAX,
            "--rounds",
            "1",
            "--max-attempts",
            "2",
            "--stagnation",
            "2",
            "--plain",
            "--json",
            "--db",
            str(db),
            *args,
        ],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )


def _result(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout[p.stdout.index("{\n") :])


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_anthropic_search_recovers_from_provider_and_model_faults(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    script = [
        StubAnthropic.rate_limited(retry_after=0),  # init: retried after the server's retry-after
        StubAnthropic.tool_call(INIT),
        StubAnthropic.text("Sure! Here is my plan, no tool call."),  # write 1: garbage → corrective turn
        StubAnthropic.tool_call({"source": BROKEN, "explanation": "oops"}),  # ... code that does not parse
        StubAnthropic.error(500, "upstream hiccup"),  # write 2: server error, retried
        StubAnthropic.tool_call({"source": FASTER, "explanation": "BLOCK_N 4096"}),
        StubAnthropic.tool_call(
            {
                "reflection": "edit an unknown node",
                "edits": [{"op": "update", "node_id": 999, "priority": 0.1}],
            }
        ),
        StubAnthropic.tool_call(
            {
                "reflection": "fixed",
                "new_intents": [{"title": "single pass online softmax", "priority": 0.7, "difficulty": 3}],
            }
        ),
    ]
    with StubAnthropic(script) as stub:
        p = _run(
            ["--policy", "anthropic", "--base-url", stub.root_url], {"ANTHROPIC_API_KEY": "test-key"}, db
        )
        res = _result(p)
        assert stub.remaining == 0
        requests = stub.requests
    assert "policy: anthropic" in p.stdout
    # seed, the unparseable attempt (recorded as a compile error: it counts against the cap, never ran),
    # then the faster candidate
    statuses = [r[0] for r in _rows(db, "select status from attempts order by id")]
    assert statuses == ["ok", "compile_error", "ok"], statuses
    write2 = json.dumps(requests[4].json())
    assert "does not parse" in write2  # the syntax error went back to the model as feedback
    update2 = json.dumps(requests[7].json())
    assert "999" in update2 and "accepted" in update2  # the rejected edit went back with the reason
    titles = [r[0] for r in _rows(db, "select title from nodes order by id")]
    assert "single pass online softmax" in titles
    calls = _rows(db, "select phase, tokens_in, tokens_out, cost_usd, error from llm_calls order by id")
    assert [c[0] for c in calls if c[4] is None].count("write_code") == 2
    assert res["tokens"] == sum(c[1] + c[2] for c in calls) > 0
    assert res["usd"] > 0  # claude-sonnet-4-5 is priced
    assert res["final"] and res["final"][0]["status"] == "ok"


@pytest.mark.slow
def test_openai_compatible_search_and_wrong_key_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    script = [
        StubOpenAI.chat("```json\n" + json.dumps(INIT) + "\n```"),
        StubOpenAI.chat("{not json"),  # invalid JSON → corrective turn
        StubOpenAI.chat(json.dumps({"source": FASTER, "explanation": "wider"})),
        StubOpenAI.error(503, "busy"),
        StubOpenAI.chat(json.dumps({"source": FASTER.replace("num_warps = 8", "num_warps = 4")})),
        StubOpenAI.chat(json.dumps({"reflection": "ok", "edits": []})),
    ]
    with StubOpenAI(script) as stub:
        res = _result(
            _run(
                ["--policy", "openai", "--base-url", stub.base_url, "--model", "stub-model"],
                {"OPENAI_API_KEY": "k"},
                db,
            )
        )
        assert stub.remaining == 0
    assert res["attempts"] == 3 and res["rounds_run"] == 1

    with StubAnthropic([StubAnthropic.error(401, "invalid x-api-key")]) as stub:
        p = _run(
            ["--policy", "anthropic", "--base-url", stub.root_url, "--new"],
            {"ANTHROPIC_API_KEY": "bad"},
            tmp_path / "k2.db",
        )
    assert p.returncode == 3, p.stdout + p.stderr
    assert "key was rejected" in p.stdout
    assert "Traceback" not in p.stdout + p.stderr
