"""Triton's interpreter multiplies bfloat16 `tl.dot` operands as raw bits; this makes it multiply their values.

The interpreter stores a bfloat16 tensor as the uint16 of its bits and hands those to NumPy's matmul unconverted,
so a correct bf16 GEMM reads garbage on the CPU (max error ~1e10 on a 16x16 dot of N(0,1) values, Triton 3.9)
and is judged wrong there while the GPU computes it right. Widening the operands to float32 first is what the
GPU's tensor cores do (a bf16 product is exact in float32, accumulated in float32). The fix is installed only
where a one-dot probe shows the fault, so an interpreter that gets it right is left alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _widen(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) to the float32 values they stand for (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _probe_wrong(create_dot: Any, handle: Any, bf16: Any, f32: Any) -> bool:
    """Does the interpreter's dot of two bf16 1x1 operands [1.5] x [2.0] miss 3.0?"""
    one_five, two = np.array([[0x3FC0]], np.uint16), np.array([[0x4000]], np.uint16)
    out = create_dot(
        handle(one_five, bf16), handle(two, bf16), handle(np.zeros((1, 1), np.float32), f32), None, 0
    )
    return float(out.data[0, 0]) != 3.0


def install() -> bool:
    """Under TRITON_INTERPRET=1, patch the interpreter's dot for bf16 operands where it is wrong; True when patched."""
    from triton import knobs

    if not knobs.runtime.interpret:
        return False
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    original = builder.create_dot
    if getattr(original, "_ksearch_bf16", False):
        return True
    handle = interpreter.TensorHandle
    if not _probe_wrong(original, handle, tl.bfloat16, tl.float32):
        return False

    def create_dot(a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a_data = _widen(a.data) if a.dtype.scalar == tl.bfloat16 else a.data.astype(np.float32)
            b_data = _widen(b.data) if b.dtype.scalar == tl.bfloat16 else b.data.astype(np.float32)
            if d.dtype.scalar == tl.float32:
                return handle(np.matmul(a_data, b_data, dtype=np.float32) + d.data, d.dtype.scalar)
        return original(a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._ksearch_bf16 = True  # type: ignore[attr-defined]
    builder.create_dot = create_dot
    return True
