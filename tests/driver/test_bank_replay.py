"""The kernel bank filled by real searches: the recorded sessions of a language model (tests/driver/fixtures/live)
replayed through the built-in driver into one database. The rmsnorm search's finished intents and end go into the
bank as the driver runs; the l2_normalize search after it (a norm too) is shown them in its analyse and reflect
prompts, as the uses recorded with it say; a bank export read by another project's database shows the same."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIVE = Path(__file__).parent / "fixtures" / "live"
L2 = str(ROOT / "bench" / "live_host" / "tasks" / "l2_normalize.py")
pytestmark = [pytest.mark.cpu, pytest.mark.slow, pytest.mark.timeout(1200)]


def _rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return list(con.execute(sql, args))
    finally:
        con.close()


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    p = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def _replay(tmp: Path, db: Path, task: str, name: str) -> None:
    seed = json.loads((LIVE / f"{name}.records.json").read_text())["search"]["seed"]
    _cli(tmp, "run", task, "--policy", "replay", "--replay", str(LIVE / f"{name}.jsonl"), "--rounds", "2",
         "--stagnation", "2", "--seed", str(seed), "--plain", "--db", str(db))  # fmt: skip


def test_replayed_searches_fill_the_bank_and_a_related_search_is_shown_their_lessons(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    _replay(tmp_path, db, "rmsnorm", "rmsnorm")
    first = _rows(db, "SELECT kind, entry FROM bank_entries WHERE source_search_id = 1")
    intents = [json.loads(e) for k, e in first if k == "intent"]
    finished = _rows(
        db, "SELECT count(*) FROM nodes WHERE search_id = 1 AND status IN ('closed', 'failed', 'pruned')"
    )
    assert (
        len(intents) == finished[0][0] > 0
    )  # every finished intent of the driver's run, recorded as it ended
    assert all(e["signature"]["patterns"] == ["norm", "reduction"] for e in intents)
    assert all(e["outcome"]["kind"] for e in intents)
    # without a GPU nothing is timed, but a closed intent's correct code still goes with it: a starting point
    closed = [e for e in intents if e["outcome"]["kind"] == "correct"]
    assert closed and all(e["code"] and "ModelNew" in e["code"] for e in closed)

    _replay(tmp_path, db, L2, "l2_normalize")
    shown = _rows(db, "SELECT DISTINCT b.uid, b.phase FROM bank_uses b WHERE b.search_id = 2")
    from_first = {uid for (uid,) in _rows(db, "SELECT uid FROM bank_entries WHERE source_search_id = 1")}
    assert {u for u, p in shown if p == "analyse"} and {u for u, p in shown if p == "analyse"} <= from_first
    assert {p for _, p in shown} == {"analyse", "implement", "reflect"}  # the kernels with code when writing
    # nothing of its own search is ever shown to it
    own = {uid for (uid,) in _rows(db, "SELECT uid FROM bank_entries WHERE source_search_id = 2")}
    assert own and not own & {u for u, _ in shown}

    # the bank leaves this project: another database with no search of its own reads the same lessons
    out = tmp_path / "bank.json"
    _cli(tmp_path, "bank", "export", str(out), "--db", str(db))
    team = tmp_path / "team.db"
    _cli(tmp_path, "bank", "import", str(out), "--bank", str(team))
    found = _cli(tmp_path, "bank", "search", "--task", L2, "--bank", str(team), "--json", "--db", str(team))
    hits = json.loads(found.stdout)["hits"]
    assert {h["entry"]["uid"] for h in hits} & {u for u, _ in shown}
