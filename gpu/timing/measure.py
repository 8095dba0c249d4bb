"""Time one callable the way every candidate and baseline is timed (worker side; imports torch).

GPU: per call, the L2 is flushed (a write larger than L2), a short spin kernel covers the host's
launch overhead, a CUDA event pair brackets the call, and a full device synchronize follows (work
left on side streams cannot leak into the next call).
Inputs rotate among several sets. Warm-up (at least `warmup` calls and 25 ms) is excluded.
Repetitions continue until the CI of the median is within the target over a window of at least
50 ms, the time budget is spent, or `max_reps` is reached.
A separate short loop without flushing, synchronized before each call, gives the host-clock
cross-check: a call whose host time far exceeds its event time did work the events did not see.

CPU (Triton interpreter): a few perf_counter timings, labelled "cpu-interpreter".

`time_like_gpumode` is the other protocol (EvalSettings.timing_protocol "gpumode"): the benchmark loop of
GPU MODE's eval.py, so that a time can be compared with what that evaluator reports (its mean).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ksearch.gpu.timing.stats import Summary, mean_halfwidth, summarize

_perf = time.perf_counter  # bound now: a candidate patching time.perf_counter later does not reach us
MIN_WARMUP_S = 0.025  # warm-up lasts at least this long (and at least `warmup` calls)
MIN_TIMED_S = 0.05  # the CI-based early stop waits until the samples span at least this long
HOST_EXCESS_US = 60.0  # host-clock excess over an empty call that flags off-stream work
# Interpreted calls timed per workload on the CPU (each costs as much as a correctness trial; none ranks)
CPU_REPS = 2
LAUNCH_BOUND = 0.8  # issuing a call takes at least this fraction of its device time: the host sets the pace
LAUNCH_BOUND_MIN_US = 20.0  # below this, one or two launches: nothing a kernel author could cut
_Event = torch.cuda.Event
_sync = torch.cuda.synchronize


@dataclass
class TimingResult:
    device: str
    summary: Summary
    samples_us: list[float]
    mean_us: float | None = None
    host_median_us: float | None = None
    event_median_synced_us: float | None = None
    issue_median_us: float | None = None
    flags: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        mean = self.mean_us if self.mean_us is not None else _mean(self.samples_us)
        half = mean_halfwidth(self.samples_us)
        return {
            "device": self.device,
            "median_us": s.median,
            "mean_us": mean,
            # the owners' protocols rank by a mean: its CI is what their decisions compare
            "mean_ci_low_us": None if mean is None or half is None else mean - half,
            "mean_ci_high_us": None if mean is None or half is None else mean + half,
            "iqr_us": s.iqr,
            "ci_low_us": s.ci_low,
            "ci_high_us": s.ci_high,
            "n": s.n,
            "host_median_us": self.host_median_us,
            "issue_median_us": self.issue_median_us,
            "flags": list(self.flags),
            "wall_s": self.wall_s,
        }


class Preamble:
    """Runs before each timed call: flush the L2, then keep the GPU busy for `cover_us`.

    The flush writes a buffer twice the L2 size, evicting whatever the previous call left there.
    The cover (a one-thread spin kernel) keeps the GPU busy while Python launches the timed call,
    so the start event fires only when the call's first kernel is already queued: the events
    measure device time, not the host's launch overhead (which the host-clock check still sees).
    """

    def __init__(self, device: torch.device, *, flush: bool = True, cover_us: float = 300.0) -> None:
        self.buf = None
        if flush:
            props = torch.cuda.get_device_properties(device)
            l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
            self.buf = torch.empty(max(2 * l2, 16 << 20) // 4, dtype=torch.int32, device=device)
        self.cycles = 0
        sleep = getattr(torch.cuda, "_sleep", None)
        if cover_us > 0 and sleep is not None:
            probe = 1_000_000
            for _ in range(2):  # the second measurement, once clocks and the kernel are warm
                s, e = _Event(enable_timing=True), _Event(enable_timing=True)
                s.record()
                sleep(probe)
                e.record()
                _sync()
                per_us = probe / max(s.elapsed_time(e) * 1000.0, 1e-3)
            self.cycles = int(cover_us * per_us)
        self._sleep: Callable[[int], None] | None = sleep

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()
        if self.cycles and self._sleep is not None:  # cycles are set only where torch.cuda._sleep exists
            self._sleep(self.cycles)


def time_gpu(
    fn: Callable[[list[Any]], Any],
    input_sets: list[list[Any]],
    *,
    warmup: int,
    min_reps: int,
    max_reps: int,
    budget_s: float,
    target_rel_ci: float,
    preamble: Preamble | None,
    before_each: Callable[[int], list[Any]] | None = None,
    after_each: Callable[[int, Any], None] | None = None,
) -> TimingResult:
    """Time `fn(inputs)` on the GPU. `before_each(rep)` may supply fresh inputs (final mode) and
    `after_each(rep, out)` may check the output; neither is inside the timed region."""
    t_start = _perf()
    k = len(input_sets)
    deadline = t_start + budget_s
    # warm up by count and by time: after an idle moment the GPU needs a few ms to reach its clocks
    i = 0
    while i < max(warmup, 1) or (_perf() - t_start < MIN_WARMUP_S and _perf() < deadline):
        fn(input_sets[i % k] if k else before_each(-1 - i))  # type: ignore[misc]
        if preamble is not None:
            preamble()
        _sync()
        i += 1
    pairs = [(_Event(enable_timing=True), _Event(enable_timing=True)) for _ in range(max_reps)]
    samples: list[float] = []
    t_timed = _perf()
    rep = 0
    while rep < max_reps:
        inputs = before_each(rep) if before_each is not None else input_sets[rep % k]
        if preamble is not None:
            preamble()
        s, e = pairs[rep]
        s.record()
        out = fn(inputs)
        e.record()
        _sync()
        samples.append(s.elapsed_time(e) * 1000.0)
        if after_each is not None:
            after_each(rep, out)
        del out
        rep += 1
        if rep >= min_reps and (rep % 5 == 0 or _perf() > deadline):
            if _perf() > deadline:
                break
            # a short window can sit entirely inside one transient (a clock change): require a minimum span
            if _perf() - t_timed >= MIN_TIMED_S and summarize(samples).rel_halfwidth <= target_rel_ci:
                break
    result = TimingResult(device=torch.cuda.get_device_name(), summary=summarize(samples), samples_us=samples)
    _host_check(fn, input_sets, result, before_each)
    result.wall_s = _perf() - t_start
    return result


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


class GpuModeL2Clear:
    """GPU MODE's clear_l2_cache: 256 MB of int64 filled with 42 (same size and kernel; the buffer is kept)."""

    def __init__(self, device: torch.device) -> None:
        self.buf = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)

    def __call__(self) -> None:
        self.buf.fill_(42)


