"""Plain Triton LayerNorm: one program per row; passes for the mean, the variance, then the output."""

import torch
import triton
import triton.language as tl

TUNABLES = {"BLOCK_N": [256, 512, 1024, 2048, 4096], "num_warps": [2, 4, 8, 16]}
BLOCK_N = 1024
num_warps = 4


@triton.jit
def _layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)

    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += x
    mean = tl.sum(acc, axis=0) / n_cols

    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0)
        tl.store(y_row + start + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _layernorm_rows[(m,)](
            x, weight, bias, y, n, x.stride(0), y.stride(0), self.eps, BLOCK_N=BLOCK_N, num_warps=num_warps
        )
        return y
