"""The reference's own rounding error against the task's tolerance, measured in the facts subprocess.

A candidate is compared with the reference as written (float32, say), not with the exact answer. Where the
reference's own result is far from exact, a kernel that computes more accurately, or merely in another
order, is as far from the reference: a tolerance tighter than that passes only a kernel that reproduces the
reference's rounding (the order of its sums, say). This runs the reference twice on the smoke workload, for
real on the CPU: as written, and with its floating inputs, weights, default dtype and own conversions
(`x.float()`, `dtype=torch.float32`) in float64. The float64 result rounded to each output's dtype is what an
exact kernel would return; it is judged against the reference's own output by the task's rule
(|got - ref| <= atol + rtol * |ref|, the mismatch ratio), and the verdict is `fails` when that kernel would
fail, `near` when it would use more than NEAR (half) of the tolerance at the deciding element, else `ok`.

Measured on the CPU and at the smoke workload's sizes: the GPU's reference may round otherwise (torch's CPU
cumsum accumulates in float64, its CUDA kernels need not), and an error that grows with the sizes is smaller
there, so `ok` is no promise for the GPU workloads. Not measured (`skipped`, with a note): a task with its own
check (GPU MODE), a reference whose float64 run fails or still narrows float64 data, outputs with no floating
point, and smoke workloads too large to run twice more here. Imports torch: subprocesses only.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ksearch.gpu.task import Workload
from ksearch.gpu.tasks.facts import NEAR, RoundingProbe, WorkloadProbe
from ksearch.gpu.tasks.rt.common import as_result
from ksearch.gpu.tasks.rt.measure import Prober, first_line

MAX_ELEMENTS = 1 << 24  # a smoke workload touching more is not run twice more (inputs, weights, outputs)
MAX_FLOPS = 1 << 34
MAX_SECONDS = 20.0  # the reference as written took longer: its float64 run is not made
_LOWER = (torch.float32, torch.float16, torch.bfloat16)  # what the float64 run widens to float64
_NARROWING = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)


def _below_float64(t: torch.Tensor) -> bool:
    return (t.is_floating_point() and t.dtype != torch.float64) or t.dtype == torch.complex64


def _narrow(dtype: Any) -> bool:
    return isinstance(dtype, torch.dtype) and dtype in _LOWER


class _PrecisionDrops(TorchDispatchMode):
    """Notes ops that turn float64 data into a lower-precision float (what _Float64Everywhere does not widen,
    a cast to fp8 say): past one, the float64 run is not float64 throughout, and its result no exact answer."""

    def __init__(self) -> None:
        super().__init__()
        self.drops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not self.drops:
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            if any(t.dtype == torch.float64 for t in ins) and any(_below_float64(t) for t in outs):
                self.drops.append(func._overloadpacket.__name__)
        return out


class _Float64Everywhere(TorchFunctionMode):
    """The forward's own conversions and dtypes widened: a bf16 reference that computes in float32
    (`x.float()`, `dtype=torch.float32`, `.to(torch.float32)`) computes in float64 in this run."""

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in _NARROWING:
            func = torch.Tensor.double
        if _narrow(kwargs.get("dtype")):
            kwargs = {**kwargs, "dtype": torch.float64}
        if func is torch.Tensor.to:
            args = tuple(torch.float64 if _narrow(a) else a for a in args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _float64_run() -> Iterator[_PrecisionDrops]:
    """Float64 defaults (`torch.ones(n)`, `torch.tensor(0.5)`), the forward's own dtypes widened, and a
    watch for any op that still narrows float64 data (what it yields)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    drops = _PrecisionDrops()
    try:
        with _Float64Everywhere(), drops:
            yield drops
    finally:
        torch.set_default_dtype(before)


