"""Running a GPU MODE task: generate_input, ref_kernel, custom_kernel and the task's own check.

GPU MODE data often carries output buffers, so both the reference and the candidate run on a
fresh copy of the data on every call: neither can see the other's answer, and the original
stays pristine for `check_implementation(data, output)`. The copy is part of both timings.

Inputs are built as GPU MODE's evaluator builds them: generate_input(**params) with the workload's params
(already in the evaluator's types, see gpu/tasks/gpumode.py), outside any device context, the `seed`
parameter combined with the trial's seed the way the evaluator combines it with its secret seed; torch,
numpy and `random` are seeded with that same number (the evaluator never seeds its worker's global
generators, so weights drawn from them depend on torch's default seeds and what ran before; here they follow
the seed).

Candidates import the folder's helper modules (`from task import input_t`), so constructing this
runtime makes them importable in the process: the folder goes on sys.path and modules that
task.yml maps from elsewhere (utils.py from ../utils.py) are loaded under their names.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.checks.outputs import poisoned_allocations
from ksearch.gpu.task import Cost, Task, TaskError, Workload
from ksearch.gpu.tasks.draws.gpu_fills import applies, gpu_fills
from ksearch.gpu.tasks.draws.input_cache import InputCache
from ksearch.gpu.tasks.rt.common import (
    CandidateError,
    as_result,
    clone_data,
    load_file_module,
    seed_everything,
)
from ksearch.worldmodel.models import WorkloadCorrectness

_SKIP_MODULES = {"reference", "eval", "submission"}


class GpuModeRuntime:
    def __init__(self, task: Task) -> None:
        self.task = task
        self.folder = Path(task.source_path)
        modules: dict[str, str] = task.extras["modules"]
        if str(self.folder) not in sys.path:
            sys.path.insert(0, str(self.folder))
        for name in modules:
            if name not in _SKIP_MODULES:
                sys.modules.pop(name, None)  # another task's helper of the same name
        for name, path in modules.items():
            p = Path(path)
            if name not in _SKIP_MODULES and (p.parent != self.folder or p.stem != name):
                load_file_module(p, name)
        self.reference = load_file_module(Path(modules["reference"]))
        self._last: dict[str, list] = {}
        # TriMul-like generators draw on the CPU: each (workload, seed) once, kept across processes by the draws
        # store under the digest of the folder's code (a changed generator never finds an older draw)
        self.inputs = InputCache(scope=_code_digest(modules))

    def make_inputs(self, workload: Workload, seed: int, device: str, *, once: bool = False) -> list:
        """Fresh inputs for a trial: the workload's own seed combined with `seed` (`once`: not kept, see
        TaskRuntime.make_inputs)."""
        params = dict(workload.params)
        own = params.get("seed")
        mixed = combine_seeds(own, seed) if isinstance(own, int) and not isinstance(own, bool) else seed
        return self._generate(workload, params, mixed, device, keep=not once)

    def task_inputs(self, workload: Workload, device: str) -> list:
        """The inputs GPU MODE's evaluator benchmarks outside ranked runs: the workload's seed as it stands."""
        params = dict(workload.params)
        own = params.get("seed")
        return self._generate(workload, params, own if isinstance(own, int) else 0, device)

    def _generate(
        self, workload: Workload, params: dict[str, Any], seed: int, device: str, keep: bool = True
    ) -> list:
        gen = self.reference.generate_input
        why = self.task.extras.get("needs_gpu")
        if why and torch.device(device).type != "cuda":
            raise TaskError(f"task {self.task.name!r} needs a GPU: {why}; this machine runs it on the CPU")
        if "seed" in inspect.signature(gen).parameters or "seed" in params:
            params["seed"] = seed

        def draw() -> Any:
            # An output buffer the generator leaves uninitialised (torch.empty) holds NaN, not whatever an
            # earlier evaluation left in that memory: with the same seed, possibly the very answer.
            with poisoned_allocations("nan"):
                seed_everything(seed)
                with gpu_fills(device, seed):
                    return gen(**params)

        # draws whose CPU-generator fills were made on the GPU are other values than the CPU's: apart in the keys
        key = (
            workload.name,
            repr(sorted(params.items())),
            seed,
            *(("gpu_fills",) if applies(device) else ()),
        )
        inputs = [self.inputs.get(key, draw, device, keep=keep)]
        self._last[workload.name] = inputs
        return inputs

    @staticmethod
    def _runner(fn: Callable[[Any], Any], copy: bool = True) -> Callable[[list], Any]:
        def call(inputs: list) -> Any:
            with torch.no_grad():
                return as_result(fn(clone_data(inputs[0]) if copy else inputs[0]))

        return call

    def build_reference(self, workload: Workload, device: str) -> Callable[[list], Any]:
        return self._runner(self.reference.ref_kernel)

    def build_candidate(
        self, module: types.ModuleType, workload: Workload, device: str, copy: bool = True
    ) -> Callable[[list], Any]:
        """`copy=False`: called on the data itself, as GPU MODE's evaluator times it (the caller copies)."""
        fn = getattr(module, "custom_kernel", None)
        if fn is None:
            raise CandidateError("the candidate defines no `custom_kernel(data)`; it receives the data that "
                                 "generate_input returns and returns the output")  # fmt: skip
        return self._runner(fn, copy)

    def build_reference_uncopied(self, workload: Workload, device: str) -> Callable[[list], Any]:
        return self._runner(self.reference.ref_kernel, copy=False)

    def check(
        self, got: Any, expected: Any, workload: Workload, inputs: list | None = None
    ) -> WorkloadCorrectness:
        data_list = inputs if inputs is not None else self._last.get(workload.name)
        if data_list is None:
            raise TaskError(f"{self.task.name}: check needs the inputs of workload {workload.name!r}")
        errs = _errors(got, expected)
        try:
            result = self.reference.check_implementation(clone_data(data_list[0]), got)
        except Exception as exc:
            return WorkloadCorrectness(workload=workload.name, passed=False, kind="exception", trials=1,
                                       message=f"check_implementation raised {type(exc).__name__}: {exc}"[:2000],
                                       **errs)  # fmt: skip
        passed, message = _verdict(result)
        return WorkloadCorrectness(
            workload=workload.name,
            passed=passed,
            kind="ok" if passed else "wrong_values",
            trials=1,
            message=message[:2000],
            **errs,
        )

    def cost(self, workload: Workload) -> Cost | None:
        return None


