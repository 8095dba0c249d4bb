"""rmsnorm_h4096, one program per row: the row read once into registers, its mean square, the scaled row
written back. Value-returning (run returns the output). One launch."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / H + EPS)
    w = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (x * inv_rms * w).to(y_ptr.dtype.element_ty))


def run(hidden_states, weight):
    batch_size, hidden_size = hidden_states.shape
    output = torch.empty_like(hidden_states)
    if batch_size:
        _rmsnorm_rows[(batch_size,)](hidden_states, weight, output, H=hidden_size, EPS=1e-6, num_warps=8)
    return output
