"""Fault: a Triton kernel that never finishes (spins on a volatile load that never changes)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(x_ptr, y_ptr):
    v = tl.load(x_ptr, volatile=True)
    while v == v:  # true for any finite value, re-read every iteration
        v = tl.load(x_ptr, volatile=True)
    tl.store(y_ptr, v)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        flag = torch.ones(1, device=x.device)
        _spin[(1,)](flag, y)
        return y
