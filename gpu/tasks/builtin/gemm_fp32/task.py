"""Dense matrix multiply C = A @ B in full fp32 (IEEE products: TF32 is not allowed).

The reference is cuBLAS SGEMM with TF32 off (PyTorch's default). The tolerance accepts any fp32
summation order but rejects TF32 (10-bit mantissa products), so the search cannot buy speed with
precision. Compute-bound on the FP32 CUDA cores (~67 TFLOP/s peak on an H200).
"""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "gemm", "dtype": "float32", "bound": "compute", "title": "GEMM (fp32, no TF32)"}

WORKLOADS = [
    {"name": "4096x4096x2048", "params": {"M": 4096, "N": 4096, "K": 2048}, "split": "search"},
    {"name": "2048x8192x1024", "params": {"M": 2048, "N": 8192, "K": 1024}, "split": "search"},
    {"name": "3000x3000x3000", "params": {"M": 3000, "N": 3000, "K": 3000}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 72, "N": 88, "K": 100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-3}, "rtol": {"float32": 1e-4}}


def COST(params):
    m, n, k = params["M"], params["N"], params["K"]
    return {"flops": 2.0 * m * n * k, "bytes": 4.0 * (m * k + k * n + m * n), "dtype": "float32"}


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs(M=4096, N=4096, K=2048):
    return [signed(M, K), signed(K, N)]


def get_init_inputs(**params):
    return []
