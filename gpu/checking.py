"""Compare a candidate's outputs with the reference's (worker side; imports torch).

Order of checks per output: structure/shape, dtype, NaN/Inf (poison left in place = unwritten),
then the task's tolerance. Inputs are compared after the call to catch mutation.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from gpu.task import Tolerance

# Written into freshly allocated, not-yet-written memory during correctness runs.
NAN_POISON = float("nan")
SENTINEL_FLOAT = 12345.0  # second poison: tells "never written" from "computed NaN"
SENTINEL_INT = -123456789


def flatten(out: Any) -> list[Any]:
    """Outputs as a flat list: a tensor, or the leaves of (nested) tuples/lists/dicts."""
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in flatten(o)]
    if isinstance(out, dict):
        return [x for k in sorted(out, key=str) for x in flatten(out[k])]
    return [out]


def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def sentinel_for(dt: torch.dtype) -> float | int:
    if dt.is_floating_point:  # within range of every float type (fp8 e4m3 tops out at 448)
        return torch.tensor(min(SENTINEL_FLOAT, torch.finfo(dt).max / 2), dtype=dt).item()
    if dt == torch.bool:
        return True
    info = torch.iinfo(dt)
    return max(info.min, min(info.max, SENTINEL_INT)) if info.min < 0 else info.max


@contextlib.contextmanager
def poisoned_allocations(mode: str) -> Iterator[None]:
    """Make torch's uninitialised allocators return poisoned memory ("nan" or "sentinel").

    Best effort: covers torch.empty / empty_like / empty_strided / Tensor.new_empty called from
    Python. Memory allocated in C++ (an extension's at::empty) is covered on the GPU by
    `prefill_allocator`, which leaves poisoned blocks in the caching allocator's free pool.
    """
    originals = {
        "empty": torch.empty,
        "empty_like": torch.empty_like,
        "empty_strided": torch.empty_strided,
    }
    orig_new_empty = torch.Tensor.new_empty

    def poison(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.numel() > 0 and not t.is_complex():
            with torch.no_grad():
                if t.is_floating_point():
                    t.fill_(NAN_POISON if mode == "nan" else sentinel_for(t.dtype))
                else:
                    t.fill_(sentinel_for(t.dtype))
        return t

    def wrap(fn: Any) -> Any:
        def inner(*a: Any, **k: Any) -> Any:
            return poison(fn(*a, **k))

        return inner

    try:
        for name, fn in originals.items():
            setattr(torch, name, wrap(fn))
        torch.Tensor.new_empty = wrap(orig_new_empty)  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)
        torch.Tensor.new_empty = orig_new_empty  # type: ignore[method-assign]


def prefill_allocator(
    shapes: list[tuple[tuple[int, ...], torch.dtype]], device: torch.device, mode: str
) -> None:
    """Allocate blocks shaped like the expected outputs, fill them with the poison and free them,
    so the caching allocator hands the same poisoned blocks to outputs allocated in C++ (an
    extension's at::empty). GPU only; best effort (the allocator may choose other blocks)."""
    if device.type != "cuda":
        return
    blocks = []
    for shape, dt in shapes:
        if 0 < math.prod(shape) <= 1 << 31 and not dt.is_complex:
            b = torch.empty(shape, dtype=dt, device=device)
            b.fill_(NAN_POISON if (mode == "nan" and dt.is_floating_point) else sentinel_for(dt))
            blocks.append(b)
    del blocks


@dataclass
class OutputCheck:
    passed: bool
    kind: str  # a CorrectnessKind
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int | None = None
    numel: int | None = None
    first_mismatch_index: list[int] | None = None
    expected_at_first: float | None = None
    got_at_first: float | None = None
    output_index: int | None = None
    nan_positions: Any = field(default=None, repr=False)  # bool mask of unexpected NaNs (for the re-run)

    def stats(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in (
                "max_abs_err",
                "max_rel_err",
                "mismatches",
                "numel",
                "first_mismatch_index",
                "expected_at_first",
                "got_at_first",
            )
        }


def unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for d in reversed(shape):
        idx.append(flat_index % d if d else 0)
        flat_index //= d if d else 1
    return list(reversed(idx))


def _float_or_none(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v


def compare_tensor(got: torch.Tensor, exp: torch.Tensor, tol: Tolerance, out_idx: int = 0) -> OutputCheck:
    where = f"output {out_idx}: " if out_idx else ""
    if tuple(got.shape) != tuple(exp.shape):
        return OutputCheck(
            False,
            "wrong_shape",
            f"{where}shape {tuple(got.shape)}, expected {tuple(exp.shape)}",
            output_index=out_idx,
        )
    if got.dtype != exp.dtype:
        return OutputCheck(
            False,
            "wrong_dtype",
            f"{where}dtype {dtype_name(got.dtype)}, expected {dtype_name(exp.dtype)}",
            output_index=out_idx,
        )
    if got.device.type != exp.device.type:
        return OutputCheck(
            False,
            "wrong_dtype",
            f"{where}on {got.device.type}, expected on {exp.device.type}",
            output_index=out_idx,
        )
    numel = exp.numel()
    if numel == 0:
        return OutputCheck(True, "ok", numel=0)
    atol, rtol = tol.for_dtype(dtype_name(exp.dtype))
    if exp.is_complex():
        g, e = torch.view_as_real(got).double(), torch.view_as_real(exp).double()
    elif exp.is_floating_point():
        g, e = got.double(), exp.double()
    else:
        g, e = got.to(torch.int64), exp.to(torch.int64)
        diff = (g - e).abs()
        mism = diff > 0
        return _finish(got, exp, diff.double(), mism, e.double().abs(), atol, tol, where, out_idx, None)

    g_fin, e_fin = torch.isfinite(g), torch.isfinite(e)
    # non-finite where the reference is finite: poison left in place, or a computed NaN/Inf
    bad_nonfinite = ~g_fin & e_fin
    # where the reference itself is non-finite, the candidate must match it exactly (NaN == NaN)
    ref_nonfinite_mismatch = ~e_fin & ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
    if exp.is_complex():
        bad_nonfinite = bad_nonfinite.any(-1)
        ref_nonfinite_mismatch = ref_nonfinite_mismatch.any(-1)
    if bool(bad_nonfinite.any()):
        n_bad = int(bad_nonfinite.sum())
        first = int(bad_nonfinite.flatten().nonzero()[0])
        shape = tuple(exp.shape)
        return OutputCheck(
            False,
            "nan_inf",
            f"{where}{n_bad} of {numel} elements are NaN/Inf where the reference is finite",
            mismatches=n_bad,
            numel=numel,
            first_mismatch_index=unravel(first, shape),
            expected_at_first=_float_or_none(
                exp.flatten()[first].real if exp.is_complex() else exp.flatten()[first]
            ),
            got_at_first=_float_or_none(
                got.flatten()[first].real if got.is_complex() else got.flatten()[first]
            ),
            output_index=out_idx,
            nan_positions=bad_nonfinite,
        )
    g0 = torch.where(torch.isfinite(g), g, torch.zeros_like(g))
    e0 = torch.where(torch.isfinite(e), e, torch.zeros_like(e))
    diff = (g0 - e0).abs()
    allowed = atol + rtol * e0.abs()
    mism = diff > allowed
    if exp.is_complex():
        mism = mism.any(-1)
        diff = diff.amax(-1)
        e0 = e0.abs().amax(-1)
    mism = mism | ref_nonfinite_mismatch
    return _finish(got, exp, diff, mism, e0.abs(), atol, tol, where, out_idx, None)


def _finish(
    got: torch.Tensor,
    exp: torch.Tensor,
    diff: torch.Tensor,
    mism: torch.Tensor,
    ref_abs: torch.Tensor,
    atol: float,
    tol: Tolerance,
    where: str,
    out_idx: int,
    _: Any,
) -> OutputCheck:
    numel = exp.numel()
    n_mis = int(mism.sum())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel_mask = ref_abs > max(atol, 1e-12)
    max_rel = float((diff[rel_mask] / ref_abs[rel_mask]).max()) if bool(rel_mask.any()) else None
    common = {
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "mismatches": n_mis,
        "numel": numel,
        "output_index": out_idx,
    }
    if n_mis == 0 or n_mis <= tol.mismatch_ratio * numel:
        return OutputCheck(True, "ok", **common)
    first = int(mism.flatten().nonzero()[0])
    gf, ef = got.flatten()[first], exp.flatten()[first]
    atol_d, rtol_d = tol.for_dtype(dtype_name(exp.dtype))
    return OutputCheck(
        False,
        "wrong_values",
        f"{where}{n_mis} of {numel} elements differ beyond atol={atol_d:g}, rtol={rtol_d:g} "
        f"(max abs err {max_abs:.4g})",
        first_mismatch_index=unravel(first, tuple(exp.shape)),
        expected_at_first=_float_or_none(ef.real if ef.is_complex() else ef),
        got_at_first=_float_or_none(gf.real if gf.is_complex() else gf),
        **common,
    )


def subclass_output(got: Any, exp: Any) -> OutputCheck | None:
    """A failure if an output is a torch.Tensor subclass the reference does not return.

    A subclass runs its own code whenever the checker touches it (`__torch_function__`), so it can
    do its work lazily, outside the timed call, or fake comparisons. Only `type()` is used here:
    anything else would run that code.
    """
    for i, (g, e) in enumerate(zip(flatten(got), flatten(exp), strict=False)):
        if isinstance(g, torch.Tensor) and type(g) is not torch.Tensor and type(g) is not type(e):
            return OutputCheck(
                False,
                "wrong_dtype",
                f"output {i} is a {type(g).__name__}, a torch.Tensor subclass; return a plain "
                "torch.Tensor (a subclass can defer its work past the timer or fake the checks)",
                output_index=i,
            )
    return None


def compare_outputs(got: Any, exp: Any, tol: Tolerance) -> OutputCheck:
    """Check every output; the first failing one decides the kind. Errors are maxima over outputs."""
    odd = subclass_output(got, exp)
    if odd is not None:
        return odd
    gl, el = flatten(got), flatten(exp)
    if len(gl) != len(el):
        return OutputCheck(False, "wrong_shape", f"returned {len(gl)} output(s), expected {len(el)}")
    worst = OutputCheck(True, "ok", max_abs_err=0.0, mismatches=0, numel=0)
    rels = []
    for i, (g, e) in enumerate(zip(gl, el, strict=True)):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return OutputCheck(
                    False,
                    "wrong_shape",
                    f"output {i} is a {type(g).__name__}, expected a tensor of shape {tuple(e.shape)}",
                    output_index=i,
                )
            r = compare_tensor(g, e, tol, i)
            if not r.passed:
                return r
            worst.max_abs_err = max(worst.max_abs_err or 0.0, r.max_abs_err or 0.0)
            worst.mismatches = (worst.mismatches or 0) + (r.mismatches or 0)
            worst.numel = (worst.numel or 0) + (r.numel or 0)
            if r.max_rel_err is not None:
                rels.append(r.max_rel_err)
        else:  # a scalar output: compare as a number
            ge, ee = _float_or_none(g), _float_or_none(e)
            if ge is None or ee is None:
                if g != e:
                    return OutputCheck(
                        False, "wrong_values", f"output {i}: got {g!r}, expected {e!r}", output_index=i
                    )
                continue
            atol, rtol = tol.for_dtype("float64")
            if not (abs(ge - ee) <= atol + rtol * abs(ee) or (math.isnan(ge) and math.isnan(ee))):
                return OutputCheck(
                    False,
                    "wrong_values",
                    f"output {i}: got {ge!r}, expected {ee!r}",
                    max_abs_err=abs(ge - ee),
                    output_index=i,
                    expected_at_first=ee,
                    got_at_first=ge,
                )
    worst.max_rel_err = max(rels) if rels else None
    return worst


def inputs_equal(a: list[Any], b: list[Any]) -> tuple[bool, str]:
    """Whether two post-call input lists hold the same values (NaN-aware, bitwise for ints)."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False, f"input {i} changed shape or dtype"
            if x.is_floating_point() or x.is_complex():
                same = (x == y) | (torch.isnan(x) & torch.isnan(y))
            else:
                same = x == y
            if not bool(same.all()):
                n = int((~same).sum())
                return False, f"input {i}: {n} of {x.numel()} elements were overwritten by the candidate"
    return True, ""


def degenerate_answers(exp: Any, inputs: list[Any], tol: Tolerance) -> list[str]:
    """Trivial answers the tolerance would accept (zeros, a constant, an input): the task is weak."""
    out = []
    for i, e in enumerate(flatten(exp)):
        if not isinstance(e, torch.Tensor) or not e.is_floating_point() or e.numel() < 2:
            continue
        fin = e[torch.isfinite(e)]
        if fin.numel() == 0:
            continue
        trials = {
            "all zeros": torch.zeros_like(e),
            "a constant (the mean)": torch.full_like(e, float(fin.float().mean())),
        }
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.shape == e.shape and x.dtype == e.dtype:
                trials[f"input {j} unchanged"] = x
        for what, guess in trials.items():
            if compare_tensor(guess, e, tol).passed:
                out.append(
                    f"degenerate_reference: output {i} would pass as {what}; this workload cannot tell "
                    "a wrong kernel from a right one"
                )
    return out
