"""How a suite scales with its slots: candidates evaluated per minute on 1, 2, 4 … GPUs (or Ray actors).

Runs the same suite (the tuner policy, fixed rounds and attempts, no final evaluation) once per slot count, each in
a fresh database, as a user would (`ksearch suite run … --gpus 0,1`), and reads the attempts it recorded:

    python bench/suite_scaling.py --tasks .ext/kb/KernelBench/level1 --limit 8 --slots 1,2,4 \
        --out bench/results/suite-scaling-h200.json
    python bench/suite_scaling.py ... --ray auto          # the same through a Ray cluster's actors
    python bench/suite_scaling.py --tasks softmax,row_sum --slots 1,2 --cpu   # CPU slots (--parallel), a dry run
    python bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 --slots 1,2,4   # 8 elementwise problems

KernelBench problems have no seed kernel, and the offline tuner only tunes one: `--kb-level1` takes the eight
elementwise problems bench/suite_starts.py has starting kernels for, and the suite starts each from its kernel
(`--starts`); `--starts DIR` gives any other folder of them.

`--warm-up-s N` first runs the suite on one slot for N s, uncounted (its row is `warm_up`): the machine's one-time
setup (the GPU's measured ceilings, cold compiler caches) otherwise falls on the first measured run alone.

Candidates per minute = attempts recorded / the suite's working time (up to --budget-s, when the suite is stopped
there as Ctrl-C stops it; `wall_s` adds the stop); `per_min_after_first` counts from the first recorded candidate on,
without the setup. Speedup = the per-minute rate over the 1-slot rate. `first_attempt_s`: the suite's start to its first
recorded candidate (baselines and task facts before it). The suite's output streams to a log as it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _tasks(spec: str, limit: int) -> list[str]:
    p = Path(spec)
    if p.is_dir():
        return [str(f) for f in sorted(p.glob("*.py"), key=lambda f: (len(f.name), f.name))][:limit]
    return [t for t in spec.split(",") if t][:limit]


def _attempts(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(db)
    try:
        n, ok = con.execute(
            "SELECT count(*), coalesce(sum(status = 'ok'), 0) FROM attempts WHERE author != 'seed'"
        ).fetchone()
        return int(n), int(ok)
    finally:
        con.close()


def _first_attempt_s(db: Path, t0_wall: float) -> float | None:
    """Seconds from the suite's start to its first recorded candidate: what setup (baselines, facts) cost."""
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT min(created_at) FROM attempts WHERE author != 'seed'").fetchone()
    finally:
        con.close()
    if not row or not row[0]:
        return None
    return round(datetime.fromisoformat(row[0]).timestamp() - t0_wall, 1)


def run_once(
    tasks: list[str],
    slots: int,
    a: argparse.Namespace,
    work: Path,
    *,
    tag: str = "",
    budget_s: float | None = None,
) -> dict[str, Any]:
    budget = a.budget_s if budget_s is None else budget_s
    db = work / f"{tag}slots{slots}.db"
    cmd = [sys.executable, "-m", "ksearch.server.cli", "suite", "run", *tasks, "--name", f"{tag}s{slots}",
           "--policy", "tuner", "--rounds", str(a.rounds), "--max-attempts", str(a.max_attempts), "--no-final",
           "--db", str(db)]  # fmt: skip
    if a.starts:
        cmd += ["--starts", str(a.starts)]
    if a.ray:
        cmd += ["--ray", a.ray, "--gpus", ",".join(str(i) for i in range(slots))]
    elif a.cpu:
        cmd += ["--parallel", str(slots)]
    else:
        cmd += ["--gpus", ",".join(str(i) for i in range(slots))]
    t0_wall = time.time()
    t0 = time.monotonic()
    log = work / f"{tag}slots{slots}.log"
    stopped = False
    # Streamed to a file, not captured: a run cut off by an outer timeout still leaves its progress.
    with log.open("w") as fh:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
        try:
            p.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            # The budget: stop the suite as Ctrl-C does (it records what finished and can resume), then count.
            stopped = True
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    wall = time.monotonic() - t0
    worked = min(wall, budget) if stopped and budget else wall  # not the seconds the stop itself took
    if p.returncode != 0 and not stopped:
        raise SystemExit(f"suite with {slots} slots failed ({p.returncode}):\n{log.read_text()[-3000:]}")
    n, ok = _attempts(db)
    first = _first_attempt_s(db, t0_wall)
    # the rate once the first candidate is in: setup (baselines, facts, cold compiler caches) left out
    steady = (
        round((n - 1) / ((worked - first) / 60), 2)
        if first is not None and n > 1 and worked > first
        else None
    )
    return {"slots": slots, "wall_s": round(wall, 1), "worked_s": round(worked, 1), "attempts": n, "correct": ok,
            "per_min": round(n / (worked / 60), 2), "per_min_after_first": steady, "stopped_at_budget": stopped,
            "first_attempt_s": first}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", help="a folder of task files, or comma-separated tasks")
    ap.add_argument("--kb-level1", type=Path, help="KernelBench's level1 folder: its 8 elementwise problems, started "
                    "from bench/suite_starts.py's kernels")  # fmt: skip
    ap.add_argument(
        "--starts", type=Path, help="a folder of starting kernels, one per task (suite run --starts)"
    )
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--slots", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-attempts", type=int, default=3)
    ap.add_argument("--ray", help="a Ray cluster's address: its actors are the slots")
    ap.add_argument("--cpu", action="store_true", help="CPU interpreter slots (--parallel), no GPU")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--budget-s", type=float, default=None, help="per slot count: stop the suite (as Ctrl-C does) "
                    "after this long and count what it recorded")  # fmt: skip
    ap.add_argument("--warm-up-s", type=float, default=0.0, help="first run the suite on one slot for this long, "
                    "uncounted: the machine's one-time setup (measured ceilings, compiler caches) is then not in the "
                    "first measured run alone")  # fmt: skip
    a = ap.parse_args(argv)
    if (a.tasks is None) == (a.kb_level1 is None):
        ap.error("give --tasks or --kb-level1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ksearch-scaling-") as tmp:
        if a.kb_level1 is not None:
            from suite_starts import OPS, write_starts  # bench/, the script's own folder

            tasks = [str(a.kb_level1 / f"{name}.py") for name in OPS][: a.limit]
            a.starts = a.starts or Path(tmp) / "starts"
            write_starts(a.starts)
        else:
            tasks = _tasks(a.tasks, a.limit)
        warm = (
            run_once(tasks, 1, a, Path(tmp), tag="warm-", budget_s=a.warm_up_s) if a.warm_up_s > 0 else None
        )
        for n in [int(x) for x in a.slots.split(",")]:
            rows.append(run_once(tasks, n, a, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
            if a.out:
                logs = a.out.parent / "logs"
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"{a.out.stem}-slots{n}.log").write_text((Path(tmp) / f"slots{n}.log").read_text())
    base = rows[0]["per_min"]
    for r in rows:
        r["speedup_over_first"] = round(r["per_min"] / base, 2) if base else None
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.split("\n")[0] if not a.cpu else "cpu"  # fmt: skip
    doc = {
        "what": "candidates evaluated per minute by one suite (tuner policy) on 1, 2, 4 … slots",
        "device": smi,
        "backend": "ray" if a.ray else ("cpu" if a.cpu else "local"),
        "tasks": tasks,
        "starts": "bench/suite_starts.py"
        if a.kb_level1 is not None
        else (str(a.starts) if a.starts else None),
        "rounds": a.rounds,
        "warm_up": warm,
        "max_attempts": a.max_attempts,
        "rows": rows,
    }
    if a.out:
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
