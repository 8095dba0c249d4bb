"""FlashInfer-Bench's benchmark timing in ksearch's worker: EvalSettings.timing_protocol "flashinfer".

What FlashInfer-Bench's own runner does (flashinfer_bench/bench as of 2026-04-30; its timer is FlashInfer's
`flashinfer.testing.bench_gpu_time_with_cupti`, flashinfer/testing/utils.py, the same in behaviour from
flashinfer-python 0.6 on):

- Flow: `Benchmark.run_all` gives each (definition, workload) to a runner (`PersistentRunner` by default,
  `IsolatedRunner` with `use_isolated_runner`). `run_ref` builds the baseline in the main process
  (`DefaultEvaluator.build_baseline`): `num_trials` input sets (bench/utils.py `gen_inputs`: randn floats,
  integers in fixed ranges, safetensors from the dataset), the reference run once on each for the expected
  outputs, then the reference timed on each set (`profile_baseline`). Each solution runs in a spawned worker
  process on clones of those sets: correctness first (`check_correctness`, one call per set), then
  `eval_performance`, every set timed by bench/timing.py `time_runnable`.
- Counts (bench/config.py `ResolvedEvalConfig`; bench/eval_config.yaml may override them per op_type or
  definition and overrides none): warmup_runs 10, iterations 50, num_trials 3.
- `time_runnable(fn, args, warmup, iters, device)`: under a per-device lock, `bench_gpu_time_with_cupti(fn,
  dry_run_iters=warmup, repeat_iters=iters, input_args=args, cold_l2_cache=True, use_cuda_graph=False)`, then
  `statistics.median` of the per-iteration times (ms). CUDA graphs are never used (hard-coded False).
- What is called: the solution's entry point, positionally (a Runnable; a 1-tuple return is unpacked), with
  no torch.no_grad. In destination-passing style the outputs are allocated once per set (`allocate_outputs`,
  torch.empty) and every call writes into the same ones; value-returning calls return new tensors each time.
- `bench_gpu_time_with_cupti`: a flush buffer of ((2 x L2 size) // MiB) MiB of int8 (`get_l2_cache_size`); one
  call, then a synchronize; an estimate: 5 calls each after `buffer.zero_()`, between two CUDA events (used
  only when the counts are not given); `dry_run_iters` calls each after a flush; a synchronize; then
  - with CUPTI (the `cupti-python` package, major version >= 13, importable): activity tracing of runtime and
    driver API calls, kernels, memcpys and memsets; per iteration a flush, a synchronize, a host timestamp, the
    call, a host timestamp, a synchronize. An iteration's time is the span from the earliest start to the
    latest end of the GPU activities whose API call began between its two timestamps (any stream): the call's
    device time, gaps between its kernels included, the launch of its first kernel not. An iteration without
    activity, or whose set of kernels (name, copy kind, bytes, memset value, kind) differs from the first
    iteration's, raises, and the solution gets RUNTIME_ERROR.
  - without it (FlashInfer-Bench does not depend on cupti-python; a warning says so): CUDA events
    (`bench_gpu_time_with_cuda_event`): per iteration a flush, a start event, the call, an end event, with no
    synchronize until every iteration is issued.
- Statistic: per set, the median of its iterations; a solution's `latency_ms` (and the reference's
  `reference_latency_ms`) is the mean of those medians over the sets; speedup = reference / solution.
- Correctness (bench/utils.py `compute_error_stats` and bench/evaluators/): shape and dtype must match; any Inf
  or NaN in an output fails; an element exceeds when |out - ref| > atol and |out - ref| / (|ref| + 1e-8) > rtol,
  atol = rtol = 1e-2 whatever the dtype; every element must pass (required_matched_ratio None is 1.0), except
  op_type "moe" (eval_config.yaml: 0.95) and definitions named "*moe_fp8_block_scale*" (LowBitEvaluator: 0.95
  unless set). Special evaluators: sampling (TVD of sampled frequencies <= 0.2, samples inside the top-k/top-p
  mask), two DSA sparse-attention definitions (the lse output optional), dsa_topk_indexer* (indices valid and
  unique, the scores at them compared sorted).

ksearch's loop (`time_trial`) does the same per set, with the same counts and flush; the sets are the task's
inputs for three trials (ksearch's generator). Timers: "cupti" (the default: what FlashInfer-Bench means to
measure) reads the same span from the torch profiler (Kineto, itself a CUPTI activity trace), telling the
iterations apart by a marker kernel launched after each flush; "events" is FlashInfer-Bench's loop without
cupti-python (a task's extras["evaluator"]["timer"]). If the profiler cannot trace, the events loop runs and a
note says so. The statistic, the mean of the sets' medians, is `mean_us`; the cheat checks (outputs after
timing, outputs re-poisoned and rewritten, stale output, host clock, tamper) run outside the timed loops.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ksearch.gpu.checks import guard
from ksearch.gpu.inputs import poisoned
from ksearch.gpu.tasks.flashinfer.loader import FIB_EVALUATOR
from ksearch.gpu.tasks.rt.flashinfer import FlashInferRuntime
from ksearch.gpu.timing import measure as timing
from ksearch.gpu.timing.stats import summarize
from ksearch.gpu.worker.core import CandidateFailure, restore_precision
from ksearch.worldmodel.errors import KsearchError

if TYPE_CHECKING:
    from ksearch.gpu.worker.timing import Timing
    from ksearch.worldmodel.models import EvalSettings

# bound now: a candidate patching these later does not reach the loop
_Event = torch.cuda.Event
_sync = torch.cuda.synchronize
_sleep: Callable[[int], None] | None = getattr(torch.cuda, "_sleep", None)
_perf = time.perf_counter
_profile = torch.profiler.profile
_CUDA_ACTIVITY = torch.profiler.ProfilerActivity.CUDA
_CUDA_DEVICE = torch.autograd.DeviceType.CUDA


def _profiler_functions() -> dict[str, int]:
    """Identities of the profiler's functions the span is read through: a candidate replacing one (to report a
    shorter span) is caught before a trace is trusted."""
    import torch.autograd.profiler as ap
    import torch.autograd.profiler_util as pu

    spaces: dict[str, Any] = {
        "torch.profiler.profile": torch.profiler.profile,
        "torch.autograd.profiler": ap,
        "torch.autograd.profiler.profile": ap.profile,
        "torch.autograd.profiler_util.FunctionEvent": pu.FunctionEvent,
        "torch.autograd.profiler_util.EventList": pu.EventList,
        "torch.autograd.profiler_util.Interval": pu.Interval,
        "torch._C._autograd": torch._C._autograd,
    }
    out: dict[str, int] = {}
    for prefix, ns in spaces.items():
        out.update(guard._functions(prefix, ns))
    return out


_PROFILER = _profiler_functions()

WARMUP: int = FIB_EVALUATOR["warmup"]
ITERATIONS: int = FIB_EVALUATOR["iterations"]
TRIALS: int = FIB_EVALUATOR["trials"]
ESTIMATE_CALLS = 5
TIMERS = ("cupti", "events")
MARKER = "spin_kernel"  # the kernel of torch.cuda._sleep (ATen's at::cuda::spin_kernel)
WALL_S = 90.0  # the most one benchmark call's trials may take here; iterations beyond are cut (and noted)
MIN_ITERATIONS = 5

Activity = tuple[float, float, str]
"""A GPU activity of a trace: (start us, end us, name)."""


@dataclass(frozen=True)
class FibSettings:
    """The runner's settings for one definition (its defaults; a task's extras["evaluator"] may set them)."""

    warmup: int = WARMUP
    iterations: int = ITERATIONS
    trials: int = TRIALS
    cold_l2: bool = True
    timer: str = "cupti"

    @classmethod
    def of(cls, extras: dict[str, Any]) -> FibSettings:
        ev = extras.get("evaluator") or {}
        timer = str(ev.get("timer", "cupti"))
        return cls(
            warmup=max(0, int(ev.get("warmup", WARMUP))),
            iterations=max(1, int(ev.get("iterations", ITERATIONS))),
            trials=max(1, int(ev.get("trials", TRIALS))),
            cold_l2=bool(ev.get("cold_l2", True)),
            timer=timer if timer in TIMERS else "cupti",
        )


@dataclass
class Gpu:
    """What the loop needs of the device (the tests give fakes): a synchronize, a CUDA event with
    `record()` and `elapsed_time(end)` in ms, the L2 flush, the marker kernel, and a tracer that runs a loop
    under an activity trace and returns its GPU activities."""

    sync: Callable[[], None]
    event: Callable[[], Any]
    flush: Callable[[], None] | None
    marker: Callable[[], None] | None
    trace: Callable[[Callable[[], None]], list[Activity]] | None


def cuda_gpu(device: Any, cold_l2: bool) -> Gpu:
    flush: Callable[[], None] | None = None
    if cold_l2:
        l2 = int(torch.cuda.get_device_properties(device).L2_cache_size)
        mib = (2 * l2) // (1 << 20)  # FlashInfer's size: twice the L2, rounded down to whole MiB
        buf = torch.empty(max(mib, 1) << 20, dtype=torch.int8, device=device)

        def flush() -> None:  # `buffer.zero_()`, as FlashInfer flushes
            buf.zero_()

    marker = None
    if _sleep is not None:
        sleep = _sleep

        def marker() -> None:  # the shortest spin: a kernel the trace can find, that touches no memory
            sleep(1)

    return Gpu(
        sync=_sync,
        event=lambda: _Event(enable_timing=True),
        flush=flush,
        marker=marker,
        trace=_profiled,
    )


def _profiled_after_compile(loop: Callable[[], None]) -> list[Activity]:
    """`_profiled` for the torch.compile baseline, whose first calls (dynamo's) may install wrappers of their own:
    the profiler's identities are taken again first (it is used only where they were intact before compiling)."""
    global _PROFILER
    _PROFILER = _profiler_functions()
    return _profiled(loop)


class ProfilerReplaced(RuntimeError, KsearchError):
    """The profiler's functions are not those the worker started with."""


def _profiled(loop: Callable[[], None]) -> list[Activity]:
    changed = guard.replaced(_PROFILER, _profiler_functions())
    if changed:
        raise ProfilerReplaced(", ".join(changed[:6]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes would clutter the worker's stderr
        with _profile(activities=[_CUDA_ACTIVITY]) as prof:
            loop()
        events = prof.events()
    return [
        (float(e.time_range.start), float(e.time_range.end), str(e.name))
        for e in events
        if e.device_type == _CUDA_DEVICE
    ]


def segment(acts: Sequence[Activity], iterations: int) -> list[list[Activity]] | None:
    """Each timed call's GPU activities, from the trace of `iterations` x (flush, marker, synchronize, call,
    synchronize). The synchronizes order everything on the device: the activities before the first marker
    are the flush's (so a flush is that many activities), and a call's are those after its marker, before the
    next flush. None when the trace does not read as that loop (a candidate kernel named like the marker)."""
    order = sorted(acts, key=lambda a: (a[0], a[1]))
    marks = [i for i, a in enumerate(order) if MARKER in a[2]]
    if len(marks) != iterations:
        return None
    per_flush = marks[0]
    out = []
    for k, m in enumerate(marks):
        end = marks[k + 1] - per_flush if k + 1 < len(marks) else len(order)
        if end < m + 1:
            return None
        out.append(order[m + 1 : end])
    return out


def spans_ms(segments: list[list[Activity]]) -> tuple[list[float], list[str]]:
    """Per call the span of its activities (ms), as FlashInfer-Bench's CUPTI timer reads it, and the failures
    that timer raises on: a call with no GPU activity, kernel sets that differ between calls."""
    out: list[float] = []
    problems: list[str] = []
    first: frozenset[str] | None = None
    for k, seg in enumerate(segments):
        if not seg:
            out.append(0.0)
            if not any(p.startswith("no_kernel_timed") for p in problems):
                problems.append(
                    f"no_kernel_timed: timed call {k} launched no GPU work; FlashInfer-Bench's timer rejects "
                    "such a solution (no kernel activity recorded)"
                )
            continue
        out.append((max(a[1] for a in seg) - min(a[0] for a in seg)) / 1000.0)
        names = frozenset(a[2] for a in seg)
        if first is None:
            first = names
        elif names != first and not any(p.startswith("inconsistent_kernels") for p in problems):
            diff = sorted(names ^ first)[:4]
            problems.append(
                f"inconsistent_kernels: timed call {k} ran other kernels than the first ({', '.join(diff)}); "
                "FlashInfer-Bench's timer rejects such a solution"
            )
    return out, problems


@dataclass
class Trial:
    """One input set timed: per-iteration times (ms), the timer that took them, what to report."""

    samples_ms: list[float]
    timer: str
    flags: list[str] = field(default_factory=list)
    last: Any = None


def time_trial(call: Callable[[], Any], cfg: FibSettings, gpu: Gpu, budget_s: float = WALL_S) -> Trial:
    """One input set timed as `bench_gpu_time_with_cupti` times it (see the module's docstring). `last` is
    the last timed call's return value, for the checks that follow."""
    flush = gpu.flush or (lambda: None)
    t0 = _perf()
    gpu.sync()
    call()
    gpu.sync()
    start, end = gpu.event(), gpu.event()
    start.record()
    for _ in range(ESTIMATE_CALLS):
        flush()
        call()
    end.record()
    gpu.sync()
    flags: list[str] = []
    iters = cfg.iterations
    per_call_s = max(start.elapsed_time(end), 0.0) / ESTIMATE_CALLS / 1000.0
    left = budget_s - (_perf() - t0)
    if per_call_s > 0 and (cfg.warmup + iters) * per_call_s > left:
        iters = max(MIN_ITERATIONS, min(iters, int(left / per_call_s) - cfg.warmup))
        if iters < cfg.iterations:
            flags.append(
                f"note: fib_iterations_cut: {iters} timed calls instead of {cfg.iterations} (a call takes "
                f"{per_call_s * 1e3:.1f} ms; the worker's budget for one workload is {WALL_S:.0f} s)"
            )
    gpu.sync()
    for _ in range(cfg.warmup):
        flush()
        call()
    gpu.sync()
    if cfg.timer == "cupti":
        if gpu.trace is None or gpu.marker is None:
            flags.append("note: fib_timer: no profiler or marker kernel here; timed with CUDA events instead")
        else:
            traced = _traced(call, iters, gpu, flush)
            if isinstance(traced, Trial):
                traced.flags[:0] = flags
                return traced
            flags.append(traced)
    samples, last = _events(call, iters, gpu, flush)
    return Trial(samples, "events", flags, last)


class TimedCallFailed(KsearchError):
    """A timed call raised (as opposed to the tracer): its exception is the cause."""


def _traced(call: Callable[[], Any], iters: int, gpu: Gpu, flush: Callable[[], None]) -> Trial | str:
    """The CUPTI loop: flush, synchronize, the call, synchronize, per iteration, under an activity trace.
    Returns the trial, or why it could not be read (the caller then times with events)."""
    assert gpu.trace is not None and gpu.marker is not None
    marker = gpu.marker
    kept: list[Any] = []

    def loop() -> None:
        for i in range(iters):
            flush()
            marker()
            gpu.sync()
            try:
                out = call()
            except Exception as e:
                raise TimedCallFailed() from e
            if i == iters - 1:
                kept.append(out)
            del out  # dropped as the runner drops it, before the synchronize
            gpu.sync()

    try:
        acts = gpu.trace(loop)
    except TimedCallFailed as cf:
        assert cf.__cause__ is not None
        raise cf.__cause__ from None
    except ProfilerReplaced as e:
        return f"harness_tampered: the candidate replaced the profiler's {e}; timed with CUDA events"
    except Exception as e:  # no profiler in this process: the events loop is FlashInfer-Bench's own fallback
        return (
            f"note: fib_timer: the profiler could not trace ({type(e).__name__}: {str(e)[:160]}); timed with "
            "CUDA events"
        )
    segs = segment(acts, iters)
    if segs is None:
        return (
            "note: fib_timer: the trace did not read as the timing loop (a kernel named like its marker?); "
            "timed with CUDA events"
        )
    samples, problems = spans_ms(segs)
    return Trial(samples, "cupti", problems, kept[0] if kept else None)


def _events(
    call: Callable[[], Any], iters: int, gpu: Gpu, flush: Callable[[], None]
) -> tuple[list[float], Any]:
    """FlashInfer-Bench's loop without CUPTI: flush, start event, call, end event; one synchronize at the end."""
    starts = [gpu.event() for _ in range(iters)]
    ends = [gpu.event() for _ in range(iters)]
    last = None
    gpu.sync()
    for i in range(iters):
        flush()
        starts[i].record()
        out = call()
        ends[i].record()
        if i == iters - 1:
            last = out
        del out
    gpu.sync()
    return [float(s.elapsed_time(e)) for s, e in zip(starts, ends, strict=True)], last


def combine(trials: list[Trial], device: str) -> tuple[timing.TimingResult, dict[str, Any]]:
    """The runner's statistic over the sets: the mean of each set's median (`mean_us`). Its CI: the mean of
    the sets' median CIs (as if the sets' errors were fully correlated: never narrower than it should be)."""
    medians = [statistics.median(t.samples_ms) * 1000.0 for t in trials]
    per = [summarize([x * 1000.0 for x in t.samples_ms]) for t in trials]
    samples = [x * 1000.0 for t in trials for x in t.samples_ms]
    res = timing.TimingResult(
        device=device, summary=summarize(samples), samples_us=samples, mean_us=sum(medians) / len(medians)
    )
    for t in trials:
        res.flags += [f for f in t.flags if f not in res.flags]
    extra = {
        "protocol": "flashinfer",
        "timer": "+".join(sorted({t.timer for t in trials})),
        "trial_medians_us": medians,
        "mean_ci_low_us": sum(p.ci_low for p in per) / len(per),
        "mean_ci_high_us": sum(p.ci_high for p in per) / len(per),
    }
    return res, extra


def time_sets(
    calls: list[Callable[[], Any]], cfg: FibSettings, gpu: Gpu, device: str
) -> tuple[dict[str, Any], list[Trial]]:
    """Every set timed in turn (each a trial), then the host-clock cross-check on the first: the worker's
    timing dict, and the trials (their last outputs)."""
    t0 = _perf()
    trials: list[Trial] = []
    for k, call in enumerate(calls):
        left = WALL_S - (_perf() - t0)
        trials.append(time_trial(call, cfg, gpu, budget_s=max(left / (len(calls) - k), 1.0)))
    res, extra = combine(trials, device)
    timing._host_check(lambda _inputs: calls[0](), [[]], res, None)
    res.wall_s = _perf() - t0
    out = res.to_dict()
    out.update(extra)
    return out, trials


# ---------------------------------------------------------------- the worker's `benchmark` under this protocol


def benchmark(tm: Timing, wl: Any, st: EvalSettings, which: str, args: dict[str, Any]) -> dict[str, Any]:
    """`benchmark` (which = "eager", "compile" or "candidate") timed as FlashInfer-Bench's runner times it."""
    assert tm.task is not None and tm.rt is not None
    impl = getattr(tm.rt, "_impl", None)
    if not isinstance(impl, FlashInferRuntime):
        raise RuntimeError("the flashinfer timing protocol times FlashInfer-Bench definitions only")
    cfg = FibSettings.of(tm.task.extras)
    # the runner's sets are fresh per workload; ksearch's are the search's (a final evaluation's: new ones)
    base = st.seed + (50_000 if st.final else 1000)
    sets = [tm.rt.make_inputs(wl, base + k, tm.device) for k in range(cfg.trials)]
    gpu = cuda_gpu(tm.device, cfg.cold_l2)
    name = torch.cuda.get_device_name()
    if which == "eager":
        restore_precision(tm._precision)
        return time_sets([impl.timed_call(None, wl, tm.device, s)[0] for s in sets], cfg, gpu, name)[0]
    if which == "compile":

        def time_compiled(comp: Callable[[list[Any]], Any]) -> dict[str, Any]:
            if not guard.replaced(_PROFILER, _profiler_functions()):
                gpu.trace = _profiled_after_compile
            restore_precision(tm._precision)
            return time_sets([_bound(comp, s) for s in sets], cfg, gpu, name)[0]

        return tm._time_compiled(wl, st, time_compiled)
    assert tm.module is not None, "load a candidate first"
    try:
        fn = tm._candidate_fn(wl)
        bound = [impl.timed_call(tm.module, wl, tm.device, s) for s in sets]
    except CandidateFailure as cf:
        return {"fault": cf.fault.to_dict()}
    except Exception as e:
        return {"fault": tm._fault(e).to_dict()}
    tol = tm.rt.tolerance()
    flags: list[str] = []
    try:
        refs = [tm._reference(wl, s) for s in sets]
        out, trials = time_sets([b[0] for b in bound], cfg, gpu, name)
        flags += _checked_after(tm, wl, sets, refs, tol, bound, trials)
        flags += tm._recheck(fn, wl, sets, refs, tol, base)
    except CandidateFailure as cf:
        return {"fault": cf.fault.to_dict()}
    except Exception as e:  # candidate code raised inside the timing loop
        return {"fault": tm._fault(e).to_dict()}
    return tm._assemble(out, flags, wl, args, float(out["mean_us"]))


def _bound(fn: Callable[[list[Any]], Any], inputs: list[Any]) -> Callable[[], Any]:
    return lambda: fn(inputs)


def _checked_after(
    tm: Timing,
    wl: Any,
    sets: list[list[Any]],
    refs: list[Any],
    tol: Any,
    bound: list[tuple[Callable[[], Any], Callable[[Any], Any], tuple[torch.Tensor, ...]]],
    trials: list[Trial],
) -> list[str]:
    """Outside the timed loops: each set's last timed output must be right; and since destination-passing
    calls reuse their outputs (as the runner's do), they are poisoned again and one more call must write them
    (a call that skips work once its outputs hold an answer shows here)."""
    flags: list[str] = []
    for j, (trial, (_call, read, _outs)) in enumerate(zip(trials, bound, strict=True)):
        chk = tm._compare(read(trial.last), refs[j], wl, sets[j], tol)
        if not chk.passed:
            flags.append(
                f"recheck_failed: the last timed call on input set {j} gave a wrong answer ({chk.kind}: {chk.message})"
            )
            break
    call, read, outs = bound[0]
    if outs:
        for t in outs:
            t.copy_(poisoned(tuple(t.shape), t.dtype, t.device))
        got = tm._call(lambda _inputs: call(), [])
        chk = tm._compare(read(got), refs[0], wl, sets[0], tol)
        if not chk.passed:
            flags.append(
                "stale_output: the outputs a timed call writes into were poisoned again and the next call did not "
                f"rewrite them ({chk.kind}: {chk.message}); every call must compute its outputs"
            )
    return flags
