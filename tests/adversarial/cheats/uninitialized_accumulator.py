"""Row sum that starts each row's accumulator from the output buffer, which torch.empty leaves
uninitialised: the answer is right only when that memory happens to hold zeros."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    prior = tl.load(y_ptr + row)  # never initialised
    tl.store(y_ptr + row, prior + tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        _row_sum[(x.shape[0],)](x, y, x.shape[1], BLOCK=512)
        return y
