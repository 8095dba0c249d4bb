"""torch extension builds that survive a builder killed mid-build.

torch.utils.cpp_extension serialises the builds of one extension with a file baton: the first builder creates
`<build dir>/lock`, every other one waits until that file is gone. A builder killed mid-build (a candidate past
its time limit, a cancelled call, Ctrl-C) leaves the file behind, and every later build of that extension in the
machine's shared compiler cache then waits forever: the sandbox reports a load that never ends, on every call,
until someone deletes the file.

`FlockBaton` keeps torch's protocol on the same file but holds it with `flock`, which the kernel drops when its
holder dies: a waiter goes on at once, and torch's build (ninja) redoes what the dead builder left unfinished.
A file left by torch's own baton is not held by anyone, so it no longer blocks. `install()` puts it in place of
torch's in the process it runs in (every sandbox worker, before any candidate code).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

# seconds this process spent building torch extensions (holding the baton) or waiting for another's build: the
# worker reports them with each reply, so an evaluation can say how much of a step was a build
_seconds = 0.0


def seconds() -> float:
    return _seconds


class FlockBaton:
    """torch's FileBaton interface (try_acquire / wait / release) on an flock of the same lock file."""

    def __init__(
        self, lock_file_path: str, wait_seconds: float = 0.1, warn_after_seconds: float | None = None
    ) -> None:
        self.lock_file_path = lock_file_path
        self.fd: int | None = None
        self._t0 = 0.0

    def _lock(self, blocking: bool) -> int | None:
        """An fd holding the flock of the file now at the path, or None (non-blocking, held elsewhere)."""
        while True:
            fd = os.open(self.lock_file_path, os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.lock_file_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            # the holder released and removed the file while this process waited on it: lock the current one
            os.close(fd)

    def try_acquire(self) -> bool:
        self.fd = self._lock(blocking=False)
        self._t0 = time.perf_counter()
        return self.fd is not None

    def wait(self) -> None:
        """Until the holder releases the baton or dies; the build it made (or left) is then torch's to check."""
        global _seconds
        t0 = time.perf_counter()
        fd = self._lock(blocking=True)
        if fd is not None:
            os.close(fd)
        _seconds += time.perf_counter() - t0

    def release(self) -> None:
        global _seconds
        if self.fd is None:
            return
        _seconds += time.perf_counter() - self._t0
        # removed while still held: a waiter on this file sees the change and locks the path's new file
        with contextlib.suppress(FileNotFoundError):  # already gone: nothing to remove
            os.remove(self.lock_file_path)
        os.close(self.fd)
        self.fd = None


def install() -> None:
    """Use `FlockBaton` for every torch extension build of this process. cpp_extension takes the name from
    file_baton when it is first imported (importing it here would cost every worker start its setuptools)."""
    import sys

    from torch.utils import file_baton

    file_baton.FileBaton = FlockBaton  # type: ignore[misc,assignment]
    loaded = sys.modules.get("torch.utils.cpp_extension")
    if loaded is not None:
        loaded.FileBaton = FlockBaton  # type: ignore[attr-defined]