def _widened(value: Any) -> Any:
    def widen(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.detach().to(torch.float64)
        if isinstance(v, torch.Tensor) and v.is_complex():
            return v.detach().to(torch.complex128)
        return v

    return tree_map(widen, value)


def _reference(prober: Prober, wl: Workload, *, float64: bool) -> Callable[[list], Any]:
    """The reference as the prober builds it (the same weights every time: a fixed seed), widened or not."""
    model, fn = prober.reference(wl)
    if float64 and isinstance(model, torch.nn.Module):
        model = model.double()  # its floating parameters and buffers
        return lambda inputs: as_result(model(*inputs))
    return fn


def _judge(
    ref: torch.Tensor, exact: torch.Tensor, atol: float, rtol: float, mismatch_ratio: float
) -> dict[str, Any]:
    """The rule applied to an exact kernel's output (`exact`, rounded to the reference's dtype) against `ref`."""
    got = exact.to(ref.dtype)
    r, g = (torch.view_as_real(ref), torch.view_as_real(got)) if ref.is_complex() else (ref, got)
    r, g = r.double(), g.double()
    finite = torch.isfinite(r) & torch.isfinite(g)
    same = (r == g) | (torch.isnan(r) & torch.isnan(g))
    diff = torch.where(finite, (g - r).abs(), torch.zeros_like(r))
    allowed = atol + rtol * torch.where(finite, r.abs(), torch.zeros_like(r))
    ratio = torch.where(diff > 0, diff / allowed.clamp_min(1e-300), torch.zeros_like(r))
    ratio = torch.where(finite | same, ratio, torch.full_like(r, math.inf))  # one side non-finite
    if ref.is_complex():  # one element is one pair, as the checker counts it
        ratio, diff = ratio.amax(-1), diff.amax(-1)
    flat = ratio.reshape(-1)
    numel = flat.numel()
    allowed_out = math.floor(mismatch_ratio * numel)
    deciding = float(flat.topk(allowed_out + 1).values[-1]) if numel > allowed_out else 0.0
    return {
        "max_abs": float(diff.max()) if numel else 0.0,
        "over": int((flat > 1.0).sum()),
        "numel": numel,
        "ratio": min(deciding, 1e300),  # JSON has no infinity: a non-finite mismatch reads as 1e300
    }


def reference_rounding(prober: Prober, wl: Workload, probe: WorkloadProbe | None) -> RoundingProbe:
    """The reference's own result on `wl` against its float64 run, judged by the task's rule (see the module)."""
    task = prober.task
    out = RoundingProbe(workload=wl.name)
    if task.style == "gpumode":
        out.note = "not measured: the task's own check_implementation judges outputs, not a tolerance"
        return out
    if probe is not None and (probe.elements() > MAX_ELEMENTS or (probe.flops_counted or 0.0) > MAX_FLOPS):
        out.note = f"not measured: the smoke workload {wl.name!r} is too large to run twice more on the CPU"
        return out
    t0 = time.perf_counter()
    stage = "running the reference"
    try:
        inputs = prober.impl.make_inputs(wl, 0, "cpu")
        wide = _widened(list(inputs))  # before the call: a reference may write into its inputs
        with torch.no_grad():
            got = _reference(prober, wl, float64=False)(inputs)
        if time.perf_counter() - t0 > MAX_SECONDS:
            out.note = f"not measured: the reference took {time.perf_counter() - t0:.0f} s on {wl.name!r}"
            return out
        stage = "running the reference in float64"
        fn64 = _reference(prober, wl, float64=True)
        with torch.no_grad(), _float64_run() as drops:
            exact = fn64(wide)
    except Exception as exc:  # task code may raise anything; a float64 run may be impossible (dtype clashes)
        out.note = f"not measured: {stage} failed: {first_line(exc)}"
        return out
    out.seconds = time.perf_counter() - t0
    if drops.drops:
        out.note = (
            f"not measured: the float64 run is not float64 throughout ({drops.drops[0]} returns a lower "
            "precision from float64 data)"
        )
        return out
    refs, exacts = tree_flatten(got)[0], tree_flatten(exact)[0]
    if len(refs) != len(exacts):
        out.note = "not measured: the float64 run returned another number of outputs"
        return out
    names = ["out"] if len(refs) == 1 else [f"out{i}" for i in range(len(refs))]
    judged: list[tuple[str, torch.Tensor, dict[str, Any]]] = []
    for name, r, e in zip(names, refs, exacts, strict=True):
        if not isinstance(r, torch.Tensor) or not (r.is_floating_point() or r.is_complex()):
            continue  # integer and bool outputs must match exactly: rounding is not theirs to judge
        if not isinstance(e, torch.Tensor) or e.shape != r.shape:
            out.note = f"not measured: {name} of the float64 run is not a tensor of the reference's shape"
            return out
        if r.dtype != torch.float64 and e.dtype not in (torch.float64, torch.complex128):
            out.note = (
                f"not measured: the float64 run returned {name} in {str(e.dtype).removeprefix('torch.')}"
            )
            return out
        dtype = str(r.dtype).removeprefix("torch.")
        atol, rtol = task.tolerance.for_dtype(dtype)
        judged.append((name, r, _judge(r, e, atol, rtol, task.tolerance.mismatch_ratio)))
    if not judged:
        out.note = "not measured: no floating-point output (integer and bool outputs must match exactly)"
        return out
    name, r, worst = max(judged, key=lambda j: j[2]["ratio"])
    dtype = str(r.dtype).removeprefix("torch.")
    out.output, out.dtype = name, dtype
    out.atol, out.rtol = task.tolerance.for_dtype(dtype)
    out.mismatch_ratio = task.tolerance.mismatch_ratio
    out.max_abs, out.over, out.numel, out.ratio = (
        worst["max_abs"],
        worst["over"],
        worst["numel"],
        worst["ratio"],
    )
    out.verdict = "fails" if out.ratio > 1.0 else "near" if out.ratio > NEAR else "ok"
    return out


__all__ = ["MAX_ELEMENTS", "MAX_FLOPS", "MAX_SECONDS", "reference_rounding"]