def time_like_gpumode(
    fn: Callable[[list[Any]], Any],
    inputs_for: Callable[[int], list[Any]],
    *,
    copy: Callable[[list[Any]], list[Any]],
    check: Callable[[list[Any], Any], str | None] | None,
    fresh_each: bool = False,
    timer: str = "events",
    clear_l2: Callable[[], None] | None = None,
    max_repeats: int = 100,
    max_time_s: float = 10.0,
    rel_err_stop: float = 0.001,
    wall_s: float = 120.0,
) -> tuple[TimingResult, str | None]:
    """Time `fn(inputs)` as GPU MODE's eval.py benchmarks a test; returns the timing and the first failed
    check's message (None when every check passed).

    `inputs_for(0)` is the data; one untimed call on it is checked (`check(copy taken before the call,
    output)`), then each timed call runs on the data itself (no copy) right after a synchronize: a CUDA event
    pair around the call then a synchronize (`timer="events"`), or the host clock around the call and a
    synchronize (`"host"`), with `clear_l2` between the synchronize and the start where the evaluator flushes.
    `fresh_each` (its leaderboard mode): new data `inputs_for(i + 1)` for every call, each output checked.
    Stops after `max_repeats` calls, or from the third call on once the standard error of the mean is below
    `rel_err_stop` of it, the calls add up to `max_time_s`, or `wall_s` has passed."""
    t_start = _perf()
    data = inputs_for(0)
    keep = copy(data) if check is not None else None
    out = fn(data)
    _sync()
    failure = check(keep, out) if check is not None and keep is not None else None
    del out
    samples: list[float] = []
    loop_start = _perf()
    for i in range(max_repeats):
        if fresh_each:
            data = inputs_for(i + 1)
            keep = copy(data) if check is not None else None
        _sync()
        if clear_l2 is not None:
            clear_l2()
        if timer == "host":
            t0 = _perf()
            out = fn(data)
            _sync()
            samples.append((_perf() - t0) * 1e6)
        else:
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            s.record()
            out = fn(data)
            e.record()
            _sync()
            samples.append(s.elapsed_time(e) * 1000.0)
        if fresh_each and check is not None and keep is not None and failure is None:
            failure = check(keep, out)
        del out
        if i > 1:
            n = len(samples)
            mean = sum(samples) / n
            std = (sum((x - mean) ** 2 for x in samples) / (n - 1)) ** 0.5
            if (
                std / n**0.5 < rel_err_stop * mean
                or mean * n > max_time_s * 1e6
                or _perf() - loop_start > wall_s
            ):
                break
    result = TimingResult(
        device=torch.cuda.get_device_name(),
        summary=summarize(samples),
        samples_us=samples,
        mean_us=_mean(samples),
    )
    _host_check(fn, [data], result, None)
    result.wall_s = _perf() - t_start
    return result, failure


