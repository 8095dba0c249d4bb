"""A GPU MODE final evaluation checks the task's tests and benchmarks but times the benchmarks alone (as that
evaluator's leaderboard mode does): an evaluation is complete when every workload it was to time has a timing. On
the H200, counting the checked workloads instead failed every candidate of a histogram search's final evaluation
("timing did not complete") and cost the search its best."""

from __future__ import annotations

from pathlib import Path

from ksearch.gpu.sandbox.run import Run, finish
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import (
    Candidate,
    CompileReport,
    EvalSettings,
    WorkloadCorrectness,
    WorkloadTiming,
)

SCALED_ADD = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "gpumode" / "scaled_add"


def _run(final: bool, timed: list[str]) -> Run:
    task = load_task(str(SCALED_ADD))
    run = Run(
        Candidate.of("def custom_kernel(data):\n    return data[0]\n", "triton"),
        EvalSettings(seed=1, final=final, timing_protocol="gpumode"),
        task,
    )
    checked = [w.name for w in task.workloads if w.split != "smoke"]
    assert {"bench0", "bench1"} < set(checked) and any(n.startswith("test") for n in checked)
    run.correctness = [WorkloadCorrectness(workload=n, passed=True, kind="ok", trials=1) for n in checked]
    run.timings = [
        WorkloadTiming(
            workload=n,
            device="NVIDIA H200",
            median_us=10.0,
            iqr_us=1.0,
            ci_low_us=9.0,
            ci_high_us=11.0,
            n=100,
        )
        for n in timed
    ]
    return run


def _static() -> CompileReport:
    return CompileReport(ok=True, language="triton", seconds=0.01)


def test_a_final_evaluation_that_timed_every_benchmark_is_complete() -> None:
    ev = finish(_run(final=True, timed=["bench0", "bench1"]), _static(), None, "sm_90")
    assert ev.status == "ok", ev.error


def test_a_missing_benchmark_timing_is_still_an_error_naming_it() -> None:
    ev = finish(_run(final=True, timed=["bench0"]), _static(), None, "sm_90")
    assert ev.status == "error" and ev.error == "timing did not complete (not timed: bench1)"


def test_outside_the_final_evaluation_every_checked_workload_is_timed() -> None:
    ev = finish(_run(final=False, timed=["bench0", "bench1"]), _static(), None, "sm_90")
    assert (
        ev.status == "error"
        and ev.error is not None
        and ev.error.startswith("timing did not complete (not timed: test")
    )
