"""Softmax over the last dimension of a fp32 matrix (rows of a few thousand to 50k columns).

Memory-bound: one read and one write of the matrix is the floor; eager PyTorch is close to it on
wide rows, so gains come from a single pass with the row kept on chip (or an online max/sum).
The tolerance is tight in absolute terms because most probabilities are ~1/N.
"""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "softmax", "dtype": "float32", "bound": "memory", "title": "Row softmax (fp32)"}

WORKLOADS = [
    {"name": "8192x32768", "params": {"M": 8192, "N": 32768}, "split": "search"},
    {"name": "32768x4096", "params": {"M": 32768, "N": 4096}, "split": "search"},
    {"name": "4096x50257", "params": {"M": 4096, "N": 50257}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 137, "N": 2100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-7}, "rtol": {"float32": 1e-4}}


def COST(params):
    n = params["M"] * params["N"]
    return {"flops": 4.0 * n, "bytes": 8.0 * n, "dtype": "float32"}


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs(M=8192, N=32768):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
