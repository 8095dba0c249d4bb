"""Run a task's reference once at its smoke workload (on the CPU; on the GPU for a task that needs one) and
look for a degenerate rule.

Meant to run in its own process (it imports torch), so the CLI that asks stays light:

    python -m ksearch.gpu.tasks.check softmax      ->  one JSON object on stdout
"""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import BaseModel, Field


class OutputInfo(BaseModel):
    shape: list[int]
    dtype: str


class CheckReport(BaseModel):
    task: str
    workload: str = ""
    ok: bool = False
    seconds: float = 0.0  # wall time of one reference call
    outputs: list[OutputInfo] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # degenerate-rule findings nothing rejects
    # trivial answers the rule accepts on the task's own inputs, which the probe on signed inputs rejects
    probed: list[str] = Field(default_factory=list)
    error: str | None = None
    # why the reference cannot run without a GPU (GPU MODE references that put tensors on CUDA): on a machine
    # without one the check does not run and says this instead of failing inside torch
    needs_gpu: str | None = None
    device: str = "cpu"


def run_check(ref: str, workloads: str | None = None, seed: int = 0) -> CheckReport:
    """Run the reference once on the smoke workload and judge the rule on that one run's outputs.

    Lean on memory: one model, one set of inputs and outputs at a time (the outputs are dropped before the
    probe runs), and comparisons made piece by piece (ksearch.gpu.checks.outputs.pieces)."""
    import torch

    from ksearch.gpu.checks import degenerate
    from ksearch.gpu.inputs import as_outputs, degenerate_findings, dtype_name
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.rt.runtime import TaskRuntime

    task = load_task(ref, workloads=workloads)
    wl = task.smoke()
    report = CheckReport(task=task.name, workload=wl.name, needs_gpu=task.extras.get("needs_gpu"))
    if report.needs_gpu:
        if not torch.cuda.is_available():
            report.error = (
                f"this task needs a GPU ({report.needs_gpu}); this machine has none, so the check did not run"
            )
            return report
        report.device = "cuda"
    device = report.device
    try:
        rt = TaskRuntime(task)
        inputs = rt.make_inputs(wl, seed, device)
        fn = rt.build_reference(wl, device)
        start = time.perf_counter()
        with torch.no_grad():
            out = as_outputs(fn(inputs))
        report.seconds = time.perf_counter() - start
        report.outputs = [
            OutputInfo(shape=list(o.shape), dtype=dtype_name(o.dtype))
            for o in out
            if isinstance(o, torch.Tensor)
        ]
        fakes = degenerate_findings(rt, wl, inputs, out)
        del out
        if fakes:
            caught = degenerate.caught_by_probe(fn, inputs, fakes, rt.tolerance(), seed)
            for i, f in enumerate(fakes):
                if isinstance(caught, str):
                    report.warnings.append(f"{f.warning} (the trivial-answer probe cannot run: {caught})")
                elif caught[i]:
                    report.probed.append(
                        f"output {f.output}: {f.label} passes the rule on the task's own inputs (workload "
                        f"{wl.name!r}), but a candidate answering that is rejected: on extra inputs with signed "
                        f"values the reference's output is not {f.label}"
                    )
                else:
                    report.warnings.append(f"{f.warning} (also on inputs with signed values)")
        report.ok = True
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("task", help="built-in name or path")
    parser.add_argument("--workloads", default=None, help="FlashInfer-Bench workloads JSONL")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        report = run_check(args.task, args.workloads, args.seed)
    except Exception as exc:  # a task that does not even load: still one JSON answer
        report = CheckReport(task=args.task, error=f"{type(exc).__name__}: {exc}")
    sys.stdout.write(report.model_dump_json() + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
