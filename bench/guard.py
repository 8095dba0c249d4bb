"""Cost of the identity check that runs after each call into a candidate (gpu/checks/guard.py).

Usage:  python bench/guard.py [--reps 200] [--out bench/results/guard-cpu.json]

Times `guard.replaced(before, guard.fingerprint(reference))` — what the worker does after a load, a
correctness check and a benchmark — with the softmax task's reference module watched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "guard-cpu.json")
    args = ap.parse_args()

    import torch

    from ksearch.gpu.checks import guard
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.rt.runtime import TaskRuntime

    guard.prepare()
    reference = TaskRuntime(load_task("softmax")).reference_module
    before = guard.fingerprint(reference)
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        changed = guard.replaced(before, guard.fingerprint(reference))
        times.append((time.perf_counter() - t0) * 1e3)
        assert not changed, changed
    out = {
        "what": "one identity check (fingerprint + compare) as run after each call into a candidate",
        "command": "python bench/guard.py",
        "functions_watched": len(before),
        "ms": {
            "median": round(statistics.median(times), 3),
            "p90": round(sorted(times)[int(0.9 * len(times))], 3),
            "n": len(times),
        },
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
