"""The recorded sessions of a language model acting as the MCP host (`ksearch serve --record`, see
docs/live-host.md) replay through the built-in driver on the CPU and reproduce the host's search: the
same candidates on the same intents in the same rounds, with the same verdicts and the same tree."""

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
TASKS = {
    "l2_normalize": str(ROOT / "bench" / "live_host" / "tasks" / "l2_normalize.py"),
    "rmsnorm": "rmsnorm",
}
pytestmark = [pytest.mark.cpu, pytest.mark.slow, pytest.mark.timeout(900)]


def _rows(db: Path, sql: str) -> list[list[Any]]:
    con = sqlite3.connect(db)
    try:
        return [list(r) for r in con.execute(sql)]
    finally:
        con.close()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_live_host_session_replays_through_the_driver(name: str, tmp_path: Path) -> None:
    expected = json.loads((LIVE / f"{name}.records.json").read_text())
    db = tmp_path / "k.db"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    cmd = [sys.executable, "-m", "ksearch.server.cli", "run", TASKS[name], "--policy", "replay"]
    cmd += ["--replay", str(LIVE / f"{name}.jsonl"), "--rounds", "2", "--stagnation", "2"]
    cmd += ["--seed", str(expected["search"]["seed"]), "--plain", "--json", "--db", str(db)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got_attempts = _rows(db, "SELECT id, node_id, candidate_id, round, status FROM attempts ORDER BY id")
    assert got_attempts == [[a[0], a[1], a[2], a[4], a[5]] for a in expected["attempts"]]
    got_nodes = _rows(db, "SELECT id, parent_id, title, status, best_attempt_id FROM nodes ORDER BY id")
    assert got_nodes == [[n[0], n[1], n[3], n[4], n[5]] for n in expected["nodes"]]
    # the same edits in each round (within the init phase the host stored its analysis after its intents,
    # the driver before them)
    got_edits = _rows(db, "SELECT op, node_id, round FROM edits ORDER BY id")
    assert sorted(got_edits) == sorted(e[:3] for e in expected["edits"])
    assert _rows(db, "SELECT status, round FROM searches") == [[expected["search"]["status"], 2]]
