"""The `kernelbench` timing protocol (EvalSettings.timing_protocol "kernelbench"): a candidate, the eager reference
and the torch.compile baseline timed as KernelBench's own evaluation times them (worker side; imports torch).

What KernelBench does (ScalingIntelligence/KernelBench, `src/kernelbench/`, read at commit 423217d):

- **Timer.** `eval.eval_kernel_against_ref` takes `timing_method="cuda_event"` by default, and so do its scripts
  (`scripts/run_and_check.py`, `scripts/eval_from_generations.py`); `timing.get_timing_function` maps that name
  to `timing.time_execution_with_cuda_event`. Triton's `do_bench` ("do_bench", "do_bench_impl"), the host clock
  ("host_time") and Nsight ("nsight_python_time") exist but are only used when asked for.
- **Warm-up.** `time_execution_with_cuda_event` makes `num_warmup` untimed calls, each followed by a
  `torch.cuda.synchronize`, with no L2 clear; then `torch.cuda.empty_cache()`. The evaluation passes only
  `num_trials`, so a candidate gets the function's default of 3 warm-up calls; the reference baseline
  (`timing.measure_ref_program_time`, used by `scripts/generate_baseline_time.py`) passes 5.
- **Trials.** `num_trials + discard_first` timed calls (`discard_first` defaults to 1: the first is dropped).
  `eval_kernel_against_ref` defaults to `num_perf_trials=10`; KernelBench's scripts evaluate with 100, and
  `measure_ref_program_time` defaults to 100. This protocol takes 100 (`TRIALS`).
- **Each trial:** a `torch.cuda.synchronize` (every stream of the device), two new CUDA events,
  `timing.clear_l2_cache` (a new 32x1024x1024 int64 tensor, 256 MiB, from `torch.empty` on the device,
  `fill_(42)`, then deleted: the block goes back to torch's caching allocator), the start event, the call, the
  end event, a synchronize, `elapsed_time`. The fill is queued just before the start event, so the events start
  when the fill ends and the host issues the call while the fill runs. The call's result is kept until the next
  call has returned.
- **Statistic.** `timing.get_timing_stats`: the mean (also std, min, max) of the kept trials in ms, each rounded
  to 3 significant digits; `KernelExecResult.runtime` is that mean. This protocol reports the mean unrounded
  (`WorkloadTiming.mean_us`).
- **Inputs.** One set: `set_seed(seed_num)` then one `get_inputs()`, every tensor cast to the evaluation's
  `precision` and moved to the device (`eval._process_input_tensor`); the same tensors for every warm-up and
  timed call.
- **Grad mode.** In `eval_kernel_against_ref` the timed `model_new(*inputs)` runs outside `torch.no_grad()`
  (autograd records wherever a parameter is used); `measure_ref_program_time` times under `torch.no_grad()`.
  ksearch calls every model under `torch.no_grad()` (`gpu/tasks/rt/native.py`): the same device work, less host
  work per call for a model whose parameters pass through torch ops.
- **Speed check.** With `check_for_excessive_speedup` (default on) the evaluation also times the reference
  `Model` the same way (`ref_runtime`) and notes a speedup over 10x in the metadata.
- **Correctness** (`eval.run_and_check_correctness`): `num_correct_trials` input sets (default 1; the scripts
  use 5), each from a seed drawn by `torch.randint` after `torch.manual_seed(seed_num)`; the output's shape, then
  `torch.allclose(reference, candidate, atol=t, rtol=t)` with `t = eval.get_tolerance_for_precision(precision)`:
  fp32 1e-4, fp16 1e-2, bf16 1e-2. Every trial must pass. ksearch applies that rule to KernelBench files
  (`ksearch.gpu.tasks.kernelbench_rules`).

What ksearch adds, outside the timed calls: the host-clock cross-check (`timing._host_check`), the re-check of
the output on the timed inputs and the stale-output check (`Timing._recheck`), the harness and precision checks
(`Timing._assemble`); in final mode the inputs are drawn afresh and the outputs of `kept_outputs.KEPT` timed calls,
chosen in secret before the loop, are kept by reference and checked after it (`ksearch.gpu.checks.kept_outputs`): any
check between the calls changes what the events read (on the H200 a LayerNorm kernel read 227-249 us back to back,
232-300 us with a sampled check queued on the device after each call, 258-444 us with a whole check:
bench/kb_final_gap.py). A loop that runs past `WALL_S` stops early (KernelBench has no such limit) and says so in a note.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ksearch.gpu.checks.kept_outputs import KeptOutputs
from ksearch.gpu.tasks.rt.common import clone_data
from ksearch.gpu.timing import measure as timing
from ksearch.gpu.timing.stats import summarize
from ksearch.gpu.worker.core import CandidateFailure, restore_precision
from ksearch.worldmodel.models import EvalSettings

if TYPE_CHECKING:
    from ksearch.gpu.worker.timing import Timing

WARMUP = 3  # time_execution_with_cuda_event's default, which eval_kernel_against_ref leaves as it is
REFERENCE_WARMUP = 5  # measure_ref_program_time's num_warmup
TRIALS = 100  # num_perf_trials of KernelBench's scripts; measure_ref_program_time's num_trials
DISCARD_FIRST = 1  # time_execution_with_cuda_event's default
L2_CLEAR_SHAPE = (32, 1024, 1024)  # int64: 256 MiB, as timing.clear_l2_cache allocates
L2_CLEAR_VALUE = 42
WALL_S = 60.0  # ours: the worker's call must return within the sandbox's limit for it

# bound now: a candidate patching torch.cuda or time later does not reach the loop
_perf = time.perf_counter
_Event = torch.cuda.Event
_sync = torch.cuda.synchronize
_empty_cache = torch.cuda.empty_cache


def _device_name() -> str:
    return torch.cuda.get_device_name()


def l2_clearer(device: torch.device) -> Callable[[], None]:
    """KernelBench's L2 clear: a new 256 MiB int64 tensor on the device, filled with 42, released at once."""

    def clear() -> None:
        buf = torch.empty(L2_CLEAR_SHAPE, dtype=torch.int64, device=device)
        buf.fill_(L2_CLEAR_VALUE)
        del buf  # back to the caching allocator, as upstream's `del dummy`: later allocations may reuse it

    return clear


