"""KernelBench level1/88_MinGPTNewGelu: the tanh GELU in one pass over the data (the reference launches about eight
elementwise kernels, each reading and writing the whole tensor).

0.5 * x * (1 + tanh(u)) equals x * sigmoid(2u) = x / (1 + exp(-2u)), with u = sqrt(2/pi) * (x + 0.044715 x^3):
one exponential, no cancellation, and the right limits (x for large x, 0 for very negative x)."""

import math

import torch
import triton
import triton.language as tl

BLOCK = 4096
NUM_WARPS = 8
_K = math.sqrt(2.0 / math.pi)


@triton.jit
def _new_gelu(x_ptr, y_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    u = K * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, x / (1.0 + tl.exp(-2.0 * u)), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _new_gelu[(triton.cdiv(n, BLOCK),)](x, y, n, K=_K, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
