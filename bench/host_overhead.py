"""Where a jailed worker's extra host time comes from: bench/host_probe.py in several kinds of process -> JSON.

    python bench/host_overhead.py [--out bench/results/host-overhead-h200.json] [--repeats 2]

A launch-bound candidate (one whose host needs about as long to issue a call as the GPU needs to run it) timed
in ksearch's jail read slower than in a plain process. The probe measures the host's cost of issuing a torch op,
a Triton launch and a CUDA event record, and FlashInfer-Bench's events loop (which reads a kernel's own time only
while the host keeps ahead of the GPU), before and after a profiler session. The kinds of process: plain; plain
with a per-process memory fraction (as workers set); `unshare` with a user namespace alone, and with a network,
mount, PID namespace each, and all of them; a plain process with a worker's environment; ksearch's jail as
workers run in it (its limits on), with every limit off (its init still reaps but measures nothing), and with
/sys shown. Each kind runs `--repeats` times, in turn, so that a drift
of the machine shows as spread within a kind rather than as a difference between kinds. On one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PROBE = ROOT / "bench" / "host_probe.py"
RMSNORM = (
    ROOT / "bench" / "side_by_side" / "flashinfer" / "kernels" / "rmsnorm_h4096_rows.py"
)  # the probe loads it


def kinds(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    from ksearch.gpu.jail import launch as jail
    from ksearch.gpu.jail import view as jail_view
    from ksearch.gpu.jail.limits import Limits
    from ksearch.gpu.jail.scrub import scrubbed_env

    py = [sys.executable, str(PROBE)]
    cache = tmp / "triton-cache"
    cache.mkdir(exist_ok=True)
    plain_env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    us = ["unshare", "--user", "--map-root-user"]
    out: dict[str, tuple[list[str], dict[str, str]]] = {
        "plain": (py, plain_env),
        "plain_mem_fraction": ([*py, "--mem-fraction"], plain_env),
        "userns": ([*us, *py], plain_env),
        "userns_net": ([*us, "--net", *py], plain_env),
        "userns_mount": ([*us, "--mount", *py], plain_env),
        "userns_pid": ([*us, "--pid", "--fork", *py], plain_env),
        "userns_all": ([*us, "--net", "--mount", "--pid", "--fork", *py], plain_env),
    }
    nodes, visible = jail_view.gpu_view("0")
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    env = scrubbed_env(home=scratch, extra={"CUDA_VISIBLE_DEVICES": visible, "TRITON_CACHE_DIR": str(cache)})
    out["plain_worker_env"] = (py, env)  # the environment a worker gets, without the jail
    for name, limits, shown in (
        ("jail", Limits(), []),
        ("jail_no_limits", Limits(None, None, None, None), []),
        (
            "jail_with_sys",
            Limits(),
            ["/sys"],
        ),  # the driver reads PCI and NUMA facts from /sys, which a jail hides
    ):
        readable = [str(PROBE), str(RMSNORM), *shown]
        cmd = jail.wrap(py, [scratch], caches=[cache], readable=readable, devices=nodes, limits=limits)
        out[name] = (cmd, env)
    return out


def run_probe(cmd: list[str], env: dict[str, str] | None, timeout_s: float) -> dict[str, Any]:
    """One probe process: its last JSON line (else its exit code and stderr's tail), with its wall seconds."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        row: dict[str, Any] = (
            json.loads(lines[-1]) if lines else {"rc": p.returncode, "stderr_tail": p.stderr[-1500:]}
        )
    except subprocess.TimeoutExpired:
        row = {"error": f"timed out after {timeout_s:.0f} s"}
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "host-overhead-h200.json")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=90.0)
    args = ap.parse_args()
    import torch

    res: dict[str, Any] = {
        "what": "host microseconds to issue GPU work, and FlashInfer-Bench's events loop, by kind of process",
        "command": "python bench/host_overhead.py",
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="ks-host-") as t:
        todo = kinds(Path(t))
        for rep in range(args.repeats):
            for name, (cmd, env) in todo.items():
                row = run_probe(cmd, env, args.timeout_s)
                res["runs"].setdefault(name, []).append(row)
                print(name, rep, json.dumps(row)[:400], flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
