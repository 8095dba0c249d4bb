"""KernelBench-style problem (a fixture of bench/baseline_repeat.py): a bf16 matrix product A @ B of square-ish
shapes, as a plain GEMM layer without bias."""

import torch

M = 4096
K = 4096
N = 4096

# bf16 outputs: the usual bf16 tolerance (an fp32-accumulated kernel and the library differ in the last bits)
TOLERANCE = {"atol": {"bfloat16": 2e-2}, "rtol": {"bfloat16": 2e-2}}

WORKLOADS = [
    {"name": "4096x4096x4096", "params": {"M": 4096, "K": 4096, "N": 4096}, "split": "search"},
    {"name": "8192x2048x8192", "params": {"M": 8192, "K": 2048, "N": 8192}, "split": "search"},
    {"name": "2048x8192x2048", "params": {"M": 2048, "K": 8192, "N": 2048}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 64, "K": 96, "N": 80}, "split": "smoke"},
]


class Model(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs(M: int = M, K: int = K, N: int = N) -> list[torch.Tensor]:
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs() -> list[object]:
    return []
