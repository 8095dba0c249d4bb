"""A simulated GPU, for testing the sandbox's GPU scheduling on a machine without one (never for measurements).

With `KSEARCH_SIMULATED_GPUS=N` (or `LocalSandbox(simulated_gpus=N)`) the sandbox runs as on an N-GPU machine: one
worker slot per "GPU", spares, clean baseline processes, background baselines, draws ahead, the ceilings'
measurement and the kernel audit all on, in the order and with the waits a GPU machine has. The workers themselves
run candidates in Triton's interpreter on the CPU; they introduce themselves as a simulated GPU and answer the
ceilings' measurement after a realistic delay with fixed figures. Every timing such a worker reports is a CPU time
and its device name says so: nothing measured here is a GPU's figure.
"""

from __future__ import annotations

import os
import time
from typing import Any

DEVICE = "simulated GPU (CPU interpreter)"
ENV = "KSEARCH_SIMULATED_GPUS"
# seconds an H200 worker spends before its hello (CUDA context) and measuring the ceilings (copies, matmuls)
START_S = 0.3
HARDWARE_S = 2.0


def count() -> int:
    """The number of GPUs to simulate, from KSEARCH_SIMULATED_GPUS (0: none)."""
    v = os.environ.get(ENV, "").strip()
    if not v:
        return 0
    if not v.isdigit() or int(v) > 16:
        raise ValueError(f"{ENV}={v!r}: accepted values are 0 (no simulation) to 16 (simulated GPUs)")
    return int(v)


def worker_config(hardware_s: float = HARDWARE_S, start_s: float = START_S) -> dict[str, Any]:
    """What a worker process is told about its simulated GPU (under "simulate" in its configuration)."""
    return {"hardware_s": hardware_s, "start_s": start_s}


def hello(facts: dict[str, Any]) -> dict[str, Any]:
    """A worker's hello as a GPU worker's reads (an H200's shape), its device named as simulated."""
    return {
        **facts,
        "device": DEVICE,
        "cpu_mode": False,
        "sm_count": 132,
        "compute_capability": "9.0",
        "memory_gb": 139.8,
        "l2_bytes": 60 << 20,
        "simulated": True,
    }


def ceilings(cfg: dict[str, Any]) -> dict[str, Any]:
    """The ceilings' measurement: it takes the worker as long as a GPU's does, and gives fixed figures."""
    t0 = time.perf_counter()
    time.sleep(float(cfg.get("hardware_s", HARDWARE_S)))
    return {
        "copy_bandwidth_Bps": 4.2e12,
        "read_bandwidth_Bps": 4.4e12,
        "write_bandwidth_Bps": 4.3e12,
        "bandwidth_Bps": 4.4e12,
        "matmul_flops": {"bfloat16": 7.8e14, "float16": 7.5e14, "float32": 5.0e13},
        "seconds": time.perf_counter() - t0,
        "simulated": True,
    }
