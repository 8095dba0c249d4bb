"""Ctrl-C during a long command: the first one stops the work cleanly, a second one ends the process at once.

`asyncio.run` alone cancels the main task on the first SIGINT but raises KeyboardInterrupt wherever the
code happens to be on the second: tracebacks ("Event loop is closed"), and a cleanup cut short can leave
the aiosqlite connection's thread alive, which the interpreter then waits for at exit, for ever.

Here the first SIGINT (or SIGTERM) cancels the work, whose own cleanup releases what it holds (the driver
releases its intent and marks the search stopped, the workspace closes the database and the sandbox). A
second signal (not the first delivered twice, as `timeout -s INT` does: `SAME_SIGNAL_S`), a cleanup still
running after `GRACE_S`, or an exit after a clean stop still waiting `GRACE_S` for threads of the cancelled work,
ends the process with `os._exit`: whatever was committed is safe in SQLite, and a search left `running` reads as
interrupted and resumes.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError

from ksearch.worldmodel.errors import KsearchError

T = TypeVar("T")

GRACE_S = 4.0  # how long the first Ctrl-C may take to stop cleanly
# The same signal again in the loop pass that handled the first, or this soon after it, is that interruption
# delivered twice: `timeout -s INT` sends it to the process and to its group. A second key press comes later.
SAME_SIGNAL_S = 0.01
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KsearchError):
    """The work was stopped by a signal and has cleaned up; exit with `code`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = 128 + signum  # what a shell reports for a process ended by that signal


def _write_err(text: str) -> None:
    # os.write, not sys.stderr: safe from a timer thread while the main thread holds stderr's lock
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:  # stderr closed: there is no one left to tell
        return


def exit_at_once(code: int) -> NoReturn:
    """End the process now, without the interpreter's shutdown (which waits for every non-daemon thread)."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be written
            continue
    os._exit(code)


class _Stopper:
    def __init__(self, stopping: str, hint: Callable[[], str]) -> None:
        self.stopping = stopping
        self.hint = hint
        self.signum: int | None = None
        self.work: asyncio.Future[Any] | None = None
        self.timer: threading.Timer | None = None
        self.first_at = 0.0  # time.monotonic() when the first signal was handled
        self.settled = False  # the loop has run past the pass that handled the first signal

    def exit_now(self, signum: int, why: str, *, flush: bool = True) -> NoReturn:
        hint = self.hint()
        _write_err(f"\n{why}" + (f"; {hint}" if hint else "") + "\n")
        if flush:
            exit_at_once(128 + signum)
        os._exit(128 + signum)  # from the timer thread: flushing could wait on a lock the main thread holds

    def on_signal(self, signum: int) -> None:
        if self.work is None:
            self.exit_now(signum, "interrupted while shutting down")
        if self.signum is not None:
            again = not self.settled or time.monotonic() - self.first_at < SAME_SIGNAL_S
            if signum == self.signum and again:
                return  # the first signal again, sent to the process and to its group: one interruption
            self.exit_now(signum, "interrupted again: exiting at once")
        self.signum = signum
        self.first_at = time.monotonic()
        asyncio.get_running_loop().call_soon(self._settle)  # after every signal this pass already read
        _write_err(f"\n{self.stopping} (Ctrl-C again to quit at once)\n")
        self.work.cancel()
        self.timer = threading.Timer(
            GRACE_S,
            lambda: self.exit_now(signum, f"did not stop within {GRACE_S:g} s: exiting at once", flush=False),
        )
        self.timer.daemon = True
        self.timer.start()

    def _settle(self) -> None:
        self.settled = True

    async def guard(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = asyncio.get_running_loop()
        self.work = asyncio.ensure_future(coro)
        for sig in SIGNALS:
            try:
                loop.add_signal_handler(sig, self.on_signal, sig)
            except (ValueError, RuntimeError):  # not the main thread (an embedding caller): its own rules
                break
        clean = False
        try:
            try:
                result = await self.work
                clean = True
                return result
            except asyncio.CancelledError:
                if self.signum is None:
                    raise
            except (KsearchError, ValidationError, typer.Exit):
                clean = True  # a refusal or a chosen exit, not a failure in flight
                raise
        finally:
            # The cancelled or failed work's exception (kept by its task) holds its frames, and through them
            # objects such as subprocess transports: drop them and collect now, while the loop still runs, so they
            # are not finalized after it is closed ("Event loop is closed" in __del__). A full collection costs
            # a tenth of a second with torch loaded: not after work that ended well.
            self.work = None
            if not clean:
                gc.collect()
            await asyncio.sleep(0)
        assert self.signum is not None  # the work was cancelled by on_signal
        raise Interrupted(self.signum)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def _after_the_loop(unraisable: Any, previous: Callable[[Any], object] = sys.unraisablehook) -> None:
    """sys.unraisablehook once the loop is closed. A subprocess whose awaiting coroutine was cancelled
    before it killed and reaped the process (a compiler run, a worker being spawned) finalizes its asyncio
    transport later, and that transport's __del__ finds the loop closed. The process is gone or orphaned
    either way; the traceback would only alarm. Anything else goes to the previous hook."""
    where = getattr(unraisable.object, "__qualname__", "")
    if where == "BaseSubprocessTransport.__del__" and str(unraisable.exc_value) == "Event loop is closed":
        return
    previous(unraisable)


class _AfterTheLoop(logging.Filter):
    """asyncio's child watcher warns ("Loop ... that handles pid ... is closed") when such a process
    exits after the loop closed: the same case as `_after_the_loop`."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        return not (msg.startswith("Loop ") and "that handles pid" in msg)


def run_stoppable(coro: Coroutine[Any, Any, T], *, stopping: str, hint: Callable[[], str]) -> T:
    """Run `coro` to completion; on SIGINT/SIGTERM cancel it, let it clean up and raise `Interrupted`.

    `stopping` is printed at the first signal; `hint()` (e.g. how to resume) ends any forced exit's line.
    The signal handlers exist only while the event loop runs (they need the main thread).
    """
    stopper = _Stopper(stopping, hint)
    try:
        return asyncio.run(stopper.guard(coro))
    finally:
        stopper.disarm()
        if stopper.signum is not None:  # work was cancelled: its subprocesses may outlive the loop
            sys.unraisablehook = functools.partial(_after_the_loop, previous=sys.unraisablehook)
            logging.getLogger("asyncio").addFilter(_AfterTheLoop())
            _exit_by_grace(128 + stopper.signum)


def _exit_by_grace(code: int) -> None:
    """After a clean stop, the caller says so and exits; the interpreter's shutdown then joins every non-daemon
    thread, and a thread of the cancelled work still waiting on a subprocess (a facts probe, a baseline
    measurement) held one suite's exit for over a minute on a GPU machine. Past `GRACE_S` the process ends as
    `exit_at_once` ends it: everything was committed before the stop was reported."""

    def end() -> None:
        _write_err(
            f"stopped; the exit waited {GRACE_S:g} s for threads of the cancelled work: exiting at once\n"
        )
        exit_at_once(code)

    timer = threading.Timer(GRACE_S, end)
    timer.daemon = True  # it must not itself keep the process alive
    timer.start()
