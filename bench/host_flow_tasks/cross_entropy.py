"""KernelBench-style problem (a fixture of bench/host_flow.py and bench/baseline_repeat.py): the mean
cross-entropy of fp32 logits over a large vocabulary against integer targets."""

import torch

batch_size = 4096
num_classes = 32768

WORKLOADS = [
    {"name": "4096x32768", "params": {"batch_size": 4096, "num_classes": 32768}, "split": "search"},
    {"name": "16384x8192", "params": {"batch_size": 16384, "num_classes": 8192}, "split": "search"},
    {"name": "2048x50257", "params": {"batch_size": 2048, "num_classes": 50257}, "split": "heldout"},
    {"name": "smoke", "params": {"batch_size": 64, "num_classes": 1000}, "split": "smoke"},
]


class Model(torch.nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(predictions, targets)


def get_inputs(batch_size: int = batch_size, num_classes: int = num_classes) -> list[torch.Tensor]:
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs() -> list[object]:
    return []
