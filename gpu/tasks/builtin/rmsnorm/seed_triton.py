"""Plain Triton RMSNorm: one program per row; a pass for the mean of squares, a pass for the output."""

import torch
import triton
import triton.language as tl

TUNABLES = {"BLOCK_N": [256, 512, 1024, 2048, 4096], "num_warps": [2, 4, 8, 16]}
BLOCK_N = 1024
num_warps = 4


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)

    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _rmsnorm_rows[(m,)](x, weight, y, n, x.stride(0), y.stride(0), self.eps, BLOCK_N=BLOCK_N, num_warps=num_warps)
        return y
