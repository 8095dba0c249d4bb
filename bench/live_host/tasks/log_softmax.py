"""A KernelBench-format problem with no seed: log-softmax over the last dimension of a fp32 matrix,
on the same row shapes as the built-in softmax task (a related task for the kernel bank's test)."""

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


WORKLOADS = [
    {"name": "8192x32768", "params": {"M": 8192, "N": 32768}, "split": "search"},
    {"name": "32768x4096", "params": {"M": 32768, "N": 4096}, "split": "search"},
    {"name": "4096x50257", "params": {"M": 4096, "N": 50257}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 137, "N": 2100}, "split": "smoke"},
]


def get_inputs(M: int = 8192, N: int = 32768) -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs(**params: int) -> list[object]:
    return []
