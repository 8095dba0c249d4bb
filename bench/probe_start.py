"""What a task-facts probe costs, forked from this process's probe zygote or started anew (KSEARCH_FORK_WORKERS=0).

    python bench/probe_start.py [--tasks softmax,gemm_bf16,...] [--out FILE]

Each way, every task is probed once with an empty facts cache, in one process, as a test worker, an MCP server or a
suite probes the tasks it meets. Measured: the wall time of each probe, and the machine's busy CPU time over all of
them (/proc/stat: the zygote's start, the forks, the jails and the probes themselves all count), the zygote's start
included on the forked side. The two ways' answers are compared (all but their timings must be equal). Run on an
otherwise idle machine. Writes bench/results/probe-start-{machine}.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # bench/, the script's own folder

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.zygote import PROBE_PROGRAM
from ksearch.gpu.jail.zygote_client import _zygotes
from ksearch.gpu.tasks import facts, load_task

RESULTS = Path(__file__).resolve().parent / "results"
TASKS = "softmax,gemm_bf16,layernorm,rmsnorm,swiglu,cross_entropy,conv2d,row_sum"


def _busy_s() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def _one_way(fork: bool, names: list[str]) -> dict[str, Any]:
    os.environ["KSEARCH_FORK_WORKERS"] = "1" if fork else "0"
    os.environ["KSEARCH_FACTS_CACHE"] = tempfile.mkdtemp(prefix="ksearch-probe-start-")
    facts._probed.clear()
    tasks = [load_task(n) for n in names]
    walls, answers = [], {}
    busy0 = _busy_s()
    for t in tasks:
        t0 = time.perf_counter()
        r = facts.probe_task(t)
        walls.append(time.perf_counter() - t0)
        if r.error:
            raise SystemExit(f"{t.name}: the probe failed: {r.error}")
        answers[t.name] = r.answer()
    busy = _busy_s() - busy0
    zygotes = [z for z in _zygotes.values() if z.program == PROBE_PROGRAM and z.failed is None]
    return {
        "way": "forked from the probe zygote" if fork else "started anew",
        "first_probe_s": round(walls[0], 3),
        "later_probe_s_median": round(statistics.median(walls[1:]), 3),
        "later_probe_s": [round(w, 3) for w in walls[1:]],
        "machine_busy_cpu_s": round(busy, 2),
        "machine_busy_cpu_s_per_probe": round(busy / len(tasks), 2),
        "forks": sum(z.forks for z in zygotes) if fork else 0,
        "_answers": answers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=TASKS, help="built-in task names, comma-separated (at least 2)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    names = [n for n in args.tasks.split(",") if n]
    if len(names) < 2:
        raise SystemExit("--tasks: at least 2 tasks (the first probe of a way pays for its zygote)")
    started = _one_way(False, names)
    forked = _one_way(True, names)
    same = started.pop("_answers") == forked.pop("_answers")
    machine = f"cpu{os.cpu_count()}"
    result = {
        "what": "task-facts probes of built-in tasks, each once with an empty cache, in one process",
        "commit": provenance.commit(),
        "dirty": provenance.dirty(),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "gpu": False},
        "jailed": jail.unavailable_reason() is None,
        "tasks": names,
        "same_answers": same,
        "started": started,
        "forked": forked,
    }
    out = args.out or RESULTS / f"probe-start-{machine}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    for r in (started, forked):
        print(
            f"{r['way']}: first {r['first_probe_s']} s, then median {r['later_probe_s_median']} s a probe; "
            f"{r['machine_busy_cpu_s_per_probe']} CPU-s a probe, the machine's"
        )
    print(f"same answers: {same}; wrote {out}")
    if not same:
        raise SystemExit("the forked and started probes answered differently")


if __name__ == "__main__":
    main()
