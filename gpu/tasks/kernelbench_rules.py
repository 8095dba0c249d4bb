"""KernelBench's correctness rule, for KernelBench files (pure data: no torch).

KernelBench (`src/kernelbench/eval.py`, `run_and_check_correctness`) accepts a candidate's output when
`torch.allclose(reference, candidate, atol=t, rtol=t)` holds, with `t` from `get_tolerance_for_precision` for the
evaluation's precision: fp32 1e-4, fp16 1e-2, bf16 1e-2 (no fp8). ksearch's defaults differ in bf16 (2e-2).

`allclose` scales its relative term by the candidate's value (|ref - got| <= t + t * |got|), ksearch's rule by
the reference's (|got - ref| <= atol + rtol * |ref|). Since |got| <= |ref| + |got - ref|, every output KernelBench
accepts satisfies |got - ref| <= (t + t * |ref|) / (1 - t): `kernelbench_tolerance` uses t / (1 - t) for both
terms, so ksearch never rejects what KernelBench accepts, and is looser by no more than that factor (1.0001 in
fp32, 1.0101 in fp16 and bf16). Dtypes KernelBench has no rule for keep ksearch's defaults.
"""

from __future__ import annotations

from ksearch.gpu.task import Tolerance

KERNELBENCH_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
"""atol = rtol per KernelBench precision, as `get_tolerance_for_precision` returns it."""

_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def kernelbench_tolerance() -> Tolerance:
    """ksearch's Tolerance that accepts whatever KernelBench's allclose accepts, per output dtype."""
    base = Tolerance()
    atol, rtol = dict(base.atol), dict(base.rtol)
    for precision, t in KERNELBENCH_TOLERANCE.items():
        atol[_DTYPE[precision]] = rtol[_DTYPE[precision]] = t / (1.0 - t)
    return Tolerance(atol=atol, rtol=rtol)
