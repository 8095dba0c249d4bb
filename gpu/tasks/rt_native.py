"""Running a native (KernelBench-style) task: inputs, reference Model, candidate ModelNew, cost."""

from __future__ import annotations

import hashlib
import json
import types
from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.task import Cost, Task, TaskError, Workload
from ksearch.gpu.tasks.rt_common import (
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
        return list(to_device(list(inputs), device))

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
            model = cls(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device).eval()
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
