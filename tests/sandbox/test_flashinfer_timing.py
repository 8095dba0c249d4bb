"""The `flashinfer` timing protocol: the loop of FlashInfer-Bench's runner (FlashInfer's bench_gpu_time_with_cupti as
its time_runnable calls it), checked here on the CPU with a fake device, the settings and tolerances against
FlashInfer-Bench's own config where a copy of it is at .ext/fib, the sandbox taking the protocol on the CPU
interpreter, and on a GPU the profiler's kernel span and the sandbox timing a FlashInfer-Bench definition."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.loader import (
    FIB_ATOL,
    FIB_EVALUATOR,
    FIB_MOE_MATCHED_RATIO,
    FIB_RTOL,
    special_evaluator_notes,
)
from ksearch.gpu.tasks.flashinfer.solution import parse_solution, solution_to_candidate
from ksearch.gpu.worker import protocol_flashinfer as tf
from ksearch.worldmodel.models import Candidate

ROOT = Path(__file__).resolve().parents[2]
FIB = ROOT / ".ext" / "fib" / "flashinfer_bench" / "bench"
TRACE = ROOT / "tests" / "tasks" / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
ROWS = TRACE / "solutions" / "ksearch-fixtures" / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"
MARK = "at::cuda::(anonymous namespace)::spin_kernel(long)"


# ---------------------------------------------------------------- a fake device


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu

    def record(self) -> None:
        self.gpu.log.append("record")

    def elapsed_time(self, end: FakeEvent) -> float:
        return self.gpu.elapsed.pop(0) if self.gpu.elapsed else 1.0


class FakeGpu:
    """Logs what the loop does; kernels advance a device clock and, while traced, leave activities."""

    def __init__(
        self, kernels_us: tuple[float, ...] = (3.0,), gap_us: float = 0.0, flush_parts: int = 1
    ) -> None:
        self.log: list[str] = []
        self.elapsed: list[float] = []  # ms per event pair, in order
        self.kernels_us = kernels_us
        self.gap_us = gap_us
        self.flush_parts = flush_parts
        self.clock = 0.0
        self.acts: list[tuple[float, float, str]] = []
        self.calls = 0

    def _run(self, name: str, us: float) -> None:
        self.acts.append((self.clock, self.clock + us, name))
        self.clock += us

    def sync(self) -> None:
        self.log.append("sync")
        self.clock += 5.0  # the host's wake-up: the device idles

    def flush(self) -> None:
        self.log.append("flush")
        for _ in range(self.flush_parts):
            self._run("fill", 20.0)

    def marker(self) -> None:
        self.log.append("marker")
        self._run(MARK, 1.0)

    def call(self) -> int:
        self.log.append("call")
        self.calls += 1
        for i, us in enumerate(self.kernels_us):
            if i:
                self.clock += self.gap_us  # the host launching the next kernel
            self._run(f"k{i}", us)
        return self.calls

    def trace(self, loop: Any) -> list[tuple[float, float, str]]:
        self.acts = []
        loop()
        return list(self.acts)

    def gpu(self, *, trace: bool = True) -> tf.Gpu:
        return tf.Gpu(
            sync=self.sync,
            event=lambda: FakeEvent(self),
            flush=self.flush,
            marker=self.marker,
            trace=self.trace if trace else None,
        )


def _cfg(**kw: Any) -> tf.FibSettings:
    return tf.FibSettings(**{"warmup": 2, "iterations": 3, "trials": 1, **kw})


# ---------------------------------------------------------------- the loop


def test_the_cupti_loop_is_flashinfers(monkeypatch: pytest.MonkeyPatch) -> None:
    g = FakeGpu(kernels_us=(3.0, 4.0), gap_us=10.0)
    trial = tf.time_trial(g.call, _cfg(), g.gpu())
    first = ["sync", "call", "sync"]  # one call to exclude initial overhead
    estimate = ["record", *["flush", "call"] * tf.ESTIMATE_CALLS, "record", "sync"]
    warmup = ["sync", *["flush", "call"] * 2, "sync"]
    timed = ["flush", "marker", "sync", "call", "sync"] * 3  # flush, synchronize, call, synchronize
    assert g.log == [*first, *estimate, *warmup, *timed]
    assert trial.timer == "cupti" and not trial.flags
    # the span from the first kernel's start to the last one's end: the host gap between them included
    assert trial.samples_ms == pytest.approx([0.017] * 3)
    assert trial.last == g.calls  # the last timed call's output, for the checks after the loop


def test_the_events_loop_is_flashinfers_fallback() -> None:
    g = FakeGpu()
    g.elapsed = [50.0, 0.5, 0.25, 0.75]  # the estimate's pair, then one per timed call
    trial = tf.time_trial(g.call, _cfg(timer="events"), g.gpu())
    n = len(g.log)
    # every timed call issued without a synchronize between them, one at the end
    assert g.log[n - 14 :] == ["sync", *["flush", "record", "call", "record"] * 3, "sync"]
    assert trial.timer == "events" and trial.samples_ms == [0.5, 0.25, 0.75] and trial.last == g.calls


def test_without_a_profiler_the_events_loop_runs_and_says_so() -> None:
    g = FakeGpu()

    def broken(loop: Any) -> list[Any]:
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    gpu = g.gpu()
    gpu.trace = broken
    trial = tf.time_trial(g.call, _cfg(), gpu)
    assert trial.timer == "events" and any("profiler could not trace" in f for f in trial.flags)
    assert all(f.startswith("note:") for f in trial.flags)


def test_a_replaced_profiler_is_tampering_and_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.autograd.profiler as ap

    monkeypatch.setattr(ap.profile, "_parse_kineto_results", lambda self, *a, **k: [])  # a faked trace
    g = FakeGpu()
    gpu = g.gpu()
    gpu.trace = tf._profiled
    trial = tf.time_trial(g.call, _cfg(), gpu)
    assert trial.timer == "events" and trial.flags[0].startswith("harness_tampered")
    assert "_parse_kineto_results" in trial.flags[0]


def test_a_call_that_raises_under_the_tracer_is_the_candidate_s_failure() -> None:
    g = FakeGpu()
    n = {"calls": 0}

    def flaky() -> int:
        n["calls"] += 1
        if n["calls"] > 8:  # after the first call, the estimate and the warm-up
            raise ValueError("boom")
        return g.call()

    with pytest.raises(ValueError, match="boom"):
        tf.time_trial(flaky, _cfg(), g.gpu())


def test_a_slow_call_gets_fewer_iterations_with_a_note() -> None:
    g = FakeGpu()
    g.elapsed = [5 * 2000.0]  # the estimate: 2 s per call
    trial = tf.time_trial(g.call, _cfg(iterations=50, timer="events"), g.gpu(), budget_s=40.0)
    assert (
        len(trial.samples_ms) == 17 and "fib_iterations_cut" in trial.flags[0]
    )  # int(40 s / 2 s) - 2 warm-up


# ---------------------------------------------------------------- reading the trace


def _acts(*spec: tuple[str, float, float]) -> list[tuple[float, float, str]]:
    return [(s, e, n) for n, s, e in spec]


@pytest.mark.parametrize("flush_parts", [1, 2])
def test_segments_are_the_activities_between_a_marker_and_the_next_flush(flush_parts: int) -> None:
    g = FakeGpu(kernels_us=(2.0, 1.0, 3.0), gap_us=4.0, flush_parts=flush_parts)
    tf.time_trial(g.call, _cfg(iterations=4), g.gpu())
    segs = tf.segment(g.acts, 4)
    assert segs is not None and [[a[2] for a in s] for s in segs] == [["k0", "k1", "k2"]] * 4
    spans, problems = tf.spans_ms(segs)
    assert spans == pytest.approx([0.014] * 4) and problems == []


def test_a_trace_that_does_not_read_as_the_loop_is_refused() -> None:
    acts = _acts(("fill", 0, 20), (MARK, 21, 22), ("spin_kernel", 30, 31), ("fill", 40, 60), (MARK, 61, 62))
    assert tf.segment(acts, 2) is None  # three markers for two iterations: a kernel named like the marker


def test_what_flashinfers_cupti_timer_rejects_is_flagged() -> None:
    empty = [[], [(0.0, 1.0, "k")]]
    assert tf.spans_ms(empty)[1][0].startswith("no_kernel_timed")
    changed = [[(0.0, 1.0, "k")], [(5.0, 6.0, "k"), (6.0, 7.0, "memcpy")]]
    spans, problems = tf.spans_ms(changed)
    assert spans == [0.001, 0.002] and problems[0].startswith("inconsistent_kernels")


def test_the_statistic_is_the_mean_of_the_sets_medians() -> None:
    trials = [tf.Trial([1.0, 2.0, 9.0], "cupti"), tf.Trial([3.0, 4.0, 5.0, 6.0], "cupti")]
    res, extra = tf.combine(trials, "fake")
    assert extra["trial_medians_us"] == [2000.0, 4500.0] and res.mean_us == 3250.0
    assert res.summary.n == 7 and extra["protocol"] == "flashinfer" and extra["timer"] == "cupti"
    assert extra["mean_ci_low_us"] <= res.mean_us <= extra["mean_ci_high_us"]
    assert res.to_dict()["mean_us"] == 3250.0


# ---------------------------------------------------------------- settings and tolerances: FlashInfer-Bench's


def test_definitions_carry_the_runner_s_settings() -> None:
    task = load_task(str(RMSNORM))
    assert task.extras["evaluator"] == FIB_EVALUATOR and task.extras["notes"] == []
    cfg = tf.FibSettings.of(task.extras)
    assert (cfg.warmup, cfg.iterations, cfg.trials, cfg.cold_l2, cfg.timer) == (10, 50, 3, True, "cupti")
    assert tf.FibSettings.of({"evaluator": {"timer": "events"}}).timer == "events"
    assert tf.FibSettings.of({"evaluator": {"timer": "cudagraph"}}).timer == "cupti"


def test_definitions_flashinfer_bench_judges_otherwise_say_so() -> None:
    assert special_evaluator_notes("top_k_sampling_from_probs_v128256", "sampling")
    assert special_evaluator_notes("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_paged")
    assert special_evaluator_notes("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", "dsa")
    assert not special_evaluator_notes("rmsnorm_h4096", "rmsnorm")
    assert not special_evaluator_notes("moe_fp8_block_scale_ds_routing_topk8", "moe")  # a matched ratio only


def _load_file(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # pydantic resolves the module's annotations through it
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not (FIB / "config.py").is_file(), reason="needs FlashInfer-Bench's copy at .ext/fib")
def test_settings_and_tolerances_are_flashinfer_bench_s_own() -> None:
    pytest.importorskip("yaml")
    cfg = _load_file(FIB / "config.py", "fib_upstream_config")
    resolved = cfg.BenchmarkConfig.default()

    class Definition:
        op_type, name = "rmsnorm", "rmsnorm_h4096"

    class Moe:
        op_type, name = "moe", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"

    plain = resolved.resolve_eval_config(Definition())
    assert (plain.warmup_runs, plain.iterations, plain.num_trials) == (
        FIB_EVALUATOR["warmup"],
        FIB_EVALUATOR["iterations"],
        FIB_EVALUATOR["trials"],
    )
    assert (plain.atol, plain.rtol, plain.required_matched_ratio) == (FIB_ATOL, FIB_RTOL, None)
    assert resolved.resolve_eval_config(Moe()).required_matched_ratio == FIB_MOE_MATCHED_RATIO
    timing_src = (FIB / "timing.py").read_text()
    assert "use_cuda_graph=False" in timing_src and "cold_l2_cache=True" in timing_src
    assert "statistics.median(times)" in timing_src


# ---------------------------------------------------------------- the sandbox


def _rows_candidate() -> Candidate:
    task = load_task(str(RMSNORM))
    c = solution_to_candidate(parse_solution(ROWS.read_text()), task)
    return Candidate.of(c.source, c.language)


@pytest.mark.anyio
@pytest.mark.cpu
@pytest.mark.timeout(300)
@pytest.mark.slow
async def test_the_cpu_interpreter_takes_the_protocol(sandbox: Any, st: Any) -> None:
    task = load_task(str(RMSNORM))
    ev = await sandbox.evaluate(_rows_candidate(), task, st("smoke", timing_protocol="flashinfer"))
    assert ev.status == "ok", (ev.error, ev.flags)
    t = ev.timings[0]
    assert t.device == "cpu-interpreter" and t.protocol == "flashinfer" and t.statistic == "mean"


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@pytest.mark.gpu
@needs_gpu
def test_the_profiler_reads_the_span_of_a_call_host_gaps_included() -> None:
    x = torch.randn(
        1 << 26, device="cuda"
    )  # 256 MB: a kernel of ~0.1 ms, launch overheads negligible beside it

    def two_kernels_apart() -> Any:
        y = x * 2.0
        t = time.perf_counter()
        while time.perf_counter() - t < 300e-6:  # the host takes 300 us to issue the second kernel
            pass
        return y + 1.0

    gpu = tf.cuda_gpu(x.device, cold_l2=True)
    cupti = tf.time_trial(two_kernels_apart, tf.FibSettings(iterations=20), gpu)
    assert cupti.timer == "cupti" and not cupti.flags, cupti.flags
    assert statistics.median(cupti.samples_ms) > 0.3  # the gap between the kernels is inside the span
    one = tf.time_trial(lambda: x * 2.0, tf.FibSettings(iterations=20), gpu)
    events = tf.time_trial(lambda: x * 2.0, tf.FibSettings(iterations=20, timer="events"), gpu)
    a, b = statistics.median(one.samples_ms), statistics.median(events.samples_ms)
    assert one.timer == "cupti" and abs(a / b - 1) < 0.05, (a, b)  # one long kernel: both timers agree


@pytest.mark.gpu
@needs_gpu
def test_the_loop_matches_flashinfers_own_timer_where_it_is_installed() -> None:
    testing = pytest.importorskip("flashinfer.testing")
    x = torch.randn(4096, 4096, device="cuda")
    ours, theirs = [], []
    for _ in range(3):  # interleaved: the clocks drift alike for both
        t = tf.time_trial(lambda: x @ x, tf.FibSettings(), tf.cuda_gpu(x.device, True))
        ours.append(statistics.median(t.samples_ms))
        ms = testing.bench_gpu_time_with_cupti(
            fn=lambda a: a @ a, dry_run_iters=10, repeat_iters=50, input_args=(x,), cold_l2_cache=True
        )
        theirs.append(statistics.median(ms))
    assert abs(min(ours) / min(theirs) - 1) < 0.05, (ours, theirs)


@pytest.mark.gpu
@pytest.mark.anyio
@needs_gpu
@pytest.mark.parametrize("final", [False, True], ids=["search", "final"])
async def test_the_sandbox_times_candidate_and_baseline_as_flashinfer_bench(
    sandbox: Any, st: Any, final: bool
) -> None:
    task = load_task(str(RMSNORM))
    wl = next(w.name for w in task.workloads if w.split == "search")
    ev = await sandbox.evaluate(_rows_candidate(), task, st(wl, timing_protocol="flashinfer", final=final))
    assert ev.status == "ok", (ev.error, ev.flags)
    t = ev.timings[0]
    assert t.protocol == "flashinfer" and t.statistic == "mean" and t.n == 150
    assert t.mean_us is not None and t.time_us == t.mean_us and t.eager_us is not None
    assert not any(f.startswith("note: fib_timer") for f in t.flags), t.flags
    assert not any(f.startswith(("recheck_failed", "stale_output", "no_kernel_timed")) for f in ev.flags)
