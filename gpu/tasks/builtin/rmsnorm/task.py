"""RMSNorm over the last dimension of a bf16 activation matrix with a bf16 weight (eps 1e-6).

The statistic is computed in fp32; the output is bf16. Memory-bound: read x once, write y once.
The reference is the usual eager formulation (upcast, mean of squares, rsqrt, scale, downcast),
which launches several kernels and moves the matrix several times.
"""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "rmsnorm", "dtype": "bfloat16", "bound": "memory", "title": "RMSNorm (bf16)"}

WORKLOADS = [
    {"name": "32768x8192", "params": {"M": 32768, "N": 8192}, "split": "search"},
    {"name": "65536x4096", "params": {"M": 65536, "N": 4096}, "split": "search"},
    {"name": "16384x5120", "params": {"M": 16384, "N": 5120}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 137, "N": 1096}, "split": "smoke"},
]


def COST(params):
    m, n = params["M"], params["N"]
    return {"flops": 4.0 * m * n, "bytes": 2.0 * (2 * m * n + n), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rstd * weight.float()).to(x.dtype)


def get_inputs(M=32768, N=8192):
    return [signed(M, N, dtype="bfloat16"), signed(N, dtype="bfloat16")]


def get_init_inputs(**params):
    return [1e-6]
