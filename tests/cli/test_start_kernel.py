"""A search started from a kernel of one's own (`ksearch run --start FILE`, `ksearch suite run --starts DIR`), on a
KernelBench-format task without a seed, with the offline tuner on the CPU: the kernel is submitted on the root
first, and the tuner's rounds move what it declares."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fixtures import SOFTMAX
from tests.fixtures.cli import ksearch_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
FIX = Path(__file__).parents[1] / "driver" / "fixtures"
TASK = FIX / "scaled_relu.py"
STARTS = FIX / "starts"
# the built-in softmax with a 9-row smoke workload, by its folder (the suite names a search by it: st.001.softmax)
SOFTMAX_DIR = str(Path(SOFTMAX).parent)
OPTS = ["--policy", "tuner", "--rounds", "1", "--max-attempts", "1", "--no-final"]


def _run_from(tmp_path: Path, db: Path, start: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """`ksearch run TASK` with the tuner's options on `db`, started from `start`."""
    return ksearch_cli(
        tmp_path, "run", str(TASK), *OPTS, *more, "--plain", "--db", str(db), "--start", str(start)
    )


def _attempts(db: Path) -> list[tuple[str, int, str, str]]:
    con = sqlite3.connect(db)
    try:
        return list(
            con.execute(
                "SELECT s.name, a.id, a.author, c.source FROM attempts a JOIN searches s ON s.id = a.search_id "
                "JOIN candidates c ON c.id = a.candidate_id ORDER BY a.id"
            )
        )
    finally:
        con.close()


def _searches(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT name FROM searches")]
    except sqlite3.OperationalError:  # no table yet: nothing was made
        return []
    finally:
        con.close()


def test_a_run_starts_from_a_kernel_of_ones_own_and_the_tuner_moves_its_tunables(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    bare = ksearch_cli(tmp_path, "run", str(TASK), *OPTS, "--plain", "--db", str(tmp_path / "bare.db"))
    assert (
        bare.returncode != 0 and "has no seed" in bare.stdout + bare.stderr
    )  # without it the tuner has nothing to tune
    r = _run_from(tmp_path, db, STARTS / "scaled_relu.py")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "start: scaled_relu.py submitted on the root as attempt #1: status: ok" in r.stdout + r.stderr
    rows = _attempts(db)
    assert [(a, who) for _, a, who, _ in rows][:2] == [(1, "human"), (2, "tuner")], rows
    assert rows[0][3] == (STARTS / "scaled_relu.py").read_text()
    assert (
        "BLOCK = 1024" in rows[0][3] and "BLOCK = 1024" not in rows[1][3]
    )  # the tuner moved a declared value
    # --start begins a search: with the one that exists it is refused, and nothing is recorded
    again = _run_from(tmp_path, db, STARTS / "scaled_relu.py")
    assert again.returncode == 2 and "--start begins a new search" in again.stderr, again.stderr[-2000:]
    missing = _run_from(tmp_path, db, tmp_path / "no.py", "--new")
    assert missing.returncode == 2 and "cannot read it" in missing.stderr, missing.stderr[-2000:]
    assert len(_attempts(db)) == len(rows)
    # a file that is no candidate is refused before any search is made (it would leave one without its start)
    (tmp_path / "syntax.py").write_text("class ModelNew(torch.nn.Module:\n    x = 1\n")
    (tmp_path / "other.py").write_text("def helper():\n    return 1\n")
    fresh = tmp_path / "fresh.db"
    for bad_file, said in (
        ("syntax.py", "does not parse as Python (line 1"),
        ("other.py", "defines no `ModelNew`"),
    ):
        r = _run_from(tmp_path, fresh, tmp_path / bad_file)
        assert r.returncode == 2 and said in r.stderr and "nothing was made" in r.stderr, r.stderr[-2000:]
        assert not fresh.exists() or not _searches(fresh)
    # a kernel that runs but is wrong is recorded, and the run says the rounds do not build on it
    (tmp_path / "wrong.py").write_text(
        (STARTS / "scaled_relu.py").read_text().replace("* scale + shift", "* scale")
    )
    r = _run_from(tmp_path, fresh, tmp_path / "wrong.py", "--new")
    out = r.stdout + r.stderr
    assert "not a correct kernel, so the rounds do not build on it" in out, out[-3000:]
    assert "start from a correct kernel of your own" in out, out[
        -3000:
    ]  # the tuner's reason, not "no seed" alone


def test_a_suite_starts_each_task_from_its_own_kernel_where_it_has_one(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    r = ksearch_cli(tmp_path, "suite", "run", str(TASK), SOFTMAX_DIR, "--name", "st", *OPTS, "--db", str(db),
                    "--starts", str(STARTS))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "starts: 1 of 2 tasks have a starting kernel in" in r.stderr
    rows = _attempts(db)
    mine = [x for x in rows if x[0] == "st.000.scaled_relu"]
    assert mine[0][2] == "human" and mine[0][3] == (STARTS / "scaled_relu.py").read_text()
    assert any(x[2] == "tuner" for x in mine)
    theirs = [x for x in rows if x[0] == "st.001.softmax"]
    assert theirs and all(x[2] != "human" for x in theirs)  # softmax has no file there: its own seed
    bad = ksearch_cli(
        tmp_path,
        "suite",
        "run",
        "softmax",
        "--name",
        "x",
        "--db",
        str(db),
        "--starts",
        str(tmp_path / "none"),
    )
    assert bad.returncode == 2 and "not a folder" in bad.stderr
    # a folder none of whose kernels matches a task is said so, with what it holds
    r = ksearch_cli(tmp_path, "suite", "run", SOFTMAX_DIR, "--name", "nomatch", *OPTS, "--db", str(db),
                    "--starts", str(STARTS))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "starts: 0 of 1 tasks" in r.stderr and "none matches" in r.stderr and "scaled_relu.py" in r.stderr