def time_like_kernelbench(
    fn: Callable[[list[Any]], Any],
    inputs_for: Callable[[int], list[Any]],
    *,
    warmup: int = WARMUP,
    trials: int = TRIALS,
    discard_first: int = DISCARD_FIRST,
    clear_l2: Callable[[], None] | None = None,
    after_each: Callable[[int, Any], None] | None = None,
    before_loop: Callable[[], None] | None = None,
    wall_s: float = WALL_S,
    host_check: bool = True,
) -> timing.TimingResult:
    """Time `fn(inputs)` as KernelBench's `time_execution_with_cuda_event` does (see the module's docstring).

    `inputs_for(k)` gives the inputs of call k (warm-up calls are negative): KernelBench's one set each time, or
    a fresh copy of it where the task's format copies the data per call (made before the synchronize, outside
    the events). `after_each(trial, output)` sees each kept trial's output after its events (final mode's
    checks); `before_loop()` runs after the warm-up's empty_cache. The mean of the kept trials is `mean_us`."""
    t_start = _perf()
    for i in range(warmup):
        fn(inputs_for(-1 - i))
        _sync()
    _empty_cache()
    if before_loop is not None:
        before_loop()
    samples: list[float] = []
    out: Any = None
    total = trials + discard_first
    stopped = 0
    for trial in range(total):
        data = inputs_for(trial)
        _sync()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        if clear_l2 is not None:
            clear_l2()
        start.record()
        # the previous output lives until this call returns, as upstream's `_ = kernel_fn(*args)`
        out = fn(data)
        end.record()
        _sync()
        elapsed_ms = start.elapsed_time(end)
        if trial >= discard_first:
            samples.append(elapsed_ms * 1000.0)
            if after_each is not None:
                after_each(trial - discard_first, out)
        if samples and trial + 1 < total and _perf() - t_start > wall_s:
            stopped = len(samples)
            break
    del out
    mean = sum(samples) / len(samples) if samples else None
    result = timing.TimingResult(
        device=_device_name(), summary=summarize(samples), samples_us=samples, mean_us=mean
    )
    if stopped:
        result.flags.append(
            f"note: the kernelbench protocol stopped after {stopped} of {trials} trials, at its {wall_s:.0f} s "
            "limit; the mean is of those"
        )
    if host_check:
        timing._host_check(fn, [inputs_for(0)], result, None)
    result.wall_s = _perf() - t_start
    return result


