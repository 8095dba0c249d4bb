"""Batched matrix multiply C[b] = A[b] @ B[b] in bf16 with fp32 accumulation.

Many independent mid-sized GEMMs (attention-style shapes): compute-bound, with the batch as a
third grid dimension; tiles must be large enough for tensor-core throughput yet numerous enough
to fill 132 SMs. Smoke workload: float16, because the Triton CPU interpreter computes bf16 dot
products wrongly; float16 exercises the same code path on the CPU.
"""

import torch

from ksearch.gpu.inputs import signed, torch_dtype

META = {"op": "bmm", "dtype": "bfloat16", "bound": "compute", "title": "Batched GEMM (bf16)"}

WORKLOADS = [
    {"name": "64x1024x1024x1024", "params": {"B": 64, "M": 1024, "N": 1024, "K": 1024}, "split": "search"},
    {"name": "256x512x512x512", "params": {"B": 256, "M": 512, "N": 512, "K": 512}, "split": "search"},
    {"name": "96x768x1000x640", "params": {"B": 96, "M": 768, "N": 1000, "K": 640}, "split": "heldout"},
    {"name": "smoke", "params": {"B": 3, "M": 72, "N": 80, "K": 56, "dtype": "float16"}, "split": "smoke"},
]


def COST(params):
    b, m, n, k = params["B"], params["M"], params["N"], params["K"]
    return {"flops": 2.0 * b * m * n * k, "bytes": 2.0 * b * (m * k + k * n + m * n), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs(B=64, M=1024, N=1024, K=1024, dtype="bfloat16"):
    dt = torch_dtype(dtype)
    return [signed(B, M, K, dtype=dt), signed(B, K, N, dtype=dt)]


def get_init_inputs(**params):
    return []
