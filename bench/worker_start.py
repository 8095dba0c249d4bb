"""What a sandbox worker's start costs, started anew (`python -m ksearch.gpu.worker.main`) or forked from the zygote
(gpu/jail/zygote.py), unjailed and jailed, without a GPU or (`--gpu`) on GPU 0.

    python bench/worker_start.py [--starts N] [--gpu] [--out FILE]

One worker slot; after a first start (and the zygote's, when forking), N restarts, each a fresh process that answers
its hello. Measured: wall time per restart, the machine's busy CPU time per restart (/proc/stat, so the processes the
start involves all count: launcher, jail init, worker, zygote), and what the worker itself reports of its start: its
imports (torch and ksearch's worker modules; about nothing in a forked process) and, on a GPU, the CUDA context's
creation. Run on an otherwise idle machine. Writes bench/results/worker-start-{machine}.json.
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

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.sandbox.pool import WorkerProcess

RESULTS = Path(__file__).resolve().parent / "results"


def _busy_s() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


async def _measure(fork: bool, jailed: bool, starts: int, gpu: bool = False) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ksearch-worker-start-"))
    w = WorkerProcess(
        0,
        "0" if gpu else None,
        root,
        shared=root / "shared",
        cpu_mode=not gpu,
        gpu_mem_fraction=0.9,
        memory_limit_bytes=8 << 30,
        jailed=jailed,
        fork=fork,
    )
    try:
        await w.ensure_started()
        walls, cpus, imports, contexts = [], [], [], []
        for _ in range(starts):
            b0, t0 = _busy_s(), time.perf_counter()
            await w.restart("candidate")
            walls.append(time.perf_counter() - t0)
            cpus.append(_busy_s() - b0)
            hello = w.hello or {}
            imports.append(float(hello.get("imports_s", 0.0)))
            contexts.append(float(hello.get("context_s", 0.0)))
        return {
            "fork": fork,
            "jailed": jailed,
            "gpu": gpu,
            "device": (w.hello or {}).get("device"),
            "starts": starts,
            "wall_ms_median": round(1000 * statistics.median(walls), 1),
            "wall_ms_range": [round(1000 * min(walls), 1), round(1000 * max(walls), 1)],
            "machine_cpu_s_mean": round(sum(cpus) / len(cpus), 3),
            "imports_ms_median": round(1000 * statistics.median(imports), 1),
            "context_ms_median": round(1000 * statistics.median(contexts), 1),
            "context_ms_range": [round(1000 * min(contexts), 1), round(1000 * max(contexts), 1)],
        }
    finally:
        await w.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument(
        "--gpu", action="store_true", help="a GPU worker slot (GPU 0): the CUDA context's creation too"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="default bench/results/worker-start-<machine>.json"
    )
    args = ap.parse_args()
    jail_ok = jail.unavailable_reason() is None
    rows = []
    for fork in (False, True):
        for jailed in (False, True) if jail_ok else (False,):
            row = asyncio.run(_measure(fork, jailed, args.starts, args.gpu))
            print(
                f"{'forked' if fork else 'started'} {'jailed' if jailed else 'unjailed'}: "
                f"{row['wall_ms_median']:.0f} ms per start (median of {args.starts}; imports "
                f"{row['imports_ms_median']:.0f} ms, CUDA context {row['context_ms_median']:.0f} ms), "
                f"{row['machine_cpu_s_mean']:.2f} CPU-s of the machine per start"
            )
            rows.append(row)
    cores = os.cpu_count() or 0
    out = {
        "command": "python bench/worker_start.py" + (" --gpu" if args.gpu else ""),
        "machine": {"cores": cores, "platform": platform.platform()},
        "what": f"one {'GPU' if args.gpu else 'CPU-mode'} worker slot restarted N times; wall per restart, machine "
        "busy CPU per restart, the worker's own imports and CUDA context creation",
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    device = str(rows[0].get("device") or "") if rows else ""
    machine = ("h200" if "H200" in device else "gpu") if args.gpu else f"cpu{cores}"
    path = args.out or RESULTS / f"worker-start-{machine}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
