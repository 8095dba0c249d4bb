"""`ksearch run` end to end on the CPU (tuner policy, Triton interpreter): budgets, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures import SOFTMAX

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    return env


def ksearch(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        cwd=ROOT,
        env=_env(),
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def _attempt_ids(db: Path) -> list[int]:
    con = sqlite3.connect(db, timeout=30)
    try:
        return [r[0] for r in con.execute("select id from attempts order by id")]
    except sqlite3.OperationalError as e:  # the driver has created the file but not yet its schema
        assert "no such table" in str(e), e
        return []
    finally:
        con.close()


@pytest.mark.slow
def test_tuner_run_records_attempts_and_says_which_policy(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    p = ksearch(
        "run",
        SOFTMAX,
        "--rounds",
        "2",
        "--max-attempts",
        "2",
        "--stagnation",
        "1",
        "--plain",
        "--json",
        "--db",
        str(db),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "policy: tuner" in p.stdout
    res = json.loads(p.stdout[p.stdout.index("{\n") :])
    assert res["rounds_run"] == 2
    assert res["attempts"] >= 3  # the seed plus at least one per round
    assert res["final"] and res["final"][0]["status"] == "ok"
    if res["device"] == "cpu-interpreter" or res["final"][0]["device"] == "cpu-interpreter":
        # interpreter timings never rank candidates: no search best without a GPU timing
        assert res["best_speedup_vs_eager"] is None
    else:
        assert res["best_speedup_vs_eager"] is not None
    # no model ran: the run ends saying how to plug one in and where to see what was tried
    lines = p.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("next: the offline tuner only moves"))
    # each suggested command names the run's database, as the run was given it
    d = f"--db {shlex.quote(str(db))}"
    assert lines[at + 1] == f"  ANTHROPIC_API_KEY=... ksearch run {SOFTMAX} --new {d}   (Anthropic)"
    assert lines[at + 2].startswith(f"  ksearch run {SOFTMAX} --new {d} --policy openai --base-url http")
    assert lines[at + 3].startswith(f"  ksearch serve {d}   (an MCP assistant")
    seen = lines[at + 4]
    assert seen.startswith(f"see it: ksearch tree softmax-1 {d} (what was tried and why), ksearch ui {d}"), (
        seen
    )
    tree = ksearch(*shlex.split(seen.split(" (")[0].removeprefix("see it: ksearch ")), "--json")
    assert tree.returncode == 0, tree.stderr
    statuses = [n["status"] for n in json.loads(tree.stdout)["nodes"]]
    assert statuses.count("closed") + statuses.count("failed") >= 2


@pytest.mark.slow
def test_attempt_budget_stops_the_run(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    p = ksearch(
        "run",
        SOFTMAX,
        "--rounds",
        "50",
        "--attempts",
        "3",
        "--plain",
        "--no-final",
        "--json",
        "--db",
        str(db),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(p.stdout[p.stdout.index("{\n") :])
    assert res["stop_reason"].startswith("attempt budget reached")
    assert 3 <= res["attempts"] <= 3 + 1  # may finish the attempt in flight: never runs on past it


@pytest.mark.slow
def test_sigkill_mid_round_then_resume_loses_nothing_committed(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ksearch.server.cli",
            "run",
            SOFTMAX,
            "--rounds",
            "20",
            "--plain",
            "--no-final",
            "--stagnation",
            "2",
            "--db",
            str(db),
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if db.exists() and len(_attempt_ids(db)) >= 3:
            break
        assert proc.poll() is None, "driver ended before it could be killed"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _attempt_ids(db)
    assert len(before) >= 3
    con = sqlite3.connect(db)
    (round_before,) = con.execute("select round from searches").fetchone()
    (last_with_attempt,) = con.execute("select coalesce(max(round), 0) from attempts").fetchone()
    con.close()
    # a round killed before its intent recorded an attempt is given back on resume and started again
    resumed_at = round_before - 1 if round_before > last_with_attempt else round_before
    p = ksearch("run", "--resume", "1", "--rounds", "1", "--plain", "--no-final", "--json", "--db", str(db))
    assert p.returncode == 0, p.stdout + p.stderr
    after = _attempt_ids(db)
    assert after[: len(before)] == before and len(after) > len(before)
    con = sqlite3.connect(db)
    active = con.execute("select count(*) from nodes where status = 'active'").fetchone()[0]
    round_after, config = con.execute("select round, config from searches").fetchone()
    con.close()
    assert active == 0
    # the run's one round is the search's: its budget says so, and the round count never passes it
    assert json.loads(config)["budgets"]["rounds"] == resumed_at + 1 >= round_after


@pytest.mark.slow
def test_compile_mode_is_set_on_a_new_search_and_fixed_after(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    bad = ksearch("run", "softmax", "--compile-mode", "fastest", "--db", str(db))
    assert bad.returncode != 0
    assert "unknown --compile-mode 'fastest'" in bad.stderr and "max-autotune" in bad.stderr, bad.stderr
    assert not db.exists()  # refused before anything was written

    ok = ksearch(
        "run", SOFTMAX, "--compile-mode", "max-autotune", "--rounds", "1", "--max-attempts", "1",
        "--stagnation", "1", "--no-final", "--plain", "--db", str(db),
    )  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    con = sqlite3.connect(db)
    try:
        (config,) = con.execute("select config from searches").fetchone()
    finally:
        con.close()
    assert json.loads(config)["compile_mode"] == "max-autotune"

    again = ksearch("run", SOFTMAX, "--compile-mode", "default", "--rounds", "2", "--plain", "--db", str(db))
    assert again.returncode != 0
    assert "fixed when it was created" in again.stderr and "--new" in again.stderr, again.stderr
    # its timing protocol likewise: the built-in task's is ksearch's; an unknown name is refused by name
    assert json.loads(config)["timing_protocol"] == "ksearch"
    other = ksearch(
        "run", SOFTMAX, "--timing-protocol", "kernelbench", "--rounds", "2", "--plain", "--db", str(db)
    )
    assert other.returncode != 0
    assert "timed by the 'ksearch' protocol, fixed when it was created" in other.stderr, other.stderr
    unknown = ksearch("run", "softmax", "--timing-protocol", "gpu-mode", "--db", str(db))
    assert unknown.returncode != 0 and "accepted: ksearch, gpumode, kernelbench, flashinfer" in unknown.stderr
    # KernelBench's precision likewise, and only for a KernelBench problem file
    half = ksearch("run", SOFTMAX, "--precision", "fp16", "--rounds", "2", "--plain", "--db", str(db))
    said = " ".join(half.stderr.split())
    assert half.returncode != 0 and "runs its task's inputs as drawn (no KernelBench precision)" in said
    assert "fixed when it was created; --precision fp16 needs a new search (--new)" in said
    fresh = ksearch("run", "softmax", "--new", "--precision", "fp16", "--plain", "--db", str(db))
    assert fresh.returncode != 0 and "'softmax' is a built-in task" in " ".join(fresh.stderr.split())
    fp8 = ksearch("run", "softmax", "--precision", "fp8", "--db", str(tmp_path / "none.db"))
    assert fp8.returncode != 0 and "unknown --precision 'fp8'; accepted: fp32, fp16, bf16" in fp8.stderr
    assert not (tmp_path / "none.db").exists()
