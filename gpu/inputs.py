"""Inputs for tasks: deterministic per seed, signed and varied by default, every dtype a task may use.

All draws use torch's global generators, so `torch.manual_seed(seed)` before a task's `get_inputs`
fixes every value; tensors are made on the current default device (the runtime makes inputs inside
`with torch.device(device)`), so large inputs never travel through host memory.

Why not `torch.rand`: uniform [0, 1) inputs make ReLU the identity, keep softmax rows flat and let
many wrong kernels pass. `signed` draws a normal with a random scale and mean shift, plus rare large
outliers, so sign handling, numerical stability and masking all get exercised.

`degenerate_outputs` flags a task whose correctness rule would accept all zeros, a constant or the
input itself as the answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ksearch.gpu.checks.outputs import constant_like, finite_mean, pieces
from ksearch.gpu.dtypes import FP4_DTYPES, FP8_DTYPES, accepted_dtypes, canonical_dtype
from ksearch.gpu.task import TaskError, Tolerance, Workload

if TYPE_CHECKING:
    from ksearch.gpu.task import Task

DTypeLike = str | torch.dtype
ShapeArg = int | Sequence[int]

OUTLIER_GAIN = 8.0  # outliers are this many times the typical magnitude


def torch_dtype(dtype: DTypeLike) -> torch.dtype:
    """torch dtype for a name ('bfloat16', 'bf16', 'torch.float32', ...) or a torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = canonical_dtype(dtype)
    if name is None:
        raise TaskError(f"unknown dtype {dtype!r}; accepted: {accepted_dtypes()}")
    if not hasattr(torch, name):
        raise TaskError(
            f"dtype {dtype!r} is torch.{name}, which this torch ({torch.__version__}) does not have; a newer "
            "torch has it"
        )
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _shape(shape: tuple[ShapeArg, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    out = tuple(int(s) for s in shape)  # type: ignore[arg-type]
    if any(s < 0 for s in out):
        raise TaskError(f"negative dimension in shape {out}")
    return out


def _cpu_uniform(low: float, high: float) -> float:
    # Scalar draws come from the CPU generator: no device sync, still fixed by torch.manual_seed.
    return low + (high - low) * float(torch.rand((), device="cpu"))


def signed(
    *shape: ShapeArg,
    dtype: DTypeLike = "float32",
    scale: float | None = None,
    shift: float | None = None,
    outliers: float = 1e-3,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Signed, varied values: normal * scale + shift, with a fraction `outliers` of them x8.

    scale defaults to a random 2**U(-1, 1) (0.5 to 2), shift to a random U(-0.25, 0.25) * scale.
    """
    dims = _shape(shape)
    dt = torch_dtype(dtype)
    if dtype_name(dt) in FP4_DTYPES:
        # torch converts nothing to packed 4-bit floats: random bytes, each two valid ones (e2m1 has no NaN/Inf)
        return torch.randint(0, 256, dims, dtype=torch.uint8, device=device).view(dt)
    s = scale if scale is not None else 2.0 ** _cpu_uniform(-1.0, 1.0)
    m = shift if shift is not None else _cpu_uniform(-0.25, 0.25) * s
    x = torch.randn(dims, dtype=torch.float32, device=device) * s + m
    if outliers > 0:
        x = torch.where(torch.rand(dims, device=device) < outliers, x * OUTLIER_GAIN, x)
    if dtype_name(dt) in FP8_DTYPES:
        x = x.clamp(-torch.finfo(dt).max, torch.finfo(dt).max)
    return x.to(dt)


def integers(
    *shape: ShapeArg,
    high: int,
    low: int = 0,
    dtype: DTypeLike = "int64",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Integers uniform in [low, high): indices, labels, token ids."""
    if high <= low:
        raise TaskError(f"integers: high ({high}) must be greater than low ({low})")
    return torch.randint(low, high, _shape(shape), dtype=torch_dtype(dtype), device=device)


def mask(*shape: ShapeArg, p: float = 0.5, device: torch.device | str | None = None) -> torch.Tensor:
    """Booleans, True with probability p."""
    return torch.rand(_shape(shape), device=device) < p


def scalar(low: float = -1.0, high: float = 1.0) -> float:
    """A Python float uniform in [low, high)."""
    return _cpu_uniform(low, high)


DEFAULT_INT_HIGH = 128  # random integer inputs without stated bounds draw from [0, 128)


def random_tensor(
    shape: ShapeArg,
    dtype: DTypeLike,
    device: torch.device | str | None = None,
    low: int | None = None,
    high: int | None = None,
) -> torch.Tensor:
    """A random tensor of any supported dtype: signed floats, bounded integers, booleans."""
    dt = torch_dtype(dtype)
    if dt == torch.bool:
        return mask(shape, device=device)
    if dt.is_floating_point:
        return signed(shape, dtype=dt, device=device)
    lo = 0 if low is None else int(low)
    hi = DEFAULT_INT_HIGH if high is None else int(high)
    info = torch.iinfo(dt)
    return integers(shape, low=max(lo, info.min), high=min(hi, info.max), dtype=dt, device=device)


def poisoned(shape: ShapeArg, dtype: DTypeLike, device: torch.device | str | None = None) -> torch.Tensor:
    """An output buffer pre-filled so that unwritten elements fail: NaN for floats, the minimum for ints."""
    dt = torch_dtype(dtype)
    dims = _shape((shape,))
    if dtype_name(dt) in FP4_DTYPES:  # no NaN in e2m1 and no fill on packed floats: -6.0 in every nibble
        return torch.full(dims, 0xFF, dtype=torch.uint8, device=device).view(dt)
    if dt.is_floating_point:
        return torch.full(dims, float("nan"), dtype=dt, device=device)
    if dt == torch.bool:
        return torch.zeros(dims, dtype=dt, device=device)
    return torch.full(dims, torch.iinfo(dt).min, dtype=dt, device=device)


# --------------------------------------------------------------------------- degenerate rules


def as_outputs(value: Any) -> tuple[Any, ...]:
    """A reference's or candidate's result as a tuple of outputs."""
    if isinstance(value, tuple | list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(value.values())
    return (value,)


def accepted_by(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """Whether `got` passes the tolerance rule against `expected` (shape, then elementwise, piece by piece
    so that the comparison needs no float64 copy of either)."""
    if got.shape != expected.shape:
        return False
    exp = expected.detach()
    g = got.detach().to(exp.device)
    if exp.numel() == 0:
        return True
    bad = 0
    if exp.is_floating_point():
        atol, rtol = tol.for_dtype(dtype_name(expected.dtype))
        for gp, ep in zip(pieces(g), pieces(exp), strict=True):
            e64, g64 = ep.double(), gp.double()
            off = (g64 - e64).abs() > atol + rtol * e64.abs()
            both_nan = e64.isnan() & g64.isnan()
            bad += int(((off | g64.isnan() | e64.isnan()) & ~both_nan).sum())
    else:
        for gp, ep in zip(pieces(g), pieces(exp), strict=True):
            bad += int((gp.to(ep.dtype) != ep).sum())
    return bad <= math.floor(tol.mismatch_ratio * exp.numel())


@dataclass(frozen=True)
class Fake:
    """An answer that skips the work, as a task's rule judges it on one output."""

    output: int  # index of the output
    answer: str  # "zeros" | "constant" | "input"
    input_index: int | None = None  # for "input": which one
    warning: str = ""

    @property
    def label(self) -> str:
        return {
            "zeros": "all zeros",
            "constant": "a constant (the output's mean)",
            "input": f"input {self.input_index} itself",
        }[self.answer]


def fake_answer(fake: Fake, expected: torch.Tensor, inputs: list[Any]) -> torch.Tensor | None:
    """The tensor `fake` stands for, for output `expected` and these inputs (None if it does not apply).

    Zeros and the constant are single elements expanded to the output's shape: they cost no memory."""
    if fake.answer == "zeros":
        return constant_like(expected, 0.0)
    if fake.answer == "constant":
        mean = finite_mean(expected) if expected.is_floating_point() else None
        return None if mean is None else constant_like(expected, mean)
    tensors = _tensors(inputs)
    if fake.input_index is None or fake.input_index >= len(tensors):
        return None
    x = tensors[fake.input_index]
    return x.to(expected.dtype) if x.shape == expected.shape else None


def _candidate_fakes(expected: torch.Tensor, inputs: list[Any]) -> list[Fake]:
    fakes = [Fake(0, "zeros")]
    if expected.is_floating_point() and expected.numel():
        fakes.append(Fake(0, "constant"))
    for i, x in enumerate(_tensors(inputs)):
        if x.shape == expected.shape:
            fakes.append(Fake(0, "input", i))
            break
    return fakes


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def degenerate_findings(rt: Any, wl: Workload, inputs: list[Any], expected: tuple[Any, ...]) -> list[Fake]:
    """Each fake answer (zeros, a constant, an input) that the task's rule accepts for the reference's
    `expected` outputs on `inputs` (a `TaskRuntime`'s workload `wl`); empty when the rule rejects all."""
    tol = rt.tolerance()
    found: list[Fake] = []
    for idx, exp in enumerate(expected):
        # a single element (a 0-d sum) is its own mean: "a constant" would be the answer itself
        if not isinstance(exp, torch.Tensor) or exp.numel() < 2:
            continue
        for kind in _candidate_fakes(exp, inputs):
            fake = fake_answer(kind, exp, inputs)
            if fake is None:
                continue
            if rt.has_own_check:  # the task's own check gets real tensors, as it would from a candidate
                parts = list(expected)
                parts[idx] = fake.contiguous()
                got = tuple(parts) if len(parts) > 1 else parts[0]
                custom = rt.check(got, expected if len(expected) > 1 else expected[0], wl, inputs=inputs)
                passes = custom is not None and custom.passed
            else:
                passes = accepted_by(fake, exp, tol)
            if passes:
                atol, rtol = tol.for_dtype(dtype_name(exp.dtype))
                rule = "the task's own check" if rt.has_own_check else f"atol={atol:g}, rtol={rtol:g}"
                f = Fake(idx, kind.answer, kind.input_index)
                warning = (
                    f"output {idx} ({dtype_name(exp.dtype)}, shape {tuple(exp.shape)}): {f.label} passes "
                    f"the correctness rule ({rule}) on workload {wl.name!r}; tighten the tolerance or "
                    "make inputs whose output is not near that value"
                )
                found.append(Fake(idx, kind.answer, kind.input_index, warning))
    return found


def degenerate_outputs(task: Task, seed: int = 0, device: str = "cpu") -> list[str]:
    """Warnings for each fake answer (zeros, a constant, an input) that the task's rule would accept.

    Runs the reference once on the smoke workload; an empty list means the rule rejects all fakes.
    """
    from ksearch.gpu.tasks.rt.runtime import TaskRuntime  # the runtime imports this module

    rt = TaskRuntime(task)
    wl = task.smoke()
    inputs = rt.make_inputs(wl, seed, device)
    with torch.no_grad():
        expected = as_outputs(rt.build_reference(wl, device)(inputs))
    return [f.warning for f in degenerate_findings(rt, wl, inputs, expected)]
