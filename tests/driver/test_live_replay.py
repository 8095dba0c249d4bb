"""The recorded sessions of a language model acting as the MCP host (`ksearch serve --record`, see
docs/live-host.md) replay through the built-in driver on the CPU and reproduce the host's search: the
same candidates on the same intents in the same rounds, with the same verdicts and the same tree.

The kernel bank filled by these real searches: the rmsnorm search's finished intents and end go into the bank as
the driver runs; the l2_normalize search after it in the same database (a norm too) is shown them in its analyse
and reflect prompts, as the uses recorded with it say; a bank export read by another project's database shows the
same.

Each session is replayed once into a fresh database for the module (`replayed`); a test that writes more into one
works on its own copy."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIVE = Path(__file__).parent / "fixtures" / "live"
L2 = str(ROOT / "bench" / "live_host" / "tasks" / "l2_normalize.py")
TASKS = {"l2_normalize": L2, "rmsnorm": "rmsnorm"}
pytestmark = [pytest.mark.cpu, pytest.mark.slow]


def _rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[list[Any]]:
    con = sqlite3.connect(db)
    try:
        return [list(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def _cli(tmp: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    p = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def _replay(tmp: Path, db: Path, name: str) -> None:
    """The recorded session `name` replayed through `ksearch run` into `db`."""
    seed = json.loads((LIVE / f"{name}.records.json").read_text())["search"]["seed"]
    _cli(tmp, "run", TASKS[name], "--policy", "replay", "--replay", str(LIVE / f"{name}.jsonl"), "--rounds", "2",
         "--stagnation", "2", "--seed", str(seed), "--plain", "--json", "--db", str(db))  # fmt: skip


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`replayed(name)` -> the database of that session replayed into a fresh one, made once for the module.
    Read it only: a test that writes copies it first (`_copy`)."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            tmp = tmp_path_factory.mktemp(f"replay-{name}")
            _replay(tmp, tmp / "k.db", name)
            made[name] = tmp / "k.db"
        return made[name]

    return get


def _copy(db: Path, to: Path) -> Path:
    """A copy of a database whose driver has exited: the file, and any WAL left, are the whole state."""
    for suffix in ("", "-wal"):
        src = db.with_name(db.name + suffix)
        if src.exists():
            shutil.copyfile(src, to.with_name(to.name + suffix))
    return to


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_live_host_session_replays_through_the_driver(name: str, replayed: Callable[[str], Path]) -> None:
    expected = json.loads((LIVE / f"{name}.records.json").read_text())
    db = replayed(name)
    got_attempts = _rows(db, "SELECT id, node_id, candidate_id, round, status FROM attempts ORDER BY id")
    assert got_attempts == [[a[0], a[1], a[2], a[4], a[5]] for a in expected["attempts"]]
    got_nodes = _rows(db, "SELECT id, parent_id, title, status, best_attempt_id FROM nodes ORDER BY id")
    assert got_nodes == [[n[0], n[1], n[3], n[4], n[5]] for n in expected["nodes"]]
    # the same edits in each round (within the init phase the host stored its analysis after its intents,
    # the driver before them)
    got_edits = _rows(db, "SELECT op, node_id, round FROM edits ORDER BY id")
    assert sorted(got_edits) == sorted(e[:3] for e in expected["edits"])
    assert _rows(db, "SELECT status, round FROM searches") == [[expected["search"]["status"], 2]]


@pytest.mark.timeout(1200)
def test_replayed_searches_fill_the_bank_and_a_related_search_is_shown_their_lessons(
    tmp_path: Path, replayed: Callable[[str], Path]
) -> None:
    db = _copy(replayed("rmsnorm"), tmp_path / "k.db")  # the l2_normalize search goes into this one
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

    _replay(tmp_path, db, "l2_normalize")
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
