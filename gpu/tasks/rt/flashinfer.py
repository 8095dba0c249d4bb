"""Running a FlashInfer-Bench task: inputs from axes and descriptors, reference `run`, both candidate styles.

The reference's `run` is called positionally, inputs in the definition's order, as FlashInfer-Bench calls it
(its parameters may be named otherwise). Candidates define `run` taking the inputs by name.
Destination-passing style also takes every output by name and writes into it (the runtime allocates them
NaN-filled on every call); value-returning style returns the output(s). The style is read from run's
signature, or from a module-level `DESTINATION_PASSING = True/False` when given. The tolerances and integer
ranges are the task's (`extras["fib"]`: FlashInfer-Bench's package's where it read the task).

Outputs are judged by FlashInfer-Bench's default rule (`check`): same shape and dtype, no NaN/Inf,
and an element fails only when it is off by more than atol and, relative to the reference, by more
than rtol; all elements must pass, or the definition's matched ratio of them (MoE).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import random
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.checks.outputs import decoded, is_packed, pieces, unravel
from ksearch.gpu.inputs import poisoned, random_tensor, torch_dtype
from ksearch.gpu.task import Cost, Task, TaskError, Workload
from ksearch.gpu.tasks.flashinfer.loader import FIB_ATOL, FIB_INT_RANGES, FIB_RTOL, axis_value
from ksearch.gpu.tasks.rt.common import CandidateError, exec_module, seed_everything
from ksearch.worldmodel.models import WorkloadCorrectness

# FlashInfer-Bench's relative error: |got - ref| / (|ref| + REL_EPS)
REL_EPS = 1e-8


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
        # FlashInfer-Bench's settings as the task was read (its package's, or ksearch's record of them)
        fib = ex.get("fib") or {}
        self.atol = float(fib.get("atol", FIB_ATOL))
        self.rtol = float(fib.get("rtol", FIB_RTOL))
        self.int_ranges: dict[str, tuple[int, int]] = {
            k: (int(v[0]), int(v[1])) for k, v in (fib.get("int_ranges") or FIB_INT_RANGES).items()
        }

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
                if (
                    spec["shape"] is None
                ):  # a scalar the workload does not give: random, as FlashInfer-Bench does
                    out.append(
                        random_scalar(spec["dtype"], desc.get("low"), desc.get("high"), self.int_ranges)
                    )
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
                    low, high = self.int_ranges.get(spec["dtype"], (None, None))
                    out.append(
                        random_tensor(
                            shape, spec["dtype"], device, desc.get("low", low), desc.get("high", high)
                        )
                    )
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
                return self._ordered(run(*inputs), "the reference run()")

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

    def timed_call(
        self, module: types.ModuleType | None, workload: Workload, device: str | torch.device, inputs: list
    ) -> tuple[Callable[[], Any], Callable[[Any], Any], tuple[torch.Tensor, ...]]:
        """One trial's call as FlashInfer-Bench's runner times it, and how to read its output.

        `module` None: the reference. The call is `run` on the bound inputs, nothing around it (no no_grad,
        no output normalization: the runner's timed call is the entry point itself). In destination-passing
        style the outputs are allocated once for the trial and every call writes into the same ones, as the
        runner's `allocate_outputs` does (here NaN-filled, so a call that skips writing shows). The second
        callable turns a call's return value into the outputs in definition order, for the checks; the tuple
        holds the outputs a destination-passing call writes into (empty in value-returning style)."""
        kwargs = self._kwargs(inputs)
        if module is None:
            ref_run = self.reference.run
            return (lambda: ref_run(*inputs)), (lambda v: self._ordered(v, "the reference run()")), ()
        run = getattr(module, "run", None)
        if run is None:
            raise CandidateError("the candidate defines no `run`")
        if not self.destination_passing(module):
            return (lambda: run(**kwargs)), (lambda v: self._ordered(v, "the candidate's run()")), ()
        outs = {
            n: poisoned(self._shape(s, workload), s["dtype"], device)
            for n, s in self.outputs.items()
            if s["shape"] is not None
        }
        if len(outs) != len(self.outputs):
            raise CandidateError(
                "destination-passing style cannot return scalar outputs; return them instead"
            )
        values = tuple(outs.values())
        return (lambda: run(**kwargs, **outs)), (lambda _v: values[0] if len(values) == 1 else values), values

    # ------------------------------------------------------------------ judging

    def check(
        self, got: Any, expected: Any, workload: Workload, inputs: list | None = None
    ) -> WorkloadCorrectness:
        """FlashInfer-Bench's default evaluator, output by output (its rule, ksearch's wording)."""
        names = list(self.outputs)
        gots = list(got) if isinstance(got, tuple | list) else [got]
        exps = list(expected) if isinstance(expected, tuple | list) else [expected]
        if len(gots) != len(exps):
            return self._verdict(workload, "wrong_shape", f"{len(gots)} output(s), expected {len(exps)}")
        atol, rtol = self.atol, self.rtol
        ratio = float(self.task.extras.get("matched_ratio", 1.0))
        total = {"max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0, "numel": 0}
        for i, (g, e) in enumerate(zip(gots, exps, strict=True)):
            name = names[i] if i < len(names) else str(i)
            e = self._as_tensor(e, name, None)
            g = self._as_tensor(g, name, e.device)
            if tuple(g.shape) != tuple(e.shape):
                return self._verdict(
                    workload,
                    "wrong_shape",
                    f"output {name!r}: shape {tuple(g.shape)}, expected {tuple(e.shape)}",
                )
            if g.dtype != e.dtype:
                return self._verdict(
                    workload,
                    "wrong_dtype",
                    f"output {name!r}: dtype {g.dtype}, expected {e.dtype}".replace("torch.", ""),
                )
            if is_packed(
                e
            ):  # packed 4-bit floats: compared by value, unpacked (indices count unpacked values)
                g, e = decoded(g), decoded(e)
            st = _fib_stats(g, e, atol, rtol)
            if st["nonfinite"]:
                return self._verdict(
                    workload,
                    "nan_inf",
                    f"output {name!r}: {st['nonfinite']} of {st['numel']} elements are NaN/Inf "
                    "(FlashInfer-Bench fails any non-finite output)",
                    **_first(st, g, e),
                )
            total["max_abs_err"] = max(total["max_abs_err"], st["max_abs"])
            total["max_rel_err"] = max(total["max_rel_err"], st["max_rel"])
            total["mismatches"] += st["exceed"]
            total["numel"] += st["numel"]
            if st["numel"] and 1.0 - st["exceed"] / st["numel"] < ratio:
                need = "every element" if ratio >= 1.0 else f"{ratio:.0%} of the elements"
                return self._verdict(
                    workload,
                    "wrong_values",
                    f"output {name!r}: {st['exceed']} of {st['numel']} elements are off by more than atol={atol:g} "
                    f"and rtol={rtol:g} (max abs err {st['max_abs']:.4g}); FlashInfer-Bench needs {need} within",
                    max_abs_err=st["max_abs"],
                    max_rel_err=st["max_rel"],
                    mismatches=st["exceed"],
                    numel=st["numel"],
                    **_first(st, g, e),
                )
        return WorkloadCorrectness(workload=workload.name, passed=True, kind="ok", trials=1, **total)

    def _as_tensor(self, v: Any, name: str, device: torch.device | None) -> torch.Tensor:
        """A Python number (a scalar output) as a 0-d tensor of the output's dtype, as FlashInfer-Bench does."""
        if isinstance(v, torch.Tensor):
            return v
        if not isinstance(v, int | float | bool):
            raise CandidateError(f"output {name!r} is a {type(v).__name__}, not a tensor or a number")
        dtype = torch_dtype(self.outputs[name]["dtype"]) if name in self.outputs else None
        return torch.tensor(v, dtype=dtype, device=device)

    @staticmethod
    def _verdict(workload: Workload, kind: str, message: str, **fields: Any) -> WorkloadCorrectness:
        return WorkloadCorrectness(
            workload=workload.name, passed=False, kind=kind, trials=1, message=message, **fields
        )

    def cost(self, workload: Workload) -> Cost | None:
        """Minimum bytes: every tensor input read once and every output written once (FLOPs unknown)."""
        total = 0
        for spec in [*self.inputs.values(), *self.outputs.values()]:
            if spec["shape"] is None:
                continue
            size = torch.empty((), dtype=torch_dtype(spec["dtype"])).element_size()
            total += math.prod(self._shape(spec, workload)) * size
        return Cost(flops=0.0, bytes=float(total), dtype=self.task.dtype)


