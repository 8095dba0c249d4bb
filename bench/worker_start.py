"""What one sandbox worker's start costs: wall seconds until it answers, and CPU seconds across the machine.

    python bench/worker_start.py [--restarts 8] [--out PATH]

Starts a LocalSandbox with one worker (jailed where the machine allows it, as ksearch runs), then restarts that
worker `--restarts` times, each a new process that imports what a worker imports and says hello. CPU time is the
machine's busy time (/proc/stat) over the restarts, so run it on a quiet machine; wall time per restart is its own.
Writes bench/results/worker-start-{machine}.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ksearch.gpu.sandbox import LocalSandbox

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _busy_s() -> float:
    vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(vals[:3]) + sum(vals[5:8])) / TICK


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    sb = LocalSandbox(scratch_dir=tempfile.mkdtemp(prefix="ksearch-wstart-"), n_workers=1)
    walls: list[float] = []
    try:
        w = sb.pool.workers[0]
        await w.ensure_started()
        busy0 = _busy_s()
        for _ in range(a.restarts):
            t0 = time.perf_counter()
            await w.restart("candidate")
            await w.ensure_started()
            walls.append(time.perf_counter() - t0)
        cpu = (_busy_s() - busy0) / a.restarts
        hello = w.hello or {}
    finally:
        await sb.close()
    machine = "gpu" if not sb.cpu_mode else f"cpu{os.cpu_count()}"
    out = a.out or ROOT / "bench" / "results" / f"worker-start-{machine}.json"
    res = {
        "restarts": a.restarts,
        "isolation": sb.isolation,
        "device": hello.get("device"),
        "torch": hello.get("torch"),
        "triton": hello.get("triton"),
        "wall_s_median": round(statistics.median(walls), 3),
        "wall_s_max": round(max(walls), 3),
        "cpu_s_per_start": round(cpu, 3),
        "cores": os.cpu_count(),
        "method": "machine busy time from /proc/stat over the restarts, divided by their number (a quiet machine "
        "assumed); wall from the restart call until the new process's hello",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
