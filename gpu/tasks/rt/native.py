"""Running a native (KernelBench-style) task: inputs, reference Model, candidate ModelNew, cost.

At a KernelBench `precision` (`task.extras["precision"]`, gpu/tasks/kernelbench_rules.py) every tensor input and
init input is cast to its dtype and both models are moved with `.to(dtype=...)`, as KernelBench's evaluation does.
"""

from __future__ import annotations

import hashlib
import json
import types
from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.task import Cost, Task, TaskError, Workload
from ksearch.gpu.tasks.kernelbench_rules import PRECISION_DTYPE
from ksearch.gpu.tasks.rt.common import (
    INIT_SEED,
    CandidateError,
    as_result,
    call_with_params,
    exec_code,
    load_file_module,
    seed_everything,
    to_device,
)
from ksearch.gpu.tasks.shrink import patched_code


def _runner(model: Any) -> Callable[[list], Any]:
    def call(inputs: list) -> Any:
        with torch.no_grad():
            return as_result(model(*inputs))

    return call


class NativeRuntime:
    def __init__(self, task: Task) -> None:
        self.task = task
        self.path = task.source_path
        precision = task.extras.get("precision")
        # KernelBench's precision: the dtype its evaluation casts inputs and weights to (None: as the file has them)
        self.dtype: torch.dtype | None = (
            getattr(torch, PRECISION_DTYPE[precision]) if precision in PRECISION_DTYPE else None
        )
        self.module = load_file_module(self.path)
        for name in ("Model", "get_inputs"):
            if not hasattr(self.module, name):
                raise TaskError(f"{self.path}: {name}: not defined after running the file")
        # a workload that replaces module constants (a shrunk smoke workload) runs its own copy of the
        # file, built up front so a bad replacement fails here rather than mid-evaluation
        self._variants: dict[str, types.ModuleType] = {}
        for w in task.workloads:
            if w.constants:
                self.module_for(w)

    def module_for(self, workload: Workload) -> types.ModuleType:
        """The task module as this workload sees it: the file itself, or a copy with its constants replaced."""
        if not workload.constants:
            return self.module
        key = json.dumps(workload.constants, sort_keys=True)
        mod = self._variants.get(key)
        if mod is None:
            code = patched_code(self.path.read_text(), self.path, workload.constants)
            suffix = hashlib.sha1(key.encode()).hexdigest()[:8]
            mod = exec_code(code, f"{self.module.__name__}_{suffix}", self.path)
            self._variants[key] = mod
        return mod

    def make_inputs(self, workload: Workload, seed: int, device: str) -> list:
        module = self.module_for(workload)
        with torch.device(device):
            seed_everything(seed)
            inputs = call_with_params(module.get_inputs, workload.params, f"{self.path}: get_inputs")
        return [self._cast(x) for x in to_device(list(inputs), device)]

    def _cast(self, x: Any) -> Any:
        """A tensor at the precision's dtype, integer ones too (KernelBench's `_process_input_tensor`)."""
        return x.to(dtype=self.dtype) if self.dtype is not None and isinstance(x, torch.Tensor) else x

    def _build(self, cls: type, workload: Workload, device: str) -> Any:
        # Built on the CPU after a fixed seed, then moved: the same weights on every device.
        module = self.module_for(workload)
        with torch.device("cpu"):
            seed_everything(INIT_SEED)
            init = []
            if hasattr(module, "get_init_inputs"):
                init = call_with_params(
                    module.get_init_inputs, workload.params, f"{self.path}: get_init_inputs"
                )
            model = cls(*[self._cast(x) for x in init])
        if isinstance(model, torch.nn.Module):
            model = (
                model.to(device).eval() if self.dtype is None else model.to(device, dtype=self.dtype).eval()
            )
        return model

    def reference_model(self, workload: Workload, device: str) -> Any:
        """The task's `Model` built for this workload (its parameters and buffers are part of the work)."""
        return self._build(self.module_for(workload).Model, workload, device)

    def build_reference(self, workload: Workload, device: str) -> Callable[[list], Any]:
        return _runner(self.reference_model(workload, device))

    def build_candidate(
        self, module: types.ModuleType, workload: Workload, device: str
    ) -> Callable[[list], Any]:
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            raise CandidateError(
                "the candidate defines no `ModelNew`; define class ModelNew(torch.nn.Module) taking the same "
                "constructor arguments as the task's Model, with forward(*inputs) returning the output(s)"
            )
        return _runner(self._build(cls, workload, device))

    def cost(self, workload: Workload) -> Cost | None:
        fn = getattr(self.module, "COST", None)
        if fn is None:
            return None
        if not callable(fn):
            raise TaskError(f"{self.path}: COST: must be a function params -> {{'flops', 'bytes', 'dtype'}}")
        try:
            raw = fn(dict(workload.params))
            return Cost(**raw)
        except Exception as exc:
            raise TaskError(
                f"{self.path}: COST: failed for workload {workload.name!r}: {exc} "
                "(it must return a mapping with flops, bytes and optionally dtype)"
            ) from None
