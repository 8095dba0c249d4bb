"""`ksearch run` killed with SIGKILL at random points, over and over, on one database.

Each round of the loop starts `ksearch run softmax` (the tuner on the CPU), which resumes the
unfinished search or starts a new one when the last is done, and kills it after a random delay: while
it starts, measures the seed, asks the policy, evaluates, updates the tree or finishes. After every
kill the database opens through the store, passes SQLite's integrity check, and every row committed
before the kill (attempts with their evaluation JSON, edits, LLM calls, candidates) is still there,
unchanged. At the end a resumed run completes and leaves no node `active`.

Set KSEARCH_FAULT_SEED to replay a sequence of delays.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ksearch.worldmodel.store import Store
from tests.faults.faultkit import ROOT, committed, integrity, ksearch, ksearch_env, node_statuses, worker_pids
from tests.fixtures import SOFTMAX

pytestmark = pytest.mark.slow
KILLS = 22
RUN = ["run", SOFTMAX, "--rounds", "3", "--max-attempts", "2", "--stagnation", "1", "--no-final", "--plain"]


async def _read_everything(db: Path) -> int:
    """Open the store and parse every search, node and attempt through the data models."""
    async with await Store.open(db) as store:
        n = 0
        for s in await store.list_searches():
            n += len(await store.list_nodes(s.id)) + len(await store.list_attempts(s.id))
            await store.list_edits(s.id)
        return n


def _await_line(log: Path, cue: str, p: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until the driver's output has a line starting with `cue` (False if it exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ln.startswith(cue) for ln in log.read_text(errors="replace").splitlines()):
            return True
        if p.poll() is not None:
            return False
        time.sleep(0.02)
    return False


@pytest.fixture(scope="module")
def kill_loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("sigkill")
    db = base / "k.db"
    scratch = base / "scratch"
    env = ksearch_env(scratch)
    seed = int(os.environ.get("KSEARCH_FAULT_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    points: list[dict[str, Any]] = []
    problems: list[str] = []
    max_active = 0
    runs = 0

    def landed(mode: str) -> bool:
        return any(pt["mode"] == mode for pt in points)

    # every phase must be hit: past half the kills, a phase not yet landed is aimed at until it is
    while (len(points) < KILLS or not (landed("start") and landed("work"))) and runs < 3 * KILLS:
        runs += 1
        before = committed(db)
        log = base / f"run-{runs}.log"
        with open(log, "w") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "ksearch.server.cli", *RUN, "--db", str(db)],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        # Where to kill: anywhere in the start-up, or a random moment after the driver is at work
        # (a round has begun: evaluating, recording, updating), or just after an attempt was recorded.
        mode = rng.choices(["start", "work", "recorded"], weights=[12, 6, 2])[0]
        if len(points) >= KILLS // 2:
            mode = next((m for m in ("work", "start") if not landed(m)), mode)
        cue = {"start": None, "work": "round ", "recorded": "  attempt "}[mode]
        extra = {
            "start": rng.uniform(0.1, 3.0),
            "work": rng.uniform(0.0, 3.0),
            "recorded": rng.uniform(0.0, 0.6),
        }[mode]
        t0 = time.monotonic()
        if cue is not None and not _await_line(log, cue, p, timeout=120):
            p.wait(timeout=300)
            continue  # it finished before the cue: not a kill point
        try:
            p.wait(timeout=extra)
            continue  # it finished first: not a kill point
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        point = {
            "mode": mode,
            "at_s": round(time.monotonic() - t0, 2),
            "last_output": lines[-1].strip()[:100] if lines else "(nothing yet)",
        }
        points.append(point)
        if not db.exists():
            continue
        if (check := integrity(db)) != "ok":
            problems.append(f"kill {len(points)}: integrity check: {check}")
        after = committed(db)
        for table, rows in before.items():
            changed = [k for k, row in rows.items() if after.get(table, {}).get(k) != row]
            if changed:
                problems.append(f"kill {len(points)} ({point}): {table} rows {changed} changed or vanished")
        try:
            point["rows"] = asyncio.run(_read_everything(db))
        except Exception as e:  # reported below with the kill point that caused it
            problems.append(f"kill {len(points)} ({point}): the store cannot read the database: {e!r}")
        if after:
            max_active = max(max_active, node_statuses(db).count("active"))
    final = ksearch(
        *RUN[:2],
        "--rounds",
        "2",
        "--max-attempts",
        "2",
        "--stagnation",
        "1",
        "--no-final",
        "--plain",
        "--json",
        "--db",
        str(db),
        env=env,
    )
    orphans_gone = True
    try:
        from tests.faults.faultkit import wait_for

        wait_for(
            lambda: not worker_pids(scratch=scratch), timeout=20, what="workers of killed drivers to exit"
        )
    except AssertionError:
        orphans_gone = False
    sessions = scratch / f"ksearch-sandbox-{os.getuid()}" / "sessions"
    return {
        "seed": seed,
        "points": points,
        "problems": problems,
        "max_active": max_active,
        "final": final,
        "db": db,
        "orphans_gone": orphans_gone,
        "stale_sessions": sorted(p.name for p in sessions.glob("*")),
    }


def test_at_least_twenty_kills_landed_at_varied_points(kill_loop: dict[str, Any]) -> None:
    points = kill_loop["points"]
    print(
        f"\nseed {kill_loop['seed']}:",
        *(f"{p['mode']:>8} {p['at_s']:>5}s {p['last_output']}" for p in points),
        sep="\n  ",
    )
    assert len(points) >= 20, f"only {len(points)} kills (seed {kill_loop['seed']})"
    # kills landed in different phases: starting up, and while the driver was at work
    assert {p["mode"] for p in points} >= {"start", "work"}, (kill_loop["seed"], points)
    assert len({p["last_output"][:12] for p in points}) >= 3, (kill_loop["seed"], points)


def test_nothing_committed_is_lost_or_changed_by_a_kill(kill_loop: dict[str, Any]) -> None:
    assert not kill_loop["problems"], f"seed {kill_loop['seed']}:\n" + "\n".join(kill_loop["problems"])


def test_at_most_the_one_intent_in_flight_is_active_after_a_kill(kill_loop: dict[str, Any]) -> None:
    assert kill_loop["max_active"] <= 1  # one sandbox worker on the CPU: one lane, one claimed intent


def test_the_final_resumed_run_completes_with_no_node_left_active(kill_loop: dict[str, Any]) -> None:
    final = kill_loop["final"]
    assert final.returncode == 0, final.stdout[-2000:] + final.stderr[-2000:]
    assert "Traceback" not in final.stdout + final.stderr
    assert "active" not in node_statuses(kill_loop["db"])
    assert integrity(kill_loop["db"]) == "ok"


def test_workers_of_killed_drivers_exit_by_themselves(kill_loop: dict[str, Any]) -> None:
    assert kill_loop["orphans_gone"], "sandbox workers outlived their killed driver"


def test_session_directories_of_killed_drivers_are_swept(kill_loop: dict[str, Any]) -> None:
    assert kill_loop["stale_sessions"] == [], f"{len(kill_loop['stale_sessions'])} stale session directories"
