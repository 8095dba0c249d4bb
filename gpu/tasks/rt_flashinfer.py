"""Running a FlashInfer-Bench task: inputs from axes and descriptors, reference `run`, both candidate styles.

Candidates define `run` taking the inputs by name. Destination-passing style also takes every
output by name and writes into it (the runtime allocates them NaN-filled on every call);
value-returning style returns the output(s). The style is read from run's signature, or from a
module-level `DESTINATION_PASSING = True/False` when given.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpu.inputs import poisoned, random_tensor, torch_dtype
from gpu.task import Cost, Task, TaskError, Workload
from gpu.tasks.flashinfer import axis_value
from gpu.tasks.rt_common import CandidateError, exec_module, seed_everything


class FlashInferRuntime:
    def __init__(self, task: Task) -> None:
        self.task = task
        ex = task.extras
        self.axes: dict[str, Any] = ex["axes"]
        self.inputs: dict[str, Any] = ex["inputs"]
        self.outputs: dict[str, Any] = ex["outputs"]
        source: str = ex["reference"]
        digest = hashlib.sha1(source.encode()).hexdigest()[:10]
        # A real file, so tracebacks through the reference show its lines.
        folder = Path(tempfile.gettempdir()) / "ksearch-references"
        folder.mkdir(parents=True, exist_ok=True)
        filename = folder / f"{task.name}_{digest}.py"
        filename.write_text(source)
        self.reference = exec_module(source, f"_ksearch_fib_ref_{digest}", filename)
        self._files: dict[str, dict[str, torch.Tensor]] = {}

    # ------------------------------------------------------------------ shapes and inputs

    def _shape(self, spec: dict[str, Any], workload: Workload) -> tuple[int, ...]:
        return tuple(axis_value(a, self.axes, workload.params["axes"]) for a in spec["shape"])

    def _load(self, path: str, key: str, name: str) -> torch.Tensor:
        if path not in self._files:
            from safetensors.torch import load_file

            self._files[path] = load_file(path)
        tensors = self._files[path]
        if key not in tensors:
            raise TaskError(
                f"{path}: tensor_key {key!r} (input {name!r}) not in the file; it has: {', '.join(tensors)}"
            )
        return tensors[key]

    def make_inputs(self, workload: Workload, seed: int, device: str) -> list:
        descs = workload.params["inputs"]
        out: list[Any] = []
        with torch.device(device):
            seed_everything(seed)
            for name, spec in self.inputs.items():
                desc = descs[name]
                if desc["type"] == "scalar":
                    out.append(desc["value"])
                    continue
                shape = self._shape(spec, workload)
                if desc["type"] == "safetensors":
                    t = self._load(desc["path"], desc["tensor_key"], name)
                    if tuple(t.shape) != shape or t.dtype != torch_dtype(spec["dtype"]):
                        raise TaskError(
                            f"{desc['path']}: {desc['tensor_key']}: input {name!r} should be {spec['dtype']} "
                            f"{list(shape)}, the file holds {str(t.dtype).removeprefix('torch.')} {list(t.shape)}"
                        )
                    out.append(t.to(device))
                else:
                    out.append(random_tensor(shape, spec["dtype"], device, desc.get("low"), desc.get("high")))
        return out

    # ------------------------------------------------------------------ calling

    def _kwargs(self, inputs: list) -> dict[str, Any]:
        return dict(zip(self.inputs, inputs, strict=True))

    def _ordered(self, value: Any, who: str) -> Any:
        """Outputs in definition order: one output as itself, several as a tuple."""
        names = list(self.outputs)
        if isinstance(value, dict):
            missing = [n for n in names if n not in value]
            if missing:
                raise CandidateError(f"{who} returned a dict without output(s) {', '.join(missing)}")
            items = [value[n] for n in names]
        elif isinstance(value, tuple | list):
            items = list(value)
        else:
            items = [value]
        if len(items) != len(names):
            raise CandidateError(
                f"{who} returned {len(items)} output(s); the definition has {len(names)}: {', '.join(names)}"
            )
        return items[0] if len(items) == 1 else tuple(items)

    def build_reference(self, workload: Workload, device: str) -> Callable[[list], Any]:
        run = self.reference.run

        def call(inputs: list) -> Any:
            with torch.no_grad():
                return self._ordered(run(**self._kwargs(inputs)), "the reference run()")

        return call

    def destination_passing(self, module: types.ModuleType) -> bool:
        declared = getattr(module, "DESTINATION_PASSING", None)
        if declared is not None:
            return bool(declared)
        params = inspect.signature(module.run).parameters
        return all(n in params for n in self.outputs)

    def build_candidate(
        self, module: types.ModuleType, workload: Workload, device: str
    ) -> Callable[[list], Any]:
        run = getattr(module, "run", None)
        if run is None:
            raise CandidateError(
                f"the candidate defines no `run`; define run({', '.join(self.inputs)}) returning the outputs, "
                f"or run({', '.join([*self.inputs, *self.outputs])}) writing into the outputs"
            )
        if not self.destination_passing(module):

            def call(inputs: list) -> Any:
                with torch.no_grad():
                    return self._ordered(run(**self._kwargs(inputs)), "the candidate's run()")

            return call

        specs = [
            (n, self._shape(s, workload), s["dtype"])
            for n, s in self.outputs.items()
            if s["shape"] is not None
        ]
        if len(specs) != len(self.outputs):
            raise CandidateError(
                "destination-passing style cannot return scalar outputs; return them instead"
            )

        def call_dps(inputs: list) -> Any:
            outs = {n: poisoned(shape, dtype, device) for n, shape, dtype in specs}
            with torch.no_grad():
                run(**self._kwargs(inputs), **outs)
            values = tuple(outs.values())
            return values[0] if len(values) == 1 else values

        return call_dps

    def cost(self, workload: Workload) -> Cost | None:
        """Minimum bytes: every tensor input read once and every output written once (FLOPs unknown)."""
        total = 0
        for spec in [*self.inputs.values(), *self.outputs.values()]:
            if spec["shape"] is None:
                continue
            size = torch.empty((), dtype=torch_dtype(spec["dtype"])).element_size()
            total += math.prod(self._shape(spec, workload)) * size
        return Cost(flops=0.0, bytes=float(total), dtype=self.task.dtype)
