"""Plain Triton residual add + RMSNorm: one program per row; pass 1 writes h and sums h^2, pass 2 normalises."""

import torch
import triton
import triton.language as tl

TUNABLES = {"BLOCK_N": [256, 512, 1024, 2048, 4096], "num_warps": [2, 4, 8, 16]}
BLOCK_N = 1024
num_warps = 4


@triton.jit
def _add_rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    cols = tl.arange(0, BLOCK_N)

    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + base + start + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x + r) * rstd * w
        tl.store(y_ptr + base + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, residual, weight):
        x = x.contiguous()
        residual = residual.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        h = torch.empty_like(x)
        _add_rmsnorm_rows[(m,)](x, residual, weight, y, h, n, self.eps, BLOCK_N=BLOCK_N, num_warps=num_warps)
        return y, h
