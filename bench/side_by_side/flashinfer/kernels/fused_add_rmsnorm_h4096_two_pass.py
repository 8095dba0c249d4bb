"""fused_add_rmsnorm_h4096 in two launches: the first sums each row's squares of hidden_states + residual
into one float per row, the second recomputes the sum, scales it and writes the output, a 1024-wide block
per program (so more programs than rows keep the GPU busy on small batches). Destination-passing
(run writes into `output`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _inv_rms(h_ptr, r_ptr, inv_ptr, H: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, H)
    x = tl.load(h_ptr + row * H + cols).to(tl.float32) + tl.load(r_ptr + row * H + cols).to(tl.float32)
    tl.store(inv_ptr + row, tl.rsqrt(tl.sum(x * x, axis=0) / H + EPS))


@triton.jit
def _scale(h_ptr, r_ptr, w_ptr, inv_ptr, o_ptr, H: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(h_ptr + row * H + cols).to(tl.float32) + tl.load(r_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    inv_rms = tl.load(inv_ptr + row)
    tl.store(o_ptr + row * H + cols, (x * inv_rms * w).to(o_ptr.dtype.element_ty))


def run(hidden_states, residual, weight, output):
    batch_size, hidden_size = hidden_states.shape
    if not batch_size:
        return
    block = 1024
    inv = torch.empty(batch_size, dtype=torch.float32, device=hidden_states.device)
    _inv_rms[(batch_size,)](hidden_states, residual, inv, H=hidden_size, EPS=1e-5, num_warps=8)
    _scale[(batch_size, hidden_size // block)](
        hidden_states, residual, weight, inv, output, H=hidden_size, BLOCK=block, num_warps=4
    )