def _code_digest(modules: dict[str, str]) -> str:
    h = hashlib.sha256()
    for name in sorted(modules):
        h.update(f"{name}\0".encode())
        try:
            h.update(Path(modules[name]).read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


def combine_seeds(task_seed: int, secret: int) -> int:
    """One seed from the task's public seed and a secret one, as GPU MODE's evaluator forms its ranked seeds
    (the Cantor pairing: a large secret gives a large result whatever the small public seed), kept below
    2**63 so that torch and numpy accept it."""
    a, b = abs(task_seed), abs(secret)
    return (a + (a + b) * (a + b + 1) // 2) % 2**63


def _verdict(result: Any) -> tuple[bool, str]:
    """GPU MODE checks return (ok, message), a bare bool, or an error string/list (empty = pass)."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        msg = result[1]
        return result[0], "\n".join(map(str, msg)) if isinstance(msg, list | tuple) else str(msg or "")
    if isinstance(result, bool):
        return result, ""
    if isinstance(result, list | tuple):
        return not result, "\n".join(map(str, result))
    return not result, str(result or "")


def _errors(got: Any, expected: Any) -> dict[str, Any]:
    if (
        not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor))
        or got.shape != expected.shape
    ):
        return {}
    if not expected.is_floating_point() or expected.numel() == 0:
        return {"numel": expected.numel()}
    diff = (got.double() - expected.double()).abs()
    rel = diff / expected.double().abs().clamp_min(1e-12)
    return {"max_abs_err": float(diff.nan_to_num(float("inf")).max()),
            "max_rel_err": float(rel.nan_to_num(float("inf")).max()), "numel": expected.numel()}  # fmt: skip
