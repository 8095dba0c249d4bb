"""Dense matrix multiply C = A @ B in bf16 with fp32 accumulation (A: M x K, B: K x N, row-major).

Compute-bound at these sizes: the H200's bf16 tensor cores (~790 TFLOP/s dense via cuBLAS) are
the ceiling. Wins come from large tiles, TMA/wgmma-friendly layouts, pipelining and tile swizzling.
The held-out shape is not a multiple of any block size, so edge handling is tested.
Smoke workload: float16, because the Triton CPU interpreter computes bf16 dot products wrongly;
float16 exercises the same code path on the CPU.
"""

import torch

from ksearch.gpu.inputs import signed, torch_dtype

META = {"op": "gemm", "dtype": "bfloat16", "bound": "compute", "title": "GEMM (bf16, fp32 accumulate)"}

WORKLOADS = [
    {"name": "4096^3", "params": {"M": 4096, "N": 4096, "K": 4096}, "split": "search"},
    {"name": "8192x8192x2048", "params": {"M": 8192, "N": 8192, "K": 2048}, "split": "search"},
    {"name": "3000x5000x4000", "params": {"M": 3000, "N": 5000, "K": 4000}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 136, "N": 144, "K": 72, "dtype": "float16"}, "split": "smoke"},
]


def COST(params):
    m, n, k = params["M"], params["N"], params["K"]
    return {"flops": 2.0 * m * n * k, "bytes": 2.0 * (m * k + k * n + m * n), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs(M=4096, N=4096, K=4096, dtype="bfloat16"):
    dt = torch_dtype(dtype)
    return [signed(M, K, dtype=dt), signed(K, N, dtype=dt)]


def get_init_inputs(**params):
    return []
