"""SwiGLU activation of a transformer MLP: silu(gate) * up, bf16, elementwise.

Memory-bound: two matrices in, one out, no reuse; eager runs two kernels and round-trips the
silu result through memory. Sizes are Llama-style intermediate widths.
"""

import torch
import torch.nn.functional as F

from ksearch.gpu.inputs import signed

META = {"op": "swiglu", "dtype": "bfloat16", "bound": "memory", "title": "SwiGLU silu(gate) * up (bf16)"}

WORKLOADS = [
    {"name": "8192x14336", "params": {"M": 8192, "N": 14336}, "split": "search"},
    {"name": "32768x4096", "params": {"M": 32768, "N": 4096}, "split": "search"},
    {"name": "12288x11008", "params": {"M": 12288, "N": 11008}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 137, "N": 1500}, "split": "smoke"},
]


def COST(params):
    n = params["M"] * params["N"]
    return {"flops": 6.0 * n, "bytes": 2.0 * 3 * n, "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def forward(self, gate, up):
        return F.silu(gate) * up


def get_inputs(M=8192, N=14336):
    return [signed(M, N, dtype="bfloat16"), signed(M, N, dtype="bfloat16")]


def get_init_inputs(**params):
    return []
