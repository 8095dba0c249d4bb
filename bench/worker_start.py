"""What a sandbox worker's start costs, started anew (`python -m ksearch.gpu.worker`) or forked from the zygote
(gpu/zygote.py), unjailed and jailed, without a GPU.

    python bench/worker_start.py [--starts N]

One worker slot in CPU mode; after a first start (and the zygote's, when forking), N restarts, each a fresh
process that answers its hello. Measured: wall time per restart and the machine's busy CPU time per restart
(/proc/stat, so the processes the start involves all count: launcher, jail init, worker, zygote). Run on an
otherwise idle machine. Writes bench/results/worker-start-{machine}.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ksearch.gpu import jail
from ksearch.gpu.pool import WorkerProcess

RESULTS = Path(__file__).resolve().parent / "results"


def _busy_s() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


async def _measure(fork: bool, jailed: bool, starts: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ksearch-worker-start-"))
    w = WorkerProcess(
        0,
        None,
        root,
        shared=root / "shared",
        cpu_mode=True,
        gpu_mem_fraction=0.9,
        memory_limit_bytes=8 << 30,
        jailed=jailed,
        fork=fork,
    )
    try:
        await w.ensure_started()
        walls, cpus = [], []
        for _ in range(starts):
            b0, t0 = _busy_s(), time.perf_counter()
            await w.restart("candidate")
            walls.append(time.perf_counter() - t0)
            cpus.append(_busy_s() - b0)
        return {
            "fork": fork,
            "jailed": jailed,
            "starts": starts,
            "wall_ms_median": round(1000 * statistics.median(walls), 1),
            "wall_ms_range": [round(1000 * min(walls), 1), round(1000 * max(walls), 1)],
            "machine_cpu_s_mean": round(sum(cpus) / len(cpus), 3),
        }
    finally:
        await w.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    args = ap.parse_args()
    jail_ok = jail.unavailable_reason() is None
    rows = []
    for fork in (False, True):
        for jailed in (False, True) if jail_ok else (False,):
            row = asyncio.run(_measure(fork, jailed, args.starts))
            print(
                f"{'forked' if fork else 'started'} {'jailed' if jailed else 'unjailed'}: "
                f"{row['wall_ms_median']:.0f} ms per start (median of {args.starts}), "
                f"{row['machine_cpu_s_mean']:.2f} CPU-s of the machine per start"
            )
            rows.append(row)
    cores = os.cpu_count() or 0
    out = {
        "command": "python bench/worker_start.py",
        "machine": {"cores": cores, "platform": platform.platform()},
        "what": "one CPU-mode worker slot restarted N times; wall per restart and machine busy CPU per restart",
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"worker-start-cpu{cores}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
