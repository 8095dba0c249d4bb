"""Run a task's reference once on the CPU at its smoke workload and look for a degenerate rule.

Meant to run in its own process (it imports torch), so the CLI that asks stays light:

    python -m gpu.tasks.check softmax      ->  one JSON object on stdout
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
    warnings: list[str] = Field(default_factory=list)  # degenerate-rule findings
    error: str | None = None


def run_check(ref: str, workloads: str | None = None, seed: int = 0) -> CheckReport:
    import torch

    from gpu.inputs import as_outputs, degenerate_outputs, dtype_name
    from gpu.runtime import TaskRuntime
    from gpu.tasks import load_task

    task = load_task(ref, workloads=workloads)
    report = CheckReport(task=task.name, workload=task.smoke().name)
    try:
        rt = TaskRuntime(task)
        wl = task.smoke()
        inputs = rt.make_inputs(wl, seed, "cpu")
        fn = rt.build_reference(wl, "cpu")
        start = time.perf_counter()
        out = fn(inputs)
        report.seconds = time.perf_counter() - start
        report.outputs = [
            OutputInfo(shape=list(o.shape), dtype=dtype_name(o.dtype))
            for o in as_outputs(out)
            if isinstance(o, torch.Tensor)
        ]
        report.warnings = degenerate_outputs(task, seed=seed)
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
