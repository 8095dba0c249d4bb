"""Slow input draws kept on disk, so that every worker process of the machine reuses them bit for bit.

A GPU MODE generator may take tens of seconds per draw (TriMul's CPU Cauchy draws: one 805M-value draw takes
~34 s on one core), and a worker's kept draws (gpu/tasks/draws/input_cache.py) die with its process: a restarted
worker (after a timeout, a crash, a clean baseline measurement) would draw them all again. The store keeps each
slow draw as one file named by a digest of its scope (the task's generator code) and its key (workload, params,
seed), with its checksum and the generators' states right after the draw.

Who writes: only processes that never ran candidate code (the sandbox's baseline-mode workers, which draw ahead
of an evaluation); a candidate's worker sees the store read-only (its jail mounts it so). What is read is
loaded with `weights_only=True` (tensors and plain containers, never arbitrary objects) and checked against its
checksum; a file that fails either is removed, and the draw is made again.

The store keeps itself within `budget_bytes`, the least recently used files out first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT = 1
BUDGET_BYTES = 32 << 30  # and at most a quarter of the free disk where the store lives


def rng_state() -> tuple[Any, ...]:
    """The global generators' states (torch CPU and CUDA, NumPy, `random`)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda, np.random.get_state(), random.getstate()


def set_rng_state(state: tuple[Any, ...]) -> None:
    cpu, cuda, np_state, py_state = state
    torch.set_rng_state(cpu)
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    np.random.set_state(np_state)
    random.setstate(py_state)


def _plain_rng(state: tuple[Any, ...]) -> dict[str, Any]:
    """The states in types `weights_only` loading accepts (NumPy's key array as a tensor)."""
    cpu, cuda, (name, keys, pos, has_gauss, gauss), py = state
    np_keys = torch.from_numpy(np.asarray(keys, dtype=np.uint32).astype(np.int64))
    return {
        "torch": cpu,
        "cuda": cuda,
        "numpy": [name, np_keys, int(pos), int(has_gauss), float(gauss)],
        "random": [py[0], list(py[1]), py[2]],
    }


def _rng_from_plain(d: dict[str, Any]) -> tuple[Any, ...]:
    name, keys, pos, has_gauss, gauss = d["numpy"]
    np_state = (name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss)
    version, internal, gauss_next = d["random"]
    return d["torch"], d["cuda"], np_state, (version, tuple(internal), gauss_next)


def is_plain(value: Any) -> bool:
    """Whether `value` holds only tensors, numbers, strings, None and plain lists, tuples and dicts (what the
    store can write and read back as it was)."""
    if isinstance(value, torch.Tensor):
        return type(value) is torch.Tensor
    if value is None or type(value) in (int, float, bool, str):
        return True
    if type(value) in (list, tuple):
        return all(is_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) in (str, int) and is_plain(v) for k, v in value.items())
    return False


class DrawStore:
    """One directory of kept draws (see the module's docstring)."""

    def __init__(self, path: Path, *, writable: bool, budget_bytes: int = BUDGET_BYTES) -> None:
        self.path = Path(path)
        self.writable = writable
        self.budget = budget_bytes
        self.loaded = 0  # draws served from the store
        self.saved = 0  # draws written to it
        self.refused: list[str] = []  # files removed as unreadable or changed, and why

    def file(self, scope: str, key: tuple[Any, ...]) -> Path:
        digest = hashlib.sha256(f"{FORMAT}\0{scope}\0{key!r}".encode()).hexdigest()[:40]
        return self.path / f"{digest}.pt"

    def has(self, scope: str, key: tuple[Any, ...]) -> bool:
        return self.file(scope, key).is_file()

    def load(
        self, scope: str, key: tuple[Any, ...], checksum: Any
    ) -> tuple[Any, int, tuple[Any, ...]] | None:
        """(data on the host, its checksum, the generators' states after the draw), or None when the store does
        not hold this draw. `checksum(data)` recomputes the sum the file was written with."""
        f = self.file(scope, key)
        if not f.is_file():
            return None
        try:
            obj = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            ok = isinstance(obj, dict) and obj.get("format") == FORMAT and obj.get("key") == repr(key)
            if ok and obj.get("scope") == scope and checksum(obj["data"]) == obj["sum"]:
                with contextlib.suppress(OSError):
                    os.utime(f)  # recently used: the last to go
                self.loaded += 1
                return obj["data"], int(obj["sum"]), _rng_from_plain(obj["rng"])
            why = "its key, scope or checksum does not match"
        except Exception as e:  # a truncated, foreign or hostile file: never used, drawn again
            why = f"{type(e).__name__}: {str(e)[:200]}"
        self.refused.append(f"{f.name}: {why}")
        if self.writable:
            with contextlib.suppress(OSError):
                f.unlink()
        return None

    def save(self, scope: str, key: tuple[Any, ...], data: Any, checksum: int, rng: tuple[Any, ...]) -> bool:
        """Write one draw (host tensors); False when this store is read-only, the data is not plain or the
        draw alone is over the budget."""
        if not self.writable or not is_plain(data):
            return False
        nbytes = _nbytes(data)
        if nbytes > self._budget():
            return False
        self.path.mkdir(parents=True, exist_ok=True)
        f = self.file(scope, key)
        tmp = f.with_name(f".{f.name}.{os.getpid()}.tmp")
        obj = {"format": FORMAT, "scope": scope, "key": repr(key), "sum": checksum, "data": data,
               "rng": _plain_rng(rng), "written": time.time()}  # fmt: skip
        try:
            torch.save(obj, tmp)
            os.replace(tmp, f)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self.saved += 1
        self._trim(keep=f.name)
        return True

    def _budget(self) -> int:
        try:
            st = os.statvfs(self.path if self.path.exists() else self.path.parent)
            return min(self.budget, st.f_bavail * st.f_frsize // 4 + self._used())
        except OSError:
            return self.budget

    def _files(self) -> list[os.DirEntry[str]]:
        try:
            return [e for e in os.scandir(self.path) if e.name.endswith(".pt") and e.is_file()]
        except OSError:
            return []

    def _used(self) -> int:
        return sum(e.stat().st_size for e in self._files())

    def _trim(self, keep: str) -> None:
        """The least recently used files out until the store is within its budget (`keep`: the one just written)."""
        files = sorted((e for e in self._files() if e.name != keep), key=lambda e: e.stat().st_mtime)
        used = self._used()
        budget = self._budget()
        while files and used > budget:
            e = files.pop(0)
            used -= e.stat().st_size
            with contextlib.suppress(OSError):
                os.unlink(e.path)


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0
