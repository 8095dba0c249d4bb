"""What the server says about each tool call while it runs: progress notifications to the host, a heartbeat
at least every `HEARTBEAT_S` with the call's phase and its seconds so far, and the server log's lines (its start
with a short summary of its arguments, its phases as they change, its end), one line per event on stderr or in
the `--log` file, never on stdout (the stdio transport's).

    2026-12-04T19:02:11 call#7 benchmark start search=s1 node_id=3 candidate={source=<2310 chars>}
    2026-12-04T19:02:14 call#7 benchmark search=s1 phase="correctness: wl_1024" t=3.2s
    2026-12-04T19:02:23 call#7 benchmark end search=s1 t=12.3s outcome=ok status=ok took="took 12.3 s: ..."
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from ksearch.tools.loop.call_clock import BETWEEN, CallClock

CALL_LOG = logging.getLogger("ksearch.calls")

HEARTBEAT_S = 1.5
"""The longest a host waits between two progress notifications of a call (when it asked for them)."""
TICK_S = 0.25  # how often a call's watch looks at its phase
LOG_AFTER_S = 0.25  # a phase of the tool's own (not the sandbox's) is logged once it lasts this long

SHOWN_CHARS = 48  # a string argument longer than this (or of several lines: a source) is logged as its length
NAME_CHARS = 240  # a search's name or a task's path is shown up to this length

Send = Callable[[float, str], Awaitable[None]]


def configure_log(path: Path | None) -> None:
    """The call log at INFO: into `path` (appended), else on stderr. Never stdout: the stdio transport's."""
    handler: logging.Handler = (
        logging.FileHandler(path, encoding="utf-8") if path is not None else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%S"))
    for h in list(CALL_LOG.handlers):  # a second serve() in one process replaces the first's handler
        CALL_LOG.removeHandler(h)
        h.close()
    CALL_LOG.addHandler(handler)
    CALL_LOG.setLevel(logging.INFO)
    CALL_LOG.propagate = False  # the root logger's lines (warnings) go where serve() sends them, once


def _value(v: Any, limit: int = SHOWN_CHARS) -> str:
    """An argument's value for the log: numbers and short names as they are, text as its length (a candidate's
    source never reaches the log), lists as their length, objects field by field."""
    if isinstance(v, dict):
        return "{" + " ".join(f"{k}={_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return f"[{len(v)} items]"
    if isinstance(v, str):
        return f"<{len(v)} chars>" if len(v) > limit or "\n" in v or " " in v else v
    return str(v)


def args_summary(inp: BaseModel | None) -> str:
    """The arguments the host gave other than their defaults, each as `_value` gives it; `search` and `task` are said
    apart (`CallWatch.start`)."""
    if inp is None:
        return ""
    given = inp.model_dump(mode="json", exclude_defaults=True, exclude={"search", "task"})
    return " ".join(f"{k}={_value(v)}" for k, v in given.items())


class CallWatch:
    """One call's clock, its progress notifications and its log lines."""

    def __init__(self, n: int, tool: str, send: Send) -> None:
        self.label = f"call#{n} {tool}"
        self.search = ""
        self._send_to_host = send
        self.clock = CallClock(on_phase=self._phase_changed)
        self._fraction = 0.0  # the sandbox's last fraction of the work
        self._progress = 0.0  # the last progress value sent: every notification's is larger
        self._sent_at = time.perf_counter()
        self._beat: asyncio.Task[None] | None = None
        self._unlogged: tuple[str, float] | None = None  # a phase not logged yet, and when it began

    def _where(self) -> str:
        return f" {self.search}" if self.search else ""

    def start(self, inp: BaseModel | None, search: Any = None) -> None:
        """Log the call's start (`search`: its search, for arguments that did not validate) and start its
        heartbeat."""
        search = getattr(inp, "search", None) if inp is not None else search
        task = getattr(inp, "task", None) if inp is not None else None
        if search is not None:
            self.search = f"search={_value(search, NAME_CHARS)}"
        elif isinstance(task, str):
            self.search = f"task={_value(task, NAME_CHARS)}"
        args = args_summary(inp)
        CALL_LOG.info("%s start%s%s", self.label, self._where(), f" {args}" if args else "")
        self._beat = asyncio.create_task(self._heartbeat())

    def _phase_changed(self, phase: str) -> None:
        # logged once it lasts (`_tick`): a call passes through many phases of milliseconds
        self._unlogged = None if phase == BETWEEN else (phase, self.clock.elapsed())

    def _log_phase(self) -> None:
        if self._unlogged is not None:
            phase, t = self._unlogged
            self._unlogged = None
            CALL_LOG.info('%s%s phase="%s" t=%.1fs', self.label, self._where(), phase, t)

    async def report(self, message: str, fraction: float) -> None:
        """The sandbox's (or the tool's) progress: its phase now, logged and said to the host at once."""
        self._fraction = max(0.0, min(1.0, fraction))
        self.clock.say(message)
        self._log_phase()
        await self._send()

    async def _send(self) -> None:
        # progress must grow with each notification: a heartbeat in the same phase adds a sliver of what is left
        value = max(self._fraction, self._progress + (1.0 - self._progress) * 0.002)
        self._progress = min(1.0, value)
        self._sent_at = time.perf_counter()
        await self._send_to_host(self._progress, f"{self.clock.phase} ({self.clock.elapsed():.0f} s)")

    async def _heartbeat(self) -> None:
        try:
            while True:
                await asyncio.sleep(TICK_S)
                if self._unlogged is not None and self.clock.elapsed() - self._unlogged[1] >= LOG_AFTER_S:
                    self._log_phase()
                if time.perf_counter() - self._sent_at >= HEARTBEAT_S - TICK_S / 2:
                    await self._send()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as e:
            # the host went away: the call's own end says how it ended; nothing more to tell it meanwhile
            CALL_LOG.info("%s heartbeat stopped: %s", self.label, type(e).__name__)

    def end(self, outcome: str, took: str = "") -> None:
        """Stop the heartbeat and log the call's end: `outcome` (ok ..., error=<kind>, cancelled)."""
        if self._beat is not None:
            self._beat.cancel()
        said = f' took="{took}"' if took else ""
        CALL_LOG.info("%s end%s t=%.1fs %s%s", self.label, self._where(), self.clock.elapsed(), outcome, said)
