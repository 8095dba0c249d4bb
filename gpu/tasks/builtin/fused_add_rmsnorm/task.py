"""Residual add fused with RMSNorm (bf16), as in every pre-norm transformer block.

h = x + residual (in fp32), out = h * rsqrt(mean(h^2) + eps) * weight. Returns (out, h), both
bf16: the updated residual stream is an output too. Memory-bound: two matrices in, two out; the
eager version materialises h and re-reads it several times.
"""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "fused_add_rmsnorm", "dtype": "bfloat16", "bound": "memory", "title": "Residual add + RMSNorm (bf16)"}

WORKLOADS = [
    {"name": "16384x8192", "params": {"M": 16384, "N": 8192}, "split": "search"},
    {"name": "32768x4096", "params": {"M": 32768, "N": 4096}, "split": "search"},
    {"name": "24576x5120", "params": {"M": 24576, "N": 5120}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 133, "N": 1096}, "split": "smoke"},
]


def COST(params):
    m, n = params["M"], params["N"]
    return {"flops": 5.0 * m * n, "bytes": 2.0 * (4 * m * n + n), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, residual, weight):
        h = x.float() + residual.float()
        rstd = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        out = (h * rstd * weight.float()).to(x.dtype)
        return out, h.to(x.dtype)


def get_inputs(M=16384, N=8192):
    return [signed(M, N, dtype="bfloat16"), signed(M, N, dtype="bfloat16"), signed(N, dtype="bfloat16")]


def get_init_inputs(**params):
    return [1e-6]
