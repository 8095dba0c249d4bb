"""Tool subprocesses (nvcc, ncu) that never outlive the call that started them.

Each tool runs in its own process group (`start_new_session=True`): nvcc leaves cicc and ptxas children
behind it, and a Ctrl-C at the terminal must reach the driver, not the compiler. When the calling task is
cancelled or the tool runs past its timeout, the whole group is killed and the tool reaped before the
exception goes on, so a cancelled attempt leaves no compiler running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group `proc` leads (it was started with start_new_session=True)."""
    # Already gone (it exited and its group with it): nothing left to stop.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


async def communicate_or_kill(proc: asyncio.subprocess.Process, timeout_s: float) -> bytes:
    """The tool's stdout. On a timeout (TimeoutError) or the caller's cancellation (CancelledError) its
    process group is killed and the tool reaped, then the exception is raised again."""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except (TimeoutError, asyncio.CancelledError):
        kill_group(proc)
        # Reaped even if this task is cancelled again meanwhile: the kill is already sent, the wait is short.
        await asyncio.shield(proc.wait())
        raise
    return out
