"""On a machine without a GPU, a workload too large for a worker's host memory is refused before it runs: a live
host asked for KernelBench softmax's 4096x393216 shape on the CPU and, 26 s later, read "INCORRECT on default:
crash" (the worker's memory limit), as if the kernel were at fault. Real store, real sandbox (CPU mode); the facts
come from a fake-tensor run, so nothing of that size is ever allocated."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolkit import Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.run_correctness import RunCorrectnessIn, run_correctness
from ksearch.tools.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]

HUGE = '''"""Softmax over 8192 rows of 262144 (8 GiB of float32 inputs)."""

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(8192, 262144)]


def get_init_inputs() -> list[object]:
    return []
'''
KERNEL = (
    "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n"
)


async def test_a_workload_beyond_a_workers_memory_is_refused_and_smoke_still_runs(
    ws: Workspace, tmp_path: Path, snapshot: Snapshot
) -> None:
    task = tmp_path / "huge_softmax.py"
    task.write_text(HUGE)
    s = await create_search(ws, CreateSearchIn(task=str(task), name="huge"))
    big = next(w.name for w in ws.search_task(s).workloads if w.split != "smoke")
    before = await snapshot()
    for call in (
        run_correctness(
            ws, RunCorrectnessIn(search="huge", candidate=CandidateRef(source=KERNEL), workloads=[big])
        ),
        benchmark(ws, BenchmarkIn(search="huge", candidate=CandidateRef(source=KERNEL), workloads=[big])),
    ):
        with pytest.raises(ToolFailure) as info:
            await call
        said = str(info.value)
        assert f"workload {big!r} needs at least 24.0 GiB of host memory" in said, said
        assert "nothing was run or recorded" in said and "smoke workload" in said
    assert await snapshot() == before
    ok = await run_correctness(ws, RunCorrectnessIn(search="huge", candidate=CandidateRef(source=KERNEL)))
    assert ok.evaluation.correctness and ok.evaluation.correctness[0].workload != big
