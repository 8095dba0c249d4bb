"""Fault: a Triton kernel that stores far outside its output (an illegal memory access)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _bad_store(y_ptr, m):
    i = tl.program_id(0)
    tl.store(y_ptr + i + (1 << 40), 1.0)  # a terabyte past the allocation


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        _bad_store[(x.shape[0],)](y, x.shape[0])
        return y