def random_scalar(
    dtype: str,
    low: int | None = None,
    high: int | None = None,
    ranges: dict[str, tuple[int, int]] | None = None,
) -> float | int | bool:
    """A random value for a scalar input no workload describes: normal for floats, FlashInfer-Bench's
    integer `ranges`. Drawn from Python's seeded `random`, so it needs no tensor (fake-tensor runs too)."""
    ranges = FIB_INT_RANGES if ranges is None else ranges
    if dtype == "bool":
        return random.random() < 0.5
    if dtype in ranges or dtype.startswith(("int", "uint")):
        lo, hi = ranges.get(dtype, (0, 128))
        return random.randrange(lo if low is None else low, hi if high is None else high)
    return random.gauss(0.0, 1.0)


def _fib_stats(got: torch.Tensor, exp: torch.Tensor, atol: float, rtol: float) -> dict[str, Any]:
    """Counts for FlashInfer-Bench's rule, a piece at a time (float32 temporaries of one piece only)."""
    st: dict[str, Any] = {"numel": exp.numel(), "exceed": 0, "nonfinite": 0, "max_abs": 0.0, "max_rel": 0.0,
                          "first_bad": None, "first_exceed": None}  # fmt: skip
    offset = 0
    for gp, ep in zip(pieces(got), pieces(exp), strict=True):
        g, e = gp.to(torch.float32), ep.to(torch.float32)
        finite = torch.isfinite(g)
        nf = int((~finite).sum())
        if nf and st["first_bad"] is None:
            st["first_bad"] = offset + int((~finite).nonzero()[0])
        st["nonfinite"] += nf
        diff = (g - e).abs()
        rel = diff / (e.abs() + REL_EPS)
        exceed = (diff > atol) & (rel > rtol)
        n = int(exceed.sum())
        if n and st["first_exceed"] is None:
            st["first_exceed"] = offset + int(exceed.nonzero()[0])
        st["exceed"] += n
        if diff.numel():
            st["max_abs"] = max(st["max_abs"], float(diff.max()))
            st["max_rel"] = max(st["max_rel"], float(rel.max()))
        offset += gp.numel()
    return st


def _first(st: dict[str, Any], got: torch.Tensor, exp: torch.Tensor) -> dict[str, Any]:
    """Where the first failing element is, and its two values."""
    flat = st["first_bad"] if st["first_bad"] is not None else st["first_exceed"]
    if flat is None:
        return {}
    idx = unravel(flat, tuple(exp.shape))
    return {
        "first_mismatch_index": idx,
        "expected_at_first": float(exp[tuple(idx)].float()),
        "got_at_first": float(got[tuple(idx)].float()),
    }
