"""The limits of a jail and how its init (PID 1 of the jail's PID namespace) measures them.

Init watches every process of the namespace, which nothing inside can leave (a new session or process
group does not take a process out of it, as it does out of a parent's process-group watch): how many
there are, their resident memory together, the bytes in the jail's writable directories (its scratch
directories and its /dev/shm) and how much the compiler caches grew since the jail started. Over a limit,
init says which (a line starting "resource_limit: ") and ends: the kernel then kills every process of the
namespace at once, a fork bomb's too, and no new one can be made there.

RLIMIT_AS is no limit here: CUDA reserves far more address space than it uses, so a limit on it breaks
GPU workers; resident memory is what is measured.
"""

from __future__ import annotations

import os
import resource
import stat
import time
from dataclasses import dataclass

RESOURCE_LIMIT = "resource_limit"
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Limits:
    """What one jail may use; None: not limited."""

    processes: int | None = 512  # at once; threads are not counted (a GPU worker runs ~100)
    memory_bytes: int | None = None  # resident memory of all its processes together
    disk_bytes: int | None = 4 << 30  # in its writable directories and /dev/shm
    cache_growth_bytes: int | None = 16 << 30  # added to the compiler caches while it lives

    def args(self) -> list[str]:
        """The jail's command-line flags for these limits."""
        out: list[str] = []
        for flag, value in (
            ("--max-procs", self.processes),
            ("--max-memory", self.memory_bytes),
            ("--max-disk", self.disk_bytes),
            ("--max-cache-growth", self.cache_growth_bytes),
        ):
            out += [flag, "none" if value is None else str(int(value))]
        return out

    def describe(self) -> str:
        parts = []
        if self.processes is not None:
            parts.append(f"{self.processes} processes")
        if self.memory_bytes is not None:
            parts.append(f"{_size(self.memory_bytes)} host memory")
        if self.disk_bytes is not None:
            parts.append(f"{_size(self.disk_bytes)} scratch disk")
        return ", ".join(parts) or "none"


LIMIT_FLAGS = {
    "--max-procs": "processes",
    "--max-memory": "memory_bytes",
    "--max-disk": "disk_bytes",
    "--max-cache-growth": "cache_growth_bytes",
}


def _size(n: float) -> str:
    if n >= 1 << 30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB"


def tree_bytes(path: str) -> int:
    """Bytes a directory's files take on disk (allocated blocks: a sparse file counts what it holds)."""
    total = 0
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(e.path)
        except OSError:
            continue
    return total


def tmpfs_bytes(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def jail_processes() -> list[int]:
    """Every process of this PID namespace but init itself (PID 1)."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and d != "1"]


def resident_bytes(pids: list[int]) -> int:
    """Resident memory summed over `pids` (cheap; counts a page shared after a fork in every process)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


def proportional_bytes(pids: list[int]) -> int:
    """Proportional set size summed over `pids`: a page shared by n processes counts 1/n in each, so forked
    children of a large process do not add up to many times its memory (costlier: read only when the
    resident sum, its upper bound, is over a limit)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            total += resident_bytes([pid])
    return total


class Watch:
    """Init's measure of the jail against its limits."""

    def __init__(self, limits: Limits, scratch: list[str], caches: list[str], tmpfs: list[str]) -> None:
        self.limits = limits
        self.scratch = scratch
        self.caches = caches
        self.tmpfs = tmpfs
        self._cache_start = sum(tree_bytes(c) for c in caches) if limits.cache_growth_bytes is not None else 0
        self._pss: tuple[float, int] = (0.0, 0)  # (when, bytes): the proportional sum, at most every 0.5 s

    def check(self, disk: bool, caches: bool = False) -> str | None:
        """What is over its limit ("resource_limit: ..."), or None; `disk`: also walk the scratch
        directories, `caches`: the compiler caches (which may hold many thousand files)."""
        lim = self.limits
        pids = jail_processes()
        if lim.processes is not None and len(pids) > lim.processes:
            return (
                f"{RESOURCE_LIMIT}: process count: {len(pids)} processes at once, over the limit of "
                f"{lim.processes} (a fork bomb?)"
            )
        if lim.memory_bytes is not None:
            rss = resident_bytes(pids)
            if rss > lim.memory_bytes:
                rss = self._proportional(pids)
            if rss > lim.memory_bytes:
                return (
                    f"{RESOURCE_LIMIT}: host memory: {_size(rss)} resident, over the host-memory limit of "
                    f"{_size(lim.memory_bytes)}"
                )
        if not disk:
            return None
        if lim.disk_bytes is not None:
            used = sum(tree_bytes(d) for d in self.scratch) + sum(tmpfs_bytes(t) for t in self.tmpfs)
            if used >= lim.disk_bytes:
                return (
                    f"{RESOURCE_LIMIT}: scratch disk: {_size(used)} written (scratch directory and /dev/shm), "
                    f"over the limit of {_size(lim.disk_bytes)}"
                )
        if caches and lim.cache_growth_bytes is not None and self.caches:
            grown = sum(tree_bytes(c) for c in self.caches) - self._cache_start
            if grown >= lim.cache_growth_bytes:
                return (
                    f"{RESOURCE_LIMIT}: scratch disk: the compiler caches grew by {_size(grown)}, over the "
                    f"limit of {_size(lim.cache_growth_bytes)}"
                )
        return None

    def _proportional(self, pids: list[int]) -> int:
        # reading smaps waits for a process that is forking (it holds its memory map): not every poll
        now = time.monotonic()
        if now - self._pss[0] >= 0.5:
            self._pss = (now, proportional_bytes(pids))
        return self._pss[1]


def set_command_rlimits(limits: Limits, file_size: bool = True) -> None:
    """Kernel limits for the command, before it runs (they also hold where init's watch is late):
    RLIMIT_NPROC bounds a fork bomb for a user other than root (the kernel does not apply it to root's
    processes, whatever the namespace: there init's count is what stops it); RLIMIT_FSIZE stops a single
    file at the disk limit (`file_size`; not for a command given a store); no core files."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.processes is not None:
        _lower(resource.RLIMIT_NPROC, max(4096, 32 * limits.processes))  # threads count here
    if limits.disk_bytes is not None and file_size:
        _lower(resource.RLIMIT_FSIZE, limits.disk_bytes)


def _lower(which: int, value: int) -> None:
    """Lower both the soft and the hard limit (the command cannot raise a hard limit again)."""
    soft, hard = resource.getrlimit(which)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (cap if soft == resource.RLIM_INFINITY else min(soft, cap), cap))
