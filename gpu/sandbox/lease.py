"""A machine-wide lease on one GPU, held by the sandbox call that uses it: no two ksearch processes on a machine (two
MCP servers, a driver beside a server, a suite's sandboxes on one scratch root) run work on one GPU at once, so no
timing overlaps GPU work that another ksearch process started.

An advisory `flock` on `<root>/leases/gpu-<id>.lock`, taken without blocking and retried, so that a waiting call stays
cancellable and bounded; the file names its holder (pid and what it does) for a waiter that gives up. The kernel
drops the lock when the holder's process dies (kill -9 included): a lease is never left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from pathlib import Path

from ksearch.worldmodel.errors import KsearchError

POLL_S = 0.05


class LeaseTimeout(KsearchError):
    """The GPU stayed leased by another process past the wait's bound; the message names the holder."""


class GpuLease:
    """The lease on one GPU of this machine (`gpu`: its id as the pool names it)."""

    def __init__(self, root: Path, gpu: str) -> None:
        self.path = root / "leases" / f"gpu-{gpu.replace('/', '_')}.lock"
        self.gpu = gpu
        self._fd: int | None = None

    def holder(self) -> str:
        """Who holds the lease, as its file says ("" when unknown)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    async def take(self, purpose: str, timeout_s: float) -> float:
        """Take the lease, waiting at most `timeout_s`; the seconds waited."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        t0 = time.monotonic()
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() - t0 >= timeout_s:
                        raise LeaseTimeout(
                            f"GPU {self.gpu} stayed in use by another ksearch process for {timeout_s:.0f} s "
                            f"({self.holder() or 'holder unknown'})"
                        ) from None
                    await asyncio.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {purpose}\n".encode(), 0)
        self._fd = fd
        return time.monotonic() - t0

    def give_back(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor drops the flock
