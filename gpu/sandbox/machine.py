"""The machine a sandbox runs on: the GPUs this process may use, the defaults of its worker slots (spare processes,
forks from a zygote) and the sweep of session directories whose processes are gone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ksearch.gpu.jail.smi import query_gpus
from ksearch.gpu.jail.zygote_client import forking
from ksearch.gpu.sandbox.api import SandboxError


def gpus_visible() -> bool:
    """Whether nvidia-smi lists a GPU this process may use (KSEARCH_CPU_MODE=1: never)."""
    return bool(query_gpu_facts()[0])


def visible_gpus() -> list[str]:
    """The ids of the GPUs this process may use (as CUDA_VISIBLE_DEVICES names them); [] without one."""
    return query_gpu_facts()[0]


def query_gpu_facts() -> tuple[list[str], str | None, str | None]:
    """(visible GPU ids, driver version, compute capability) from nvidia-smi; ([], None, None) without one."""
    if os.environ.get("KSEARCH_CPU_MODE") == "1":
        return [], None, None
    rows = query_gpus("index,driver_version,compute_cap")
    if not rows:
        return [], None, None
    ids = [r[0] for r in rows]
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        wanted = [x.strip() for x in cvd.split(",") if x.strip()]
        ids = [] if (not wanted or wanted[0].startswith("-")) else wanted
    driver = rows[0][1] if len(rows[0]) > 1 else None
    cc = rows[0][2] if len(rows[0]) > 2 else None
    return ids, driver, cc


def sweep_dead_sessions(sessions: Path) -> None:
    """Remove the session directories of processes that are gone (a SIGKILLed driver cannot clean
    up after itself). A directory is named `<pid>-<token>`; a live or unknown owner keeps it."""
    if not sessions.is_dir():
        return
    for d in sessions.iterdir():
        pid = d.name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (PermissionError, OverflowError):
            continue  # someone else's process: not ours to judge


def spares_default(cpu_mode: bool) -> bool:
    """Whether worker slots keep a spare process: KSEARCH_SPARE_WORKERS=1|0, else on a GPU only (on the CPU a
    spare's start takes the cores the interpreter runs candidates on, and a cold start there is a few seconds)."""
    v = os.environ.get("KSEARCH_SPARE_WORKERS", "").strip()
    if v in ("0", "1"):
        return v == "1"
    if v:
        raise SandboxError(f"KSEARCH_SPARE_WORKERS={v!r}: accepted values are 1 (keep a spare) and 0 (none)")
    return not cpu_mode


def forks_default(cpu_mode: bool) -> bool:
    """Whether worker slots fork their processes from a zygote (gpu/jail/zygote.py): KSEARCH_FORK_WORKERS=1|0, else yes,
    with or without a GPU. The zygote never touches CUDA; each forked worker creates its own context (0.18 s on an
    H200), so a fresh process per candidate costs 0.7 s there instead of 6.5 s of imports
    (`bench/worker_start.py --gpu` → worker-start-h200.json). `cpu_mode` is kept for callers that ask per mode."""
    try:
        return forking()
    except ValueError as e:
        raise SandboxError(str(e)) from None
