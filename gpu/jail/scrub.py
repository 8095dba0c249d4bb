"""The environment a worker (and anything it runs) gets: an allow-list, never the parent's secrets."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ksearch.about import IMPORT_ROOT

# Exact names passed through.
_ALLOW_NAMES = {
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "CUDA_HOME",
    "CUDA_PATH",
    "VIRTUAL_ENV",
    "MAX_JOBS",
    "KSEARCH_FIB",  # whether FlashInfer-Bench's own package builds solutions (gpu/tasks/flashinfer/pkg.py)
}
# Prefixes passed through (toolchains and their caches).
_ALLOW_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "CUPY_", "NCCL_", "CUBLAS_", "NV_")
# Whatever the prefix, a name that looks like a credential is dropped.
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.I)

# The directory holding the `ksearch` package (a checkout's root, or site-packages): on the worker's
# PYTHONPATH it makes `python -m ksearch.gpu.worker.main` import this very copy of ksearch.
PROJECT_ROOT = IMPORT_ROOT


def is_secret_name(name: str) -> bool:
    return bool(_SECRET.search(name))


def scrubbed_env(
    parent: Mapping[str, str] | None = None,
    *,
    home: Path,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Build a worker environment from `parent` (default os.environ) by allow-list.

    HOME and TMPDIR point into the worker's scratch directory; PYTHONPATH keeps the parent's
    entries and adds the project root so the worker can import `gpu` and candidates can import
    `ksearch.gpu.nvrtc`.
    """
    src = os.environ if parent is None else parent
    env: dict[str, str] = {}
    for name, value in src.items():
        if is_secret_name(name):
            continue
        if name in _ALLOW_NAMES or name.startswith(_ALLOW_PREFIXES):
            env[name] = value
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    paths = [str(PROJECT_ROOT)] + [p for p in src.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["HOME"] = str(home)
    env["TMPDIR"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # OpenMP threads spin while they wait: on a machine whose cores are busy with other work, a reference of
    # many small ops (a 6-layer GRU) took 2-9 s a call instead of 0.08 s (2 cores, load 7); sleeping costs
    # large ops nothing measurable
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    for name, value in (extra or {}).items():
        if is_secret_name(name):
            raise ValueError(f"refusing to pass {name!r} to a worker: it looks like a credential")
        env[name] = value
    return env
