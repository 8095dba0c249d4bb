"""KernelBench's correctness rule, for KernelBench files (pure data: no torch).

KernelBench (`src/kernelbench/eval.py`, `run_and_check_correctness`) accepts a candidate's output when
`torch.allclose(reference, candidate, atol=t, rtol=t)` holds, with `t` from `get_tolerance_for_precision` for the
evaluation's precision: fp32 1e-4, fp16 1e-2, bf16 1e-2 (no fp8). ksearch's defaults differ in bf16 (2e-2).

`allclose` scales its relative term by the candidate's value (|ref - got| <= t + t * |got|), ksearch's rule by
the reference's (|got - ref| <= atol + rtol * |ref|, computed in float64). Since |got| <= |ref| + |got - ref|,
every output KernelBench accepts satisfies |got - ref| <= (t + t * |ref|) / (1 - t). `allclose` also computes in
the output's dtype, and its roundings (of the difference, of t * |got|, of the sum) move its edge by less than
four units of roundoff u of that dtype. `kernelbench_tolerance` uses t / (1 - t) * (1 + 4u) for both terms: ksearch
never rejects what KernelBench accepts, and is looser by no more than that factor (1.0001 in fp32, 1.012 in fp16,
1.026 in bf16). Dtypes KernelBench has no rule for keep ksearch's defaults.
"""

from __future__ import annotations

from ksearch.gpu.task import Tolerance

KERNELBENCH_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
"""atol = rtol per KernelBench precision, as `get_tolerance_for_precision` returns it."""

_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}  # half an ulp, relative


def kernelbench_tolerance() -> Tolerance:
    """ksearch's Tolerance that accepts whatever KernelBench's allclose accepts, per output dtype."""
    base = Tolerance()
    atol, rtol = dict(base.atol), dict(base.rtol)
    for precision, t in KERNELBENCH_TOLERANCE.items():
        dtype = _DTYPE[precision]
        atol[dtype] = rtol[dtype] = t / (1.0 - t) * (1.0 + 4.0 * _ROUNDOFF[dtype])
    return Tolerance(atol=atol, rtol=rtol)
