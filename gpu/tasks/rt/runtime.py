"""Running a task inside a worker: make inputs, build the reference and a candidate, cost, custom checks.

This module imports torch; only sandbox workers and tests import it, never the MCP server.

Weights: for native (KernelBench-style) tasks the reference `Model(*get_init_inputs(**params))`
and the candidate `ModelNew(*same)` are each built on the CPU right after
`torch.manual_seed(INIT_SEED)` and then moved to the device, so parameters created in the same
order with the same shapes get identical values. A candidate that needs the weights must create
them exactly as `Model` does (e.g. the same `nn.Linear`s in the same order).

Inputs: `make_inputs` is deterministic for a (workload, seed, device) and draws tensors directly
on the device (inside `with torch.device(device)` after `torch.manual_seed(seed)`).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ksearch.gpu.task import Cost, Task, Tolerance, Workload
from ksearch.gpu.tasks.rt.common import INIT_SEED, CandidateError, exec_module, module_name
from ksearch.worldmodel.models import WorkloadCorrectness

__all__ = ["INIT_SEED", "CandidateError", "TaskRuntime", "load_candidate_module"]


class TaskRuntime:
    """One task's executable side. Build once per worker and task; reuse across candidates."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.inputs_s = 0.0  # host seconds spent drawing inputs (GPU draws: their launch time only)
        if task.style == "flashinfer":
            from ksearch.gpu.tasks.rt.flashinfer import FlashInferRuntime

            self._impl: Any = FlashInferRuntime(task)
        elif task.style == "gpumode":
            from ksearch.gpu.tasks.rt.gpumode import GpuModeRuntime

            self._impl = GpuModeRuntime(task)
        else:
            from ksearch.gpu.tasks.rt.native import NativeRuntime

            self._impl = NativeRuntime(task)

    def make_inputs(self, workload: Workload, seed: int, device: str, *, once: bool = False) -> list:
        """Forward inputs for one trial: the same seed gives the same values, signed and varied. `once`: this
        process asks for them once (a GPU MODE evaluator's fresh data per call), so a slow draw is not kept."""
        t0 = time.perf_counter()
        try:
            if once and self.task.style == "gpumode":
                return self._impl.make_inputs(workload, seed, device, once=True)
            return self._impl.make_inputs(workload, seed, device)
        finally:
            self.inputs_s += time.perf_counter() - t0

    def build_reference(self, workload: Workload, device: str) -> Callable[[list], Any]:
        """A callable inputs -> output (tensor or tuple of tensors) computing the reference."""
        return self._impl.build_reference(workload, device)

    @property
    def reference_module(self) -> types.ModuleType | None:
        """The module the reference's code lives in (watched by ksearch.gpu.checks.guard), if the format has one."""
        for attr in ("module", "reference"):  # native; GPU MODE and FlashInfer-Bench
            mod = getattr(self._impl, attr, None)
            if isinstance(mod, types.ModuleType):
                return mod
        return None

    def build_candidate(
        self, module: types.ModuleType, workload: Workload, device: str, *, copy: bool = True
    ) -> Callable[[list], Any]:
        """A callable inputs -> output for a loaded candidate module (ModelNew / run / custom_kernel).

        `copy=False`: a format whose calls each run on a fresh copy of the data (`copies_per_call`) calls on
        the data itself; the caller then makes the copies (outside a timed region). Raises CandidateError
        when the module lacks the entry point the task needs.
        """
        if not copy and self.copies_per_call:
            return self._impl.build_candidate(module, workload, device, copy=False)
        return self._impl.build_candidate(module, workload, device)

    @property
    def copies_per_call(self) -> bool:
        """Whether reference and candidate calls each copy the data first (GPU MODE: data carries outputs)."""
        return hasattr(self._impl, "build_reference_uncopied")

    def build_reference_uncopied(self, workload: Workload, device: str) -> Callable[[list], Any]:
        """The reference called on the data itself (see `build_candidate`'s `copy`)."""
        if self.copies_per_call:
            return self._impl.build_reference_uncopied(workload, device)
        return self._impl.build_reference(workload, device)

    def task_inputs(self, workload: Workload, device: str) -> list | None:
        """The inputs the task's own evaluator times (its fixed seeds), for formats that have them, else None."""
        fn = getattr(self._impl, "task_inputs", None)
        t0 = time.perf_counter()
        try:
            return fn(workload, device) if fn else None
        finally:
            self.inputs_s += time.perf_counter() - t0

    @property
    def input_cache(self) -> Any:
        """The runtime's cache of slow input draws (an InputCache), or None for formats that draw quickly."""
        return getattr(self._impl, "inputs", None)

    def tolerance(self) -> Tolerance:
        return self.task.tolerance

    @property
    def has_own_check(self) -> bool:
        """Whether the task judges outputs with its own check rather than `tolerance()`."""
        return getattr(self._impl, "check", None) is not None

    def check(
        self, got: Any, expected: Any, workload: Workload, inputs: list | None = None
    ) -> WorkloadCorrectness | None:
        """The task's own correctness check (GPU MODE check_implementation), else None: apply tolerance().

        `inputs` are the ones the outputs were computed from; when omitted, the last inputs this
        runtime made for the workload are used.
        """
        fn = getattr(self._impl, "check", None)
        return fn(got, expected, workload, inputs) if fn else None

    def cost(self, workload: Workload) -> Cost | None:
        """FLOPs and minimum bytes for one call on this workload, when the task has a cost model."""
        return self._impl.cost(workload)


def load_candidate_module(source: str, name: str, directory: Path | None = None) -> types.ModuleType:
    """Execute candidate source as a module, from a real file `<directory or cwd>/<name>.py`.

    The file gives tracebacks and Triton (which reads kernel source) real line numbers. The
    worker's cwd is its scratch directory.
    """
    mod = module_name(name)
    path = (directory or Path.cwd()) / f"{mod}.py"
    path.write_text(source)
    return exec_module(source, mod, path)
