"""`ksearch suite` run as a user runs it, on the CPU with the offline tuner: a suite of two tasks (the built-in
softmax and row_sum with 9-row smoke workloads, tests/fixtures) and one that cannot be loaded, stopped by its
whole-suite wall budget after its first task, then resumed: the done task is not run again, the rest runs, and
the table says what each search found."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.fixtures import ROW_SUM, SOFTMAX
from tests.fixtures.cli import ksearch_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _dir(task: str) -> str:
    """A task's folder: the suite names its search by it (`cpu.000.softmax`)."""
    return str(Path(task).parent)


def _attempts(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        return dict(
            con.execute(
                "SELECT s.name, count(a.id) FROM searches s LEFT JOIN attempts a ON a.search_id = s.id GROUP BY s.id"
            )
        )
    finally:
        con.close()


def test_a_suite_stops_at_its_budget_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    opts = ["--policy", "tuner", "--rounds", "1", "--max-attempts", "1", "--db", str(db)]
    first = ksearch_cli(tmp_path, "suite", "run", _dir(SOFTMAX), _dir(ROW_SUM), str(tmp_path / "gone.py"), "--name", "cpu",
                        "--suite-wall", "1", *opts)  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert "refused " in first.stderr and "no such task file or folder" in first.stderr
    assert "stopped: the suite's wall budget (1 s) is spent" in first.stderr
    done_first = _attempts(db)
    assert list(done_first) == ["cpu.000.softmax"] and done_first["cpu.000.softmax"] >= 1
    again = ksearch_cli(tmp_path, "suite", "run", "--resume", "cpu", "--db", str(db))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming, 1 of 3 tasks left" in again.stderr
    assert (
        "[2/3 done, 0 running, 0 failed] done    1 row_sum" in again.stderr
    )  # where the suite stands, each line
    after = _attempts(db)
    assert after["cpu.000.softmax"] == done_first["cpu.000.softmax"]  # the done task was not run again
    assert after["cpu.001.row_sum"] >= 1
    status = json.loads(ksearch_cli(tmp_path, "suite", "status", "cpu", "--json", "--db", str(db)).stdout)
    assert [r["status"] for r in status["rows"]] == ["done", "done", "refused"]
    assert status["correct"] == 2 and status["fast_p_eager"] is None and "no fast_p" in status["note"]
    assert (tmp_path / "suites" / "cpu" / "001.log").read_text().count("attempt") >= 1
    listed = ksearch_cli(tmp_path, "suite", "list", "--db", str(db)).stdout
    assert "cpu: 3 tasks (2 done, 0 running, 0 failed, 1 refused)" in listed


def test_a_suite_needs_its_sources_or_a_suite_to_resume(tmp_path: Path) -> None:
    r = ksearch_cli(tmp_path, "suite", "run", "--name", "x", "--db", str(tmp_path / "k.db"))
    assert r.returncode == 2 and "give the suite's sources" in r.stderr
    r = ksearch_cli(tmp_path, "suite", "run", "softmax", "--db", str(tmp_path / "k.db"))
    assert r.returncode == 2 and "a new suite needs --name" in r.stderr
    r = ksearch_cli(
        tmp_path, "suite", "run", "softmax", "--name", "x", "--rounds", "0", "--db", str(tmp_path / "k.db")
    )
    assert r.returncode == 2 and "--rounds" in r.stderr
    r = ksearch_cli(
        tmp_path, "suite", "run", "softmax", "--name", "x", "--gpus", "7", "--db", str(tmp_path / "k.db")
    )
    assert r.returncode == 2 and "GPU 7 is not visible here; visible GPUs: " in r.stderr, r.stderr
    assert "no suite yet" in ksearch_cli(tmp_path, "suite", "list", "--db", str(tmp_path / "k.db")).stdout
    r = ksearch_cli(tmp_path, "suite", "run", "--resume", "nope", "--db", str(tmp_path / "k.db"))
    assert r.returncode == 2 and "no suite 'nope'" in r.stderr
