"""Sum over the last dimension of a fp32 matrix: the simplest bandwidth test, and a reduction.

Memory-bound: the output is tiny, so the whole cost is reading the input once; narrow rows need
several rows per program (or a split reduction for very wide ones) to keep the GPU busy.
Tolerance: fp32 sums of up to 64k terms in any order differ by ~1e-5 absolute, hence atol 1e-3.
"""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "row_sum", "dtype": "float32", "bound": "memory", "title": "Row sum (fp32)"}

WORKLOADS = [
    {"name": "16384x16384", "params": {"M": 16384, "N": 16384}, "split": "search"},
    {"name": "262144x1024", "params": {"M": 262144, "N": 1024}, "split": "search"},
    {"name": "4096x65536", "params": {"M": 4096, "N": 65536}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 139, "N": 1500}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-3}, "rtol": {"float32": 1e-5}}


def COST(params):
    m, n = params["M"], params["N"]
    return {"flops": 1.0 * m * n, "bytes": 4.0 * (m * n + m), "dtype": "float32"}


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs(M=16384, N=16384):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
