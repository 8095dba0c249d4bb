"""One tool call's clock: where its wall time went, in named parts, and what the call is doing now.

A face starts one per call (`started`); the operations name the waits a call can spend seconds in (a worker, the
task's facts, the sandbox's start, the database) with `part`, which does nothing outside a clocked call; the
sandbox's progress messages set its phase (`say`). The face's heartbeat and log read `phase`, and a result's
`took` line (`took_text`) names every part, so that the parts add up to the call's wall time as its caller saw it.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping

PhaseListener = Callable[[str], None]

EVALUATION = "evaluation"
"""The part spent inside the sandbox's evaluation(s): a took line shows it by the evaluation's own steps."""

BETWEEN = "working"
"""The phase between named parts (parsing, checks, reading the records)."""


class CallClock:
    """The wall time of one call from its arrival, split into named parts, and its current phase."""

    def __init__(self, on_phase: PhaseListener | None = None) -> None:
        self.t0 = time.perf_counter()
        self.parts: dict[str, float] = {}
        self.phase = "starting"
        self._on_phase = on_phase
        self._open = 0  # parts being timed now: a part inside another is not counted twice
        self._stopped: float | None = None

    def elapsed(self) -> float:
        """Seconds since the call arrived (up to `stop`, once stopped)."""
        return (self._stopped if self._stopped is not None else time.perf_counter()) - self.t0

    def stop(self) -> None:
        """Freeze the clock: every took line built from now on reads the same total."""
        if self._stopped is None:
            self._stopped = time.perf_counter()

    def say(self, phase: str) -> None:
        """The call is now in `phase` (the listener hears each change once)."""
        if phase != self.phase:
            self.phase = phase
            if self._on_phase is not None:
                self._on_phase(phase)

    @contextlib.contextmanager
    def part(self, name: str, phase: str | None = None) -> Iterator[None]:
        """Count the block's wall time as part `name` (the phase meanwhile: `phase`, else the part's name)."""
        outer = self._open == 0
        self._open += 1
        t = time.perf_counter()
        self.say(phase or name.replace("_", " "))
        try:
            yield
        finally:
            self._open -= 1
            if outer:
                self.parts[name] = self.parts.get(name, 0.0) + time.perf_counter() - t
                self.say(BETWEEN)


_current: contextvars.ContextVar[CallClock | None] = contextvars.ContextVar(
    "ksearch_call_clock", default=None
)


def current() -> CallClock | None:
    """The clock of the call being served, if a face started one."""
    return _current.get()


@contextlib.contextmanager
def started(clock: CallClock) -> Iterator[CallClock]:
    """Within this block (one call), `part` and `say` time and tell `clock`."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)


@contextlib.contextmanager
def part(name: str, phase: str | None = None) -> Iterator[None]:
    """`CallClock.part` on the current call's clock; nothing outside a clocked call."""
    clock = _current.get()
    if clock is None:
        yield
        return
    with clock.part(name, phase):
        yield


def say(phase: str) -> None:
    """Tell the current call's clock its phase; nothing outside a clocked call."""
    clock = _current.get()
    if clock is not None:
        clock.say(phase)


SECONDS_NAMED = 4  # at most this many parts named in a call's took line, each at least SECONDS_SHARE of it
SECONDS_SHARE = 0.05  # the rest is summed as "other" where it reaches that share


def took_text(clock: CallClock, steps: Mapping[str, float] | None = None, inside: str = "") -> str:
    """ "took 21.4 s: wait for baselines 9.1, correctness 5.0, timing 4.2, task facts 2.3, other 0.8": the whole
    call, largest part first. `steps`: where the evaluation part's seconds went (the evaluation's own steps, the
    steps done inside others left out); whatever of the evaluation part they do not cover is "other" too.
    `inside`: said after the parts, in parentheses (the steps inside others)."""
    total = clock.elapsed()
    named = {k: v for k, v in clock.parts.items() if k != EVALUATION}
    for k, v in (steps or {}).items():
        named[k] = named.get(k, 0.0) + v
    least = max(0.05, SECONDS_SHARE * total)
    ranked = sorted(named.items(), key=lambda kv: -kv[1])
    shown = [(k, v) for k, v in ranked if v >= least][:SECONDS_NAMED]
    rest = total - sum(v for _, v in shown)
    parts = [f"{k.replace('_', ' ')} {v:.1f}" for k, v in shown]
    if rest >= least:
        parts.append(f"other {rest:.1f}")
    said = f": {', '.join(parts)}" if parts else ""
    return f"took {total:.1f} s{said}" + (f" ({inside})" if inside and said else "")