# ---------------------------------------------------------------- the worker's `benchmark` in this protocol


def _loop(
    w: Timing,
    fn: Callable[[list[Any]], Any],
    data: list[Any],
    warmup: int,
    st: EvalSettings,
    after_each: Callable[[int, Any], None] | None = None,
    before_loop: Callable[[], None] | None = None,
) -> dict[str, Any]:
    copied = w.rt.copies_per_call

    def inputs_for(k: int) -> list[Any]:
        return clone_data(data) if copied else data

    res = time_like_kernelbench(
        fn,
        inputs_for,
        warmup=warmup,
        trials=_trials(st),
        clear_l2=l2_clearer(w.device),
        after_each=after_each,
        before_loop=before_loop,
    )
    out = res.to_dict()
    out["protocol"] = "kernelbench"
    return out


def _trials(st: EvalSettings) -> int:
    return max(1, min(TRIALS, st.max_reps))


def benchmark(w: Timing, args: dict[str, Any]) -> dict[str, Any]:
    """`Timing.benchmark` under the kernelbench protocol on a GPU: which="eager" and "compile" as
    `measure_ref_program_time` times the reference (5 warm-up calls), the candidate as `eval_kernel_against_ref`
    times `ModelNew` (3), then the cheat checks."""
    assert w.task is not None
    wl = w.task.workload(args["workload"])
    st = EvalSettings.model_validate(args["settings"])
    which = args.get("which", "candidate")
    seed = st.seed + 1000  # timing inputs differ from the correctness trials
    copied = w.rt.copies_per_call
    if which in ("eager", "compile"):

        def time_ref(ref: Callable[[list[Any]], Any]) -> dict[str, Any]:
            data = w.rt.make_inputs(wl, seed, w.device)
            restore_precision(w._precision)
            return _loop(w, ref, data, REFERENCE_WARMUP, st)

        if which == "compile":
            return w._time_compiled(wl, st, time_ref)
        return time_ref(w.rt.build_reference_uncopied(wl, w.device) if copied else w._reference_fn(wl))
    assert w.module is not None, "load a candidate first"
    try:
        fn = w._candidate_fn(wl)
        raw = w._candidate_fn(wl, copy=False) if copied else fn
    except CandidateFailure as cf:
        return {"fault": cf.fault.to_dict()}
    tol = w.rt.tolerance()
    flags: list[str] = []
    try:
        # final mode: inputs no earlier call has seen, and the outputs of timed calls chosen in secret checked after
        # the loop (any check between the calls changes what the events read: gpu/checks/kept_outputs.py)
        data = w.rt.make_inputs(wl, seed + 90_000 if st.final else seed, w.device)
        exp = w._reference(wl, data)
        kept = KeptOutputs(exp, _trials(st)) if st.final else None
        judged = clone_data(data) if kept is not None else []  # the inputs as they were before any call
        out = _loop(
            w,
            raw,
            data,
            WARMUP,
            st,
            kept.add if kept is not None else None,
            kept.prewarm if kept is not None else None,
        )
        if kept is not None:
            failed, note = kept.first_failure(lambda got: w._compare(got, exp, wl, judged, tol))
            if failed is not None:
                trial, chk = failed
                flags.append(
                    f"final_recheck_failed: timed call {trial} gave a wrong answer ({chk.kind}: {chk.message})"
                )
            if note is not None:
                flags.append(note)
        flags += w._recheck(fn, wl, [data], [exp], tol, seed)
    except CandidateFailure as cf:
        return {"fault": cf.fault.to_dict()}
    except Exception as e:  # candidate code raised inside the timing loop
        return {"fault": w._fault(e).to_dict()}
    return w._assemble(out, flags, wl, args, float(out["mean_us"]))
