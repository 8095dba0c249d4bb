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
from torch.overrides import TorchFunctionMode

from ksearch.gpu.dtypes import FP4_DTYPES
from ksearch.gpu.task import Tolerance

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


# e2m1 by its four bits (sign, two exponent bits, one mantissa bit): every pattern is a finite value
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def is_packed(t: torch.Tensor) -> bool:
    """A tensor of packed 4-bit floats: torch copies, fills and compares none of them, only their bytes."""
    return dtype_name(t.dtype) in FP4_DTYPES


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """`t` itself, or for packed 4-bit floats its bytes (the same memory), which torch can compare and fill."""
    return t.view(torch.uint8) if is_packed(t) else t


def decoded(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in float32. Packed 4-bit floats are unpacked, two a byte (low nibble first), so their last
    dimension doubles; two tensors of one shape unpack alike, element for element."""
    if not is_packed(t):
        return t.to(torch.float32)
    b = t.view(torch.uint8)
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=t.device)
    pair = torch.stack((lut[(b & 0xF).long()], lut[(b >> 4).long()]), dim=-1)
    return pair.reshape(*t.shape[:-1], t.shape[-1] * 2) if t.dim() else pair


def sentinel_for(dt: torch.dtype) -> float | int:
    if dt.is_floating_point:  # within range of every float type (fp8 e4m3 tops out at 448)
        return torch.tensor(min(SENTINEL_FLOAT, torch.finfo(dt).max / 2), dtype=dt).item()
    if dt == torch.bool:
        return True
    info = torch.iinfo(dt)
    return max(info.min, min(info.max, SENTINEL_INT)) if info.min < 0 else info.max


def _poison(t: Any, mode: str) -> Any:
    if isinstance(t, torch.Tensor) and t.numel() > 0 and not t.is_complex():
        with torch.no_grad():
            if is_packed(t):  # no NaN in e2m1: -6.0 in every nibble
                t.view(torch.uint8).fill_(0xFF)
            elif t.is_floating_point():
                t.fill_(NAN_POISON if mode == "nan" else sentinel_for(t.dtype))
            else:
                t.fill_(sentinel_for(t.dtype))
    return t


class _PoisonFactories(TorchFunctionMode):
    """Poisons what the uninitialised factories return however they are reached: a candidate that bound
    `torch.empty` to a name of its own at import (`from torch import empty as alloc`) calls the original
    function, past the patched attribute, but not past a torch function mode."""

    def __init__(self, mode: str, factories: frozenset[Any]) -> None:
        super().__init__()
        self.mode = mode
        self.factories = factories

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        return _poison(out, self.mode) if func in self.factories else out


@contextlib.contextmanager
def poisoned_allocations(mode: str) -> Iterator[None]:
    """Make torch's uninitialised allocators return poisoned memory ("nan" or "sentinel").

    Best effort: covers torch.empty / empty_like / empty_strided / Tensor.new_empty called from
    Python, through the module attributes (any thread) and, in the calling thread, through a torch
    function mode (aliases taken at import). Memory allocated in C++ (an extension's at::empty) is covered
    on the GPU by `prefill_allocator`, which leaves poisoned blocks in the caching allocator's free pool.
    """
    originals = {
        "empty": torch.empty,
        "empty_like": torch.empty_like,
        "empty_strided": torch.empty_strided,
    }
    orig_new_empty = torch.Tensor.new_empty
    factories = frozenset([*originals.values(), orig_new_empty, torch.Tensor.new_empty_strided])

    def wrap(fn: Any) -> Any:
        def inner(*a: Any, **k: Any) -> Any:
            return _poison(fn(*a, **k), mode)

        return inner

    try:
        for name, fn in originals.items():
            setattr(torch, name, wrap(fn))
        torch.Tensor.new_empty = wrap(orig_new_empty)  # type: ignore[method-assign]
        with _PoisonFactories(mode, factories):
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
            if dtype_name(dt) in FP4_DTYPES:  # the same bytes, fillable
                dt = torch.uint8
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
    tolerance_used: float | None = None  # max |got - ref| / (atol + rtol * |ref|): 1.0 is the rule's edge
    mismatches: int | None = None
    numel: int | None = None
    first_mismatch_index: list[int] | None = None
    expected_at_first: float | None = None
    got_at_first: float | None = None
    output_index: int | None = None
    nan_positions: Any = field(default=None, repr=False)  # bool mask of unexpected NaNs (for the re-run)
    caught_by: str | None = None  # a ksearch.worldmodel.models.CaughtBy, for a failure in the output's values

    def stats(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in (
                "max_abs_err",
                "max_rel_err",
                "tolerance_used",
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


# Outputs are compared this many elements at a time: the comparison's float64 temporaries then take ~50 MB
# whatever the output's size (whole-tensor temporaries took over 20x a float32 output: 2.7 GB for 128 MB).
COMPARE_CHUNK = 1 << 18
# On a GPU (141 GB on an H200) pieces are larger: fewer launches and host syncs per comparison.
COMPARE_CHUNK_GPU = 1 << 24


def pieces(t: torch.Tensor, limit: int | None = None) -> Iterator[torch.Tensor]:
    """`t`'s elements in row-major order as 1-D pieces of at most `limit` elements (default COMPARE_CHUNK,
    COMPARE_CHUNK_GPU for a tensor on a GPU).

    At most one piece is copied at a time, also for non-contiguous or expanded tensors (an expanded
    zero is a whole "all zeros" answer in one element). The cut depends only on the shape, so two
    tensors of one shape are cut alike; a complex tensor's `view_as_real` keeps its pairs together."""
    limit = limit or (COMPARE_CHUNK if t.device.type == "cpu" else COMPARE_CHUNK_GPU)
    if t.dim() == 0 or t.numel() <= limit:
        yield t.reshape(-1)
        return
    per_row = t.numel() // t.shape[0]
    if per_row > limit:
        for i in range(t.shape[0]):
            yield from pieces(t[i], limit)
        return
    step = limit // per_row
    for i in range(0, t.shape[0], step):
        yield t[i : i + step].reshape(-1)


def _value_at(t: torch.Tensor, flat_index: int) -> float | None:
    v = t[tuple(unravel(flat_index, tuple(t.shape)))]
    return _float_or_none(v.real if v.is_complex() else v)


def metadata_mismatch(
    got: torch.Tensor, exp: torch.Tensor, out_idx: int = 0, named: bool = False
) -> OutputCheck | None:
    """The first of shape, dtype and device in which `got` differs from `exp`, as a failure; None when none does."""
    where = f"output {out_idx}: " if out_idx or named else ""  # named: one of several outputs
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
    return None


def tolerance_masks(
    got: torch.Tensor, exp: torch.Tensor, atol: float, rtol: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tolerance rule elementwise, in float64, with no read-back: (non-finite where the reference is finite,
    outside |got - ref| <= atol + rtol * |ref| or not matching a non-finite reference exactly, |got - ref|, |ref|),
    both differences 0 where either side is not finite."""
    g, e = got.double(), exp.double()
    g_fin, e_fin = torch.isfinite(g), torch.isfinite(e)
    # non-finite where the reference is finite: poison left in place, or a computed NaN/Inf
    bad = ~g_fin & e_fin
    # where the reference itself is non-finite, the candidate must match it exactly (NaN == NaN)
    ref_nonfinite_mismatch = ~e_fin & ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
    g0, e0 = torch.where(g_fin, g, 0.0), torch.where(e_fin, e, 0.0)
    diff = (g0 - e0).abs()
    ref_abs = e0.abs()
    return bad, (diff > atol + rtol * ref_abs) | ref_nonfinite_mismatch, diff, ref_abs


def compare_tensor(
    got: torch.Tensor, exp: torch.Tensor, tol: Tolerance, out_idx: int = 0, named: bool = False
) -> OutputCheck:
    """Shape, dtype and device, then NaN/Inf, then the tolerance, one piece at a time (see `pieces`)."""
    where = f"output {out_idx}: " if out_idx or named else ""  # named: one of several outputs
    odd = metadata_mismatch(got, exp, out_idx, named)
    if odd is not None:
        return odd
    numel = exp.numel()
    if numel == 0:
        return OutputCheck(True, "ok", numel=0)
    atol, rtol = tol.for_dtype(dtype_name(exp.dtype))
    cplx = exp.is_complex()
    floating = cplx or exp.is_floating_point()
    g_src, e_src = (torch.view_as_real(got), torch.view_as_real(exp)) if cplx else (got, exp)
    n_bad = n_mis = 0
    first_bad: int | None = None
    first_mis: int | None = None
    bad_mask: torch.Tensor | None = None  # where the candidate is NaN/Inf and the reference is finite
    max_abs, max_rel = 0.0, None
    used: float | None = 0.0 if floating else None  # exact dtypes have no tolerance to use
    offset = 0  # in elements of `exp` (a complex element is one pair)
    for gp, ep in zip(pieces(g_src), pieces(e_src), strict=True):
        if cplx:
            gp, ep = gp.view(-1, 2), ep.view(-1, 2)
        if floating:
            bad, mism, diff, ref_abs = tolerance_masks(gp, ep, atol, rtol)
            if cplx:
                bad, mism, diff, ref_abs = bad.any(-1), mism.any(-1), diff.amax(-1), ref_abs.amax(-1)
            nb = int(bad.sum())
            if nb:
                if bad_mask is None:
                    bad_mask = torch.zeros(numel, dtype=torch.bool, device=exp.device)
                    first_bad = offset + int(bad.nonzero()[0])
                bad_mask[offset : offset + bad.numel()] = bad
                n_bad += nb
        else:
            g, e = gp.to(torch.int64), ep.to(torch.int64)
            diff = (g - e).abs().double()
            mism = diff > 0
            ref_abs = e.double().abs()
        nm = int(mism.sum())
        if nm:
            if first_mis is None:
                first_mis = offset + int(mism.nonzero()[0])
            n_mis += nm
        max_abs = max(max_abs, float(diff.max()))
        if used is not None:
            allowed = (atol + rtol * ref_abs).clamp_min(1e-300)
            used = max(used, float((diff / allowed).max()))
        rel_mask = ref_abs > max(atol, 1e-12)
        if bool(rel_mask.any()):
            rel = float((diff[rel_mask] / ref_abs[rel_mask]).max())
            max_rel = rel if max_rel is None else max(max_rel, rel)
        offset += mism.numel()
    shape = tuple(exp.shape)
    if bad_mask is not None and first_bad is not None:
        return OutputCheck(
            False,
            "nan_inf",
            f"{where}{n_bad} of {numel} elements are NaN/Inf where the reference is finite",
            mismatches=n_bad,
            numel=numel,
            first_mismatch_index=unravel(first_bad, shape),
            expected_at_first=_value_at(exp, first_bad),
            got_at_first=_value_at(got, first_bad),
            output_index=out_idx,
            nan_positions=bad_mask.view(shape),
            caught_by="nonfinite",  # until a re-run with a finite poison tells where the NaN came from
        )
    common: dict[str, Any] = {
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "tolerance_used": used,
        "mismatches": n_mis,
        "numel": numel,
        "output_index": out_idx,
    }
    if n_mis == 0 or n_mis <= tol.mismatch_ratio * numel or first_mis is None:
        return OutputCheck(True, "ok", **common)
    return OutputCheck(
        False,
        "wrong_values",
        f"{where}{n_mis} of {numel} elements differ beyond atol={atol:g}, rtol={rtol:g} "
        f"(max abs err {max_abs:.4g})",
        first_mismatch_index=unravel(first_mis, shape),
        expected_at_first=_value_at(exp, first_mis),
        got_at_first=_value_at(got, first_mis),
        caught_by="tolerance",
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
            r = compare_tensor(g, e, tol, i, named=len(el) > 1)  # one of several outputs: say which
            if not r.passed:
                return r
            worst.max_abs_err = max(worst.max_abs_err or 0.0, r.max_abs_err or 0.0)
            if r.tolerance_used is not None:
                worst.tolerance_used = max(worst.tolerance_used or 0.0, r.tolerance_used)
            worst.mismatches = (worst.mismatches or 0) + (r.mismatches or 0)
            worst.numel = (worst.numel or 0) + (r.numel or 0)
            if r.max_rel_err is not None:
                rels.append(r.max_rel_err)
        else:  # a scalar output: compare as a number
            ge, ee = _float_or_none(g), _float_or_none(e)
            if ge is None or ee is None:
                if g != e:
                    return OutputCheck(
                        False,
                        "wrong_values",
                        f"output {i}: got {g!r}, expected {e!r}",
                        output_index=i,
                        caught_by="tolerance",
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
                    caught_by="tolerance",
                )
    worst.max_rel_err = max(rels) if rels else None
    return worst


def inputs_equal(a: list[Any], b: list[Any]) -> tuple[bool, str]:
    """Whether two post-call input lists hold the same values (NaN-aware, bitwise for ints), compared
    piece by piece (see `pieces`)."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False, f"input {i} changed shape or dtype"
            x, y = as_bytes(x), as_bytes(y)
            n = 0
            for xp, yp in zip(pieces(x), pieces(y), strict=True):
                same = xp == yp
                if x.is_floating_point() or x.is_complex():
                    same |= torch.isnan(xp) & torch.isnan(yp)
                n += int((~same).sum())
            if n:
                return False, f"input {i}: {n} of {x.numel()} elements were overwritten by the candidate"
    return True, ""


def finite_mean(t: torch.Tensor) -> float | None:
    """The mean of `t`'s finite elements (None if there are none, or for packed 4-bit floats), piece by piece."""
    if is_packed(t):
        return None
    total, count = 0.0, 0
    for p in pieces(t):
        d = p.double()
        fin = torch.isfinite(d)
        total += float(torch.where(fin, d, 0.0).sum())
        count += int(fin.sum())
    return total / count if count else None


def constant_like(t: torch.Tensor, value: float) -> torch.Tensor:
    """A tensor shaped like `t` holding `value` everywhere, in the memory of one element."""
    return torch.full((), value, dtype=t.dtype, device=t.device).expand(t.shape)


def trivial_answers(e: torch.Tensor, inputs: list[Any]) -> dict[str, torch.Tensor]:
    """Answers that skip the work, shaped like output `e`: zeros, its finite mean everywhere, and each input
    of its shape (cast to its dtype). Zeros and the constant are expanded single elements."""
    out = {"all zeros": constant_like(e, 0.0)}
    mean = finite_mean(e)
    if mean is not None:
        out["a constant (the mean)"] = constant_like(e, mean)
    for j, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.shape == e.shape and x.device.type == e.device.type:
            out[f"input {j} unchanged"] = x if x.dtype == e.dtype else x.to(e.dtype)
    return out


def degenerate_answers(exp: Any, inputs: list[Any], tol: Tolerance) -> list[str]:
    """Trivial answers the tolerance would accept (zeros, a constant, an input): the task is weak."""
    out = []
    for i, e in enumerate(flatten(exp)):
        if not isinstance(e, torch.Tensor) or not e.is_floating_point() or e.numel() < 2:
            continue
        if finite_mean(e) is None:
            continue
        for what, guess in trivial_answers(e, inputs).items():
            if compare_tensor(guess, e, tol).passed:
                out.append(
                    f"degenerate_reference: output {i} would pass as {what}; this workload cannot tell "
                    "a wrong kernel from a right one, so such an answer is also checked on extra inputs "
                    "with signed values"
                )
    return out
