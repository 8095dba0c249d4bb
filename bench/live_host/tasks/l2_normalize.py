"""A KernelBench-format problem with no seed: each row of a fp32 matrix divided by its L2 norm
(clamped away from zero), as torch.nn.functional.normalize does."""

import torch


class Model(torch.nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, p=2.0, dim=1, eps=self.eps)


WORKLOADS = [
    {"name": "16384x4096", "params": {"M": 16384, "N": 4096}, "split": "search"},
    {"name": "4096x16384", "params": {"M": 4096, "N": 16384}, "split": "search"},
    {"name": "2048x50000", "params": {"M": 2048, "N": 50000}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 45, "N": 2500}, "split": "smoke"},
]


def get_inputs(M: int = 16384, N: int = 4096) -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs(**params: int) -> list[float]:
    return [1e-12]
