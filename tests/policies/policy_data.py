"""Shared test data for the policy tests: a tunable seed, a reference, valid answers per phase."""

from __future__ import annotations

from ksearch.server.driver.policies.base import TaskBrief

SEED = '''"""Row softmax, one program per row (plain seed)."""
import torch
import triton
import triton.language as tl

TUNABLES = {"BLOCK_SIZE": [256, 512, 1024, 2048], "NUM_WARPS": [2, 4, 8], "NUM_STAGES": [1, 2, 3]}
BLOCK_SIZE = 512  # columns per program
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


class ModelNew(torch.nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS,
                                      num_stages=NUM_STAGES)
        return y
'''

REFERENCE = """import torch


class Model(torch.nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [1]
"""


def brief(bound: str = "memory", language: str = "triton") -> TaskBrief:
    return TaskBrief(
        name="softmax",
        title="Row softmax",
        op="softmax",
        dtype="float32",
        bound=bound,
        description="Softmax over the last dimension of a 2-D fp32 tensor.",
        reference_source=REFERENCE,
        workloads=["m4096_n8192: {'M': 4096, 'N': 8192}"],
        language=language,  # type: ignore[arg-type]
        hardware="NVIDIA H200: 132 SMs, 4.3 TB/s measured copy bandwidth",
    )


VALID_INIT = {
    "analysis": "Softmax is memory-bound: 2 passes over 128 MiB.",
    "intents": [
        {
            "title": "fuse max and sum into one online pass",
            "priority": 0.8,
            "difficulty": 2,
            "expected_speedup": 1.5,
        },
        {"title": "vectorise loads to 128-bit", "priority": 0.5, "difficulty": 2},
    ],
}
VALID_CODE = {"source": SEED.replace("BLOCK_SIZE = 512", "BLOCK_SIZE = 1024"), "explanation": "wider rows"}
VALID_UPDATE = {
    "reflection": "Matched the prediction within noise.",
    "new_intents": [{"title": "process two rows per program", "priority": 0.6, "parent_id": 2}],
    "edits": [{"op": "update", "node_id": 3, "priority": 0.7, "reason": "bandwidth still below roofline"}],
}
