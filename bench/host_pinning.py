"""Whether the host's pace of issuing GPU work moves less between processes pinned to one CPU core:
bench/host_probe.py in new processes, unpinned and pinned (`taskset`) to each of two cores -> JSON.

    python bench/host_pinning.py [--out bench/results/host-pinning-h200.json] [--repeats 5]

A launch-bound call's time (the host needs about as long to issue it as the GPU to run it) is the host's pace,
and that pace moved by up to 1.7x between two processes of the same kind (bench/host_overhead.py). If the spread
between processes pinned to one core is much smaller, the process's placement is the cause, and a harness that
pins its timing process reads a launch-bound call the same way each time. The kinds run in turn, `--repeats`
times, so a drift of the machine shows as spread within a kind. Also recorded: the cores the GPU is attached to
(its NUMA node's, from sysfs), the CPU's topology and frequency governor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from host_overhead import run_probe  # noqa: E402  (bench/, the script's own folder)

from ksearch.gpu.jail.smi import query_gpus  # noqa: E402

PROBE = ROOT / "bench" / "host_probe.py"
KEYS = ("torch_op_issue_us", "triton_issue_us", "event_record_us", "fib_events_us")


def _cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part:
            out.append(int(part))
    return out


def gpu_cores() -> tuple[list[int], str | None]:
    """The cores of the GPU's NUMA node (sysfs local_cpulist of its PCI device), and its bus id."""
    rows = query_gpus("pci.bus_id")
    if not rows:
        return [], None
    bus = rows[0][0]
    dev = Path("/sys/bus/pci/devices") / bus.lower()[-12:]
    f = dev / "local_cpulist"
    cores = _cpulist(f.read_text()) if f.exists() else []
    allowed = os.sched_getaffinity(0)
    return [c for c in cores if c in allowed], bus


def topology() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        facts["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout[-3000:]
    except (OSError, subprocess.SubprocessError) as e:
        facts["lscpu"] = f"unavailable: {e}"
    gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    facts["governor"] = gov.read_text().strip() if gov.exists() else None
    return facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "host-pinning-h200.json")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timeout-s", type=float, default=60.0)
    args = ap.parse_args()
    cores, bus = gpu_cores()
    allowed = sorted(os.sched_getaffinity(0))
    near = cores or allowed
    a, b = near[len(near) // 2], near[-1]  # two cores of the GPU's node, away from core 0's interrupts
    py = [sys.executable, str(PROBE), "--no-profiler"]
    kinds = {
        "unpinned": py,
        f"pinned_core{a}": ["taskset", "-c", str(a), *py],
        f"pinned_core{b}": ["taskset", "-c", str(b), *py],
    }
    res: dict[str, Any] = {
        "what": "host microseconds to issue GPU work, in new processes, unpinned and pinned to one core",
        "command": "python bench/host_pinning.py",
        "cpus": os.cpu_count(),
        "allowed_cpus": allowed,
        "gpu_bus_id": bus,
        "gpu_node_cores": cores,
        "python": platform.python_version(),
        **topology(),
        "runs": {k: [] for k in kinds},
    }
    for rep in range(args.repeats):
        for name, cmd in kinds.items():
            row = run_probe(cmd, None, args.timeout_s)
            res["runs"][name].append(row)
            print(name, rep, json.dumps(row)[:300], flush=True)
    summary: dict[str, Any] = {}
    for name, rows in res["runs"].items():
        per: dict[str, Any] = {}
        for k in KEYS:
            vals = [r["plain"][k] for r in rows if "plain" in r]
            if vals:
                per[k] = {
                    "min": min(vals),
                    "median": round(statistics.median(vals), 2),
                    "max": max(vals),
                    "max_over_min": round(max(vals) / min(vals), 3) if min(vals) > 0 else None,
                }
        summary[name] = per
    res["summary"] = summary
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
