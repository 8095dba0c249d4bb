"""Triton residual add + RMSNorm, one program per row: pass 1 adds, writes the new residual (bf16) and sums the
squares of the rounded sum in fp32; pass 2 recomputes the sum from the inputs and writes the normalised row."""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _add_rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    cols = tl.arange(0, BLOCK)
    ss = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        h = (x + r).to(tl.bfloat16)
        tl.store(h_ptr + base + start + cols, h, mask=mask)
        hf = h.to(tl.float32)
        ss += hf * hf
    rstd = 1.0 / tl.sqrt(tl.sum(ss, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        hf = (x + r).to(tl.bfloat16).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + start + cols, (hf * rstd * w).to(tl.bfloat16), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, residual = x.contiguous(), residual.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        h = torch.empty_like(x)
        _add_rmsnorm[(m,)](x, residual, weight.contiguous(), y, h, n, self.eps, BLOCK=BLOCK, num_warps=8)
        return y, h