def _synced(fn: Callable[[], Any]) -> tuple[float, float, float]:
    """(host us, event us, issue us) of one call started on an idle GPU and followed by a full synchronize;
    `issue` is the host time until the call returns, before any wait: what it costs to launch its work."""
    s, e = _Event(enable_timing=True), _Event(enable_timing=True)
    _sync()
    t0 = _perf()
    s.record()
    fn()
    t1 = _perf()
    e.record()
    _sync()
    return (_perf() - t0) * 1e6, s.elapsed_time(e) * 1000.0, (t1 - t0) * 1e6


def _host_check(
    fn: Callable[[list[Any]], Any],
    input_sets: list[list[Any]],
    result: TimingResult,
    before_each: Callable[[int], list[Any]] | None,
    reps: int = 7,
) -> None:
    """Host clock vs CUDA events on synchronized calls. Honest work on the timed stream shows the
    same host-minus-event gap as an empty call (the synchronize's wake-up); work on another stream
    shows up on the host clock only."""
    empty = [_synced(lambda: None) for _ in range(reps)]
    gap0 = summarize([h - d for h, d, _ in empty]).median
    host, dev, issue = [], [], []
    for i in range(reps):
        inputs = input_sets[i % len(input_sets)] if input_sets else before_each(-100 - i)  # type: ignore[misc]
        h, d, q = _synced(functools.partial(fn, inputs))
        host.append(h)
        dev.append(d)
        issue.append(q)
    hm, dm, qm = summarize(host).median, summarize(dev).median, summarize(issue).median
    result.host_median_us, result.event_median_synced_us, result.issue_median_us = hm, dm, qm
    if qm >= LAUNCH_BOUND * dm and qm >= LAUNCH_BOUND_MIN_US:
        # the GPU waits on the host: the time is Python and launch overhead, set by the host's CPU and
        # the process, not by the kernels (a GPU MODE-style timer reports it; a covered timer hides it)
        result.flags.append(
            f"note: launch_bound: issuing one call takes {qm:.0f} us on the host, {100 * qm / max(dm, 1e-9):.0f}% of "
            f"the {dm:.0f} us between CUDA events of one call from an idle GPU; its time is the host's, and varies "
            "with the CPU and the process (fewer launches, or a CUDA graph, would cut it)"
        )
    excess = (hm - dm) - gap0
    if excess > max(HOST_EXCESS_US, 0.5 * dm):
        result.flags.append(
            f"host_clock_mismatch: a synchronized call takes {hm:.1f} us on the host clock but only {dm:.1f} us "
            f"between the CUDA events ({excess:.0f} us more than an empty call's gap); work outside the timed "
            "stream (a side stream?) is suspected"
        )


def time_cpu(
    fn: Callable[[list[Any]], Any],
    input_sets: list[list[Any]],
    *,
    reps: int = CPU_REPS,
    before_each: Callable[[int], list[Any]] | None = None,
    after_each: Callable[[int, Any], None] | None = None,
) -> TimingResult:
    """A few host-clock timings of calls the interpreter runs: functional evidence, never a speed. No warm-up
    call: the correctness trials ran the same kernels in this process just before."""
    t_start = _perf()
    k = len(input_sets)
    samples = []
    for rep in range(max(reps, 1)):
        inputs = before_each(rep) if before_each is not None else input_sets[rep % k]
        t0 = _perf()
        out = fn(inputs)
        samples.append((_perf() - t0) * 1e6)
        if after_each is not None:
            after_each(rep, out)
    return TimingResult(
        device="cpu-interpreter",
        summary=summarize(samples),
        samples_us=samples,
        host_median_us=None,
        wall_s=_perf() - t_start,
    )
