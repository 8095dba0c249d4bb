"""LayerNorm over the last dimension of a fp32 activation matrix, with weight and bias (eps 1e-5).

Memory-bound: read x once, write y once; the per-row mean and variance are reductions that a
good kernel computes without a second trip to memory (the row fits on chip).
Weight and bias are inputs (random, signed) so that a kernel ignoring them fails.
"""

import torch
import torch.nn.functional as F

from ksearch.gpu.inputs import signed

META = {"op": "layernorm", "dtype": "float32", "bound": "memory", "title": "LayerNorm (fp32)"}

WORKLOADS = [
    {"name": "16384x8192", "params": {"M": 16384, "N": 8192}, "split": "search"},
    {"name": "65536x1024", "params": {"M": 65536, "N": 1024}, "split": "search"},
    {"name": "12288x6144", "params": {"M": 12288, "N": 6144}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 135, "N": 1100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-4}, "rtol": {"float32": 1e-4}}


def COST(params):
    m, n = params["M"], params["N"]
    return {"flops": 8.0 * m * n, "bytes": 4.0 * (2 * m * n + 2 * n), "dtype": "float32"}


class Model(torch.nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.eps)


def get_inputs(M=16384, N=8192):
    return [signed(M, N), signed(N), signed(N)]


def get_init_inputs(**params):
    return [1e-5]
