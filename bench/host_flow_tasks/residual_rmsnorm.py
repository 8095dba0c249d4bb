"""KernelBench-style problem (a fixture of bench/host_flow.py): a residual add followed by RMSNorm, bf16 in and
out. Returns the normalised rows and the new residual stream (x + residual), as a transformer block carries it."""

import torch

batch_size = 8192
hidden = 4096

# bf16 outputs: the usual bf16 tolerance (an fp32-accumulated kernel and the library differ in the last bits)
TOLERANCE = {"atol": {"bfloat16": 2e-2}, "rtol": {"bfloat16": 2e-2}}

WORKLOADS = [
    {"name": "8192x4096", "params": {"batch_size": 8192, "hidden": 4096}, "split": "search"},
    {"name": "32768x2048", "params": {"batch_size": 32768, "hidden": 2048}, "split": "search"},
    {"name": "4096x8192", "params": {"batch_size": 4096, "hidden": 8192}, "split": "heldout"},
    {"name": "smoke", "params": {"batch_size": 48, "hidden": 640}, "split": "smoke"},
]


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + residual
        hf = h.float()
        rstd = torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (hf * rstd * weight.float()).to(x.dtype), h


def get_inputs(batch_size: int = batch_size, hidden: int = hidden) -> list[torch.Tensor]:
    x = torch.randn(batch_size, hidden, dtype=torch.bfloat16)
    residual = torch.randn(batch_size, hidden, dtype=torch.bfloat16)
    weight = 1.0 + 0.1 * torch.randn(hidden, dtype=torch.bfloat16)
    return [x, residual, weight]


def get_init_inputs() -> list[float]:
    return [1e-6]
