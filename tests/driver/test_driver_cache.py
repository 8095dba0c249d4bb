"""`ksearch run --policy anthropic` against a stub Messages API that reports prompt-cache usage: every request of
the search lists the same tools and rules, marked for the cache; the write_code requests share their system blocks
byte for byte; the cached tokens are stored with each call and shown in the run's usage line and by
`ksearch budget`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.tasks import load_task
from tests.fixtures import SOFTMAX
from tests.stubs.anthropic_stub import StubAnthropic, message
from tests.stubs.server import Recorded, Reply

ROOT = Path(__file__).resolve().parents[2]
FASTER = load_task(SOFTMAX).seeds["triton"].replace("BLOCK_N = 2048", "BLOCK_N = 4096")
ANSWERS: dict[str, dict[str, Any]] = {
    "submit_analysis": {
        "analysis": "softmax over rows: memory-bound.",
        "intents": [{"title": "wider blocks", "priority": 0.9, "difficulty": 1, "expected_speedup": 1.1}],
    },
    "submit_code": {"source": FASTER, "explanation": "BLOCK_N 4096"},
    "submit_tree_update": {"reflection": "wider blocks helped a little"},
}


def _answers() -> Callable[[Recorded], Reply]:
    """The forced tool's answer; the first call writes 4,000 tokens to the cache, every later one reads them."""
    seen: list[str] = []

    def reply(req: Recorded) -> Reply:
        forced = req.json()["tool_choice"]["name"]
        block = {"type": "tool_use", "id": f"toolu_{len(seen)}", "name": forced, "input": ANSWERS[forced]}
        cache = {"cache_write": 0, "cache_read": 4000} if seen else {"cache_write": 4000, "cache_read": 0}
        seen.append(forced)
        return Reply(200, message([block], tokens_in=600, tokens_out=200, stop_reason="tool_use", **cache))

    return reply


def _ksearch(args: list[str], db: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args, "--db", str(db)],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_run_marks_its_prefix_and_reports_the_cache(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    run = ["run", SOFTMAX, "--name", "cached", "--rounds", "1", "--max-attempts", "2", "--stagnation", "2"]
    with StubAnthropic([_answers()] * 8) as stub:
        p = _ksearch(
            [*run, "--policy", "anthropic", "--base-url", stub.root_url, "--plain", "--no-final"],
            db,
            {"ANTHROPIC_API_KEY": "test-key"},
        )
        bodies = [r.json() for r in stub.requests]
    assert p.returncode == 0, p.stdout + p.stderr
    phases = [b["tool_choice"]["name"] for b in bodies]
    assert phases[0] == "submit_analysis" and "submit_code" in phases and phases[-1] == "submit_tree_update"

    # one set of tools and one rules block for every request, each marked; at most four marks a request
    assert len({json.dumps(b["tools"]) for b in bodies}) == 1
    assert len({json.dumps(b["system"][0]) for b in bodies}) == 1
    assert all(
        b["system"][0]["cache_control"] == b["system"][1]["cache_control"] == {"type": "ephemeral"}
        for b in bodies
    )
    assert all(json.dumps(b).count('"cache_control"') <= 4 for b in bodies)
    # consecutive write_code requests: the same system blocks and the same marked context, byte for byte
    writes = [b for b in bodies if b["tool_choice"]["name"] == "submit_code"]
    assert len(writes) == 2
    marked = [[c for c in w["messages"][0]["content"] if "cache_control" in c] for w in writes]
    assert marked[0] and json.dumps([writes[0]["system"], marked[0]]) == json.dumps(
        [writes[1]["system"], marked[1]]
    )

    # stored with each call: the input counts the cache's tokens, which are priced at their rates
    con = sqlite3.connect(db)
    try:
        calls = con.execute(
            "SELECT tokens_in, cache_read_tokens, cache_write_tokens, cache_read_usd, cache_write_usd FROM llm_calls"
        ).fetchall()
    finally:
        con.close()
    assert len(calls) == len(bodies)
    assert calls[0] == (4600, 0, 4000, 0.0, pytest.approx(4000 * 3.75 / 1e6))
    assert all(c[:3] == (4600, 4000, 0) and c[3] == pytest.approx(4000 * 0.3 / 1e6) for c in calls[1:])

    # printed: the run's usage line, and `ksearch budget`
    n = len(calls)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("model usage:"))
    assert line.startswith(
        f"model usage: {n} calls, {4600 * n:,} input tokens ({4000 * (n - 1):,} read from the prompt cache, "
        f"4,000 written to it, {600 * n:,} uncached) and {200 * n:,} output tokens; $"
    ), line
    # claude-sonnet-4-5 per Mtok: $3 input, $3.75 a cache write, $0.30 a cache read, $15 output
    reads, writes, rest = (n - 1) * 4000 * 0.3 / 1e6, 4000 * 3.75 / 1e6, n * (600 * 3 + 200 * 15) / 1e6
    assert line.endswith(
        f"; ${reads + writes + rest:.4f}: ${reads:.4f} cache reads, ${writes:.4f} cache writes, "
        f"${rest:.4f} uncached input and output"
    ), line
    b = _ksearch(["budget", "cached"], db, {})
    assert b.returncode == 0, b.stderr
    assert f"  {line}" in b.stdout.splitlines(), b.stdout
