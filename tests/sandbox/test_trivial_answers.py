"""Candidates that return their input, zeros or a constant pass no task, even where the task's own inputs
(KernelBench's torch.rand) accept that answer: the real sandbox, CPU interpreter, KernelBench-shaped files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from tests.sandbox.conftest import candidate, settings

pytestmark = pytest.mark.anyio

KB = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "kernelbench"

HEAD = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
IDENTITY = HEAD + "        return x\n"
ZEROS = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def __init__(self, subtract_value):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return torch.zeros_like(x)\n"
)
# sees a negative input (the probe) and refuses, hoping to pass as the identity elsewhere
DODGES = (
    HEAD + "        if bool((x < 0).any()):\n            raise ValueError('no')\n        return x.clone()\n"
)
TORCH_RELU = HEAD + "        return torch.relu(x)\n"
# wrong above 1, but no trivial answer: the probe is no stricter correctness rule than the task's own
CLAMP01 = HEAD + "        return x.clamp(0.0, 1.0)\n"
TRITON_RELU = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y
"""


@pytest.fixture(scope="module")
def relu() -> Task:
    return load_task(str(KB / "l1_relu_rand.py"))


@pytest.fixture(scope="module")
def sub_relu() -> Task:
    return load_task(str(KB / "l2_sub_relu_rand.py"))


async def _correct(sandbox, task: Task, source: str):
    ev = await sandbox.correctness(candidate(source), task, settings("smoke", trials=2))
    return ev, ev.correctness[0]


@pytest.mark.slow
async def test_returning_the_input_fails_a_relu_task_on_rand_inputs(sandbox, relu) -> None:
    ev, c = await _correct(sandbox, relu, IDENTITY)
    assert ev.status == "incorrect" and c.kind == "degenerate", ev.error
    assert "input 0 unchanged on extra inputs with signed values" in c.message and "torch.rand" in c.message
    # the task's own trials passed: its rule accepted the identity on its own inputs
    assert any(f.startswith("degenerate_reference:") and "input 0 unchanged" in f for f in ev.flags)


@pytest.mark.slow
async def test_zeros_fail_where_the_reference_is_zero_on_the_tasks_inputs(sandbox, sub_relu) -> None:
    ev, c = await _correct(sandbox, sub_relu, ZEROS)
    assert ev.status == "incorrect" and c.kind == "degenerate", ev.error
    assert c.message.startswith("output 0 is all zeros on extra inputs with signed values")


async def test_refusing_signed_inputs_does_not_dodge_the_probe(sandbox, relu) -> None:
    ev, c = await _correct(sandbox, relu, DODGES)
    assert ev.status == "incorrect" and c.kind == "degenerate"
    assert "raised on extra inputs with signed values" in c.message and "ValueError" in c.message


async def test_kernels_and_real_computations_pass(sandbox, relu) -> None:
    kernel = await sandbox.correctness(candidate(TRITON_RELU), relu, settings("smoke", trials=2))
    assert kernel.status == "ok", kernel.error
    assert not kernel.pure_pytorch
    torch_op = await sandbox.correctness(candidate(TORCH_RELU), relu, settings("smoke", trials=2))
    assert torch_op.status == "ok" and torch_op.pure_pytorch  # correct, and labelled: no kernel of its own
    clamp = await sandbox.correctness(candidate(CLAMP01), relu, settings("smoke", trials=2))
    assert clamp.status == "ok", (
        clamp.error
    )  # judged by the task's rule; the probe rejects trivial answers only
