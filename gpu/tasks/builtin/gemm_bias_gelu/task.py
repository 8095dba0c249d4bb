"""Linear layer with a GELU epilogue: y = gelu(x @ W^T + b), bf16, exact (erf) GELU.

Compute-bound GEMM whose epilogue (bias add and GELU) eager PyTorch runs as a separate pass over
the output; fusing it into the GEMM saves that round trip. W and b are the module's nn.Linear
parameters, created after the fixed init seed (ModelNew must create the same nn.Linear).
Smoke workload: float16, because the Triton CPU interpreter computes bf16 dot products wrongly;
float16 exercises the same code path on the CPU.
"""

import torch
import torch.nn.functional as F

from ksearch.gpu.inputs import signed, torch_dtype

META = {"op": "gemm_epilogue", "dtype": "bfloat16", "bound": "compute", "title": "Linear + bias + GELU (bf16)"}

WORKLOADS = [
    {"name": "4096x11008x4096", "params": {"M": 4096, "N": 11008, "K": 4096}, "split": "search"},
    {"name": "8192x4096x4096", "params": {"M": 8192, "N": 4096, "K": 4096}, "split": "search"},
    {"name": "3000x8192x3072", "params": {"M": 3000, "N": 8192, "K": 3072}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 136, "N": 152, "K": 72, "dtype": "float16"}, "split": "smoke"},
]


def COST(params):
    m, n, k = params["M"], params["N"], params["K"]
    return {"flops": 2.0 * m * n * k + 10.0 * m * n, "bytes": 2.0 * (m * k + n * k + n + m * n), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def __init__(self, K, N, dtype="bfloat16"):
        super().__init__()
        self.linear = torch.nn.Linear(K, N)
        self.linear.to(torch_dtype(dtype))

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs(M=4096, N=11008, K=4096, dtype="bfloat16"):
    return [signed(M, K, dtype=torch_dtype(dtype))]


def get_init_inputs(N=11008, K=4096, dtype="bfloat16", **params):
    return [K, N, dtype]
