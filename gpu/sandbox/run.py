"""One evaluation while it is assembled (`Run`), and its assembly into an `Evaluation`: the compile report
merged with what the worker saw at run time, the status decided from the checks, the geomean speedups."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ksearch.gpu.build import occupancy
from ksearch.gpu.task import Task, TaskError
from ksearch.gpu.timing.stats import geomean
from ksearch.worldmodel.models import (
    Candidate,
    CompileReport,
    Diagnostic,
    Environment,
    EvalSettings,
    Evaluation,
    KernelResources,
    ProfileSummary,
    WorkloadCorrectness,
    WorkloadTiming,
    is_note,
)


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "no parameters"


def task_json(task: Task) -> dict[str, Any]:
    """The task as the worker receives it (plain JSON data)."""
    return json.loads(task.model_dump_json())


def diag(d: dict[str, Any]) -> Diagnostic:
    sev = d.get("severity", "error")
    return Diagnostic(
        severity=sev if sev in ("error", "warning", "note") else "error",
        message=str(d.get("message", ""))[:4000],
        line=d.get("line"),
        kernel=d.get("kernel"),
    )


def smoke_name(task: Task) -> str:
    """The workload a single launch runs on: the smoke one, else the first."""
    try:
        return task.smoke().name
    except TaskError:
        return task.workloads[0].name


class Run:
    """The state of one evaluation while it is assembled."""

    def __init__(self, candidate: Candidate, settings: EvalSettings, task: Task | None = None) -> None:
        self.candidate = candidate
        self.settings = settings
        self.task = task
        self.t0 = time.perf_counter()
        self.correctness: list[WorkloadCorrectness] = []
        self.timings: list[WorkloadTiming] = []
        self.flags: list[str] = []
        self.status: str | None = None
        self.error: str | None = None
        self.runtime_compile: dict[str, Any] | None = None  # fault of kind "compile" from the worker
        self.runtime_kernels: list[dict[str, Any]] = []
        self.ran = False  # the candidate was loaded and called at least once
        self.pure_pytorch = False  # the kernel audit saw no kernel of the candidate's own run
        self.audited: bool | None = None  # whether the kernel audit after the timing ran (None: none was due)
        self.steps: dict[str, float] = {}  # where the seconds went, by step

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to step `name`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - t0

    def flag(self, *flags: str) -> None:
        for f in flags:
            if f not in self.flags:
                self.flags.append(f)

    def fail(self, status: str, error: str) -> None:
        if self.status is None:
            self.status, self.error = status, error


def merge_compile(static: CompileReport, run: Run, arch: str, judged: bool = True) -> CompileReport:
    """The static compile report with what the worker saw at run time: a run-time compile error,
    the kernels actually built (their resources and occupancy for `arch`); `judged=False` (a compile
    request): a failed warm launch is a warning, not a verdict."""
    report = static.model_copy(deep=True)
    if run.runtime_compile is not None:
        diags = [diag(d) for d in run.runtime_compile.get("diagnostics", [])]
        if not any(d.severity == "error" for d in diags):
            diags.append(Diagnostic(severity="error", message=run.runtime_compile["message"][:4000]))
        seen = {(d.line, d.message) for d in diags}  # nvcc and NVRTC often say the same thing
        report.diagnostics = diags + [d for d in report.diagnostics if (d.line, d.message) not in seen]
        report.ok = False
        report.log = (run.runtime_compile["message"] + "\n" + report.log)[-20000:]
        report.mode = (report.mode + "; " if report.mode else "") + "run-time compile in the worker"
    elif run.ran and not static.ok and static.language in ("cuda", "cpp_ext"):
        # nvcc disagreed with the run-time compiler that actually built and ran the kernels
        report.diagnostics = [
            d.model_copy(
                update={
                    "severity": "warning",
                    "message": "nvcc static check (the run-time compiler accepted this): " + d.message,
                }
            )
            if d.severity == "error"
            else d
            for d in report.diagnostics
        ]
        report.ok = True
    if run.runtime_kernels:
        rk = [
            KernelResources(**{k: v for k, v in k_.items() if k in KernelResources.model_fields})
            for k_ in run.runtime_kernels
        ]
        rnames = {k.name for k in rk}
        static_measured = [k for k in report.kernels if k.registers is not None and k.name not in rnames]
        # a kernel the run-time compiler built (NVRTC, Triton) is described by what that build used: nvcc's static
        # figures for it (other registers, other spills) would contradict the kernel's own line
        # (what ptxas said of the code, a performance warning, stays: the run-time build ran ptxas on it too)
        report.diagnostics = [
            d
            for d in report.diagnostics
            if d.kernel is None or d.kernel not in rnames or d.message.startswith("ptxas")
        ]
        annotated = []
        for k in rk:
            if k.registers is not None or k.num_warps is not None:
                k, notes = occupancy.annotate(k, arch)
                report.diagnostics += notes
            annotated.append(k)
        report.kernels = static_measured + annotated
        if static.language == "triton":
            report.mode += (
                "; Triton kernels compiled by their first launch (resources from Triton's metadata)"
            )
    if not judged and run.correctness and not run.correctness[0].passed and run.runtime_compile is None:
        c = run.correctness[0]
        if c.kind in ("exception", "crash", "timeout", "interpreter_timeout"):
            report.diagnostics.append(
                Diagnostic(
                    severity="warning",
                    message=f"the warm launch on {c.workload} failed ({c.kind}): {c.message[:1500]}",
                )
            )
    return report


def timed_names(task: Task, names: list[str], st: EvalSettings) -> list[str]:
    """The workloads an evaluation times. A final evaluation in GPU MODE's protocol times the task's benchmarks
    alone, as that evaluator's leaderboard mode does (its tests are checked, not timed); every other evaluation
    times every workload it checks."""
    if st.final and st.timing_protocol == "gpumode":
        bench = [n for n in names if task.workload(n).split == "search"]
        return bench or names
    return names


def _untimed(run: Run) -> list[str]:
    """The workloads this evaluation was to time and has no timing for: those it checked, less the ones its protocol
    checks without timing (a GPU MODE final evaluation's tests)."""
    checked = [c.workload for c in run.correctness]
    done = {t.workload for t in run.timings}
    to_time = timed_names(run.task, checked, run.settings) if run.task is not None else checked
    return [n for n in to_time if n not in done]


def finish(
    run: Run,
    static: CompileReport,
    env: Environment | None,
    arch: str,
    *,
    status: str | None = None,
    profile: ProfileSummary | None = None,
    timing: bool = True,
) -> Evaluation:
    """The Evaluation: its status decided from the compile report, the checks and the timings."""
    report = merge_compile(static, run, arch)
    for d in static.diagnostics:
        if d.severity == "warning" and d.message.startswith("suspicious:"):
            run.flag(f"tamper_suspect: line {d.line}: {d.message.removeprefix('suspicious: ')}")
    if status is None:
        if not report.ok:
            status = "compile_error"
            errs = [
                f"line {d.line}: {d.message}" if d.line else d.message
                for d in report.diagnostics
                if d.severity == "error"
            ]
            run.error = run.error if run.status == "compile_error" and run.error else "; ".join(errs[:5])
        elif run.status is not None:
            status = run.status
        elif any(not is_note(f) for f in run.flags):
            status = "flagged"
            run.error = "cheat checks tripped: " + "; ".join(f for f in run.flags if not is_note(f))
        elif not run.correctness or not all(c.passed for c in run.correctness):
            status = "incorrect"
            bad = next((c for c in run.correctness if not c.passed), None)
            run.error = (
                f"wrong result on workload {bad.workload!r}: {bad.kind}: {bad.message}"
                if bad
                else "no correctness result"
            )
        elif timing and (untimed := _untimed(run)):
            status = "error"
            run.error = run.error or f"timing did not complete (not timed: {', '.join(untimed)})"
        else:
            status = "ok"
    elif status == "compile_error":
        errs = [
            f"line {d.line}: {d.message}" if d.line else d.message
            for d in report.diagnostics
            if d.severity == "error"
        ]
        run.error = "; ".join(errs[:5])
    sp_e = geomean([t.speedup_vs_eager for t in run.timings if t.speedup_vs_eager])
    sp_c = geomean([t.speedup_vs_compile for t in run.timings if t.speedup_vs_compile])
    roof = geomean([t.roofline_fraction for t in run.timings if t.roofline_fraction])
    if run.timings and run.timings[0].device == "cpu-interpreter":
        run.flag(
            "note: timings are from the Triton CPU interpreter: functional only, never comparable with "
            "GPU timings"
        )
    return Evaluation(
        status=status,
        compile=report,
        correctness=run.correctness,
        timings=run.timings,
        speedup_vs_eager=sp_e,
        speedup_vs_compile=sp_c,
        roofline_fraction=roof,
        profile=profile,
        env=env,
        settings=run.settings,
        flags=run.flags,
        error=run.error[:6000] if run.error else None,
        seconds=time.perf_counter() - run.t0,
        seconds_by_step=_steps(run, report),
        pure_pytorch=run.pure_pytorch,
        audited=run.audited,
    )


def _steps(run: Run, report: CompileReport | None) -> dict[str, float]:
    out = dict(run.steps)
    if report is not None and report.seconds:
        out["compile"] = report.seconds
    return {k: round(v, 3) for k, v in out.items() if v >= 0.0005}
