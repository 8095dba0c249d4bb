"""compile_kernel, called as a function on the real sandbox: without a GPU a Triton candidate is dry-run on the
CPU and compiled for sm_90 (registers, spills, shared memory, occupancy); a candidate that does not compile
gets a report saying why; bad arguments are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolkit import NO_MODELNEW, NOT_PYTHON, ROW_SUM_SEED, Snapshot

from ksearch.gpu.task import TaskError
from ksearch.tools.common import CandidateRef
from ksearch.tools.compile_kernel import CompileKernelIn, compile_kernel
from ksearch.tools.errors import ToolFailure
from ksearch.tools.workspace import Workspace

GPUMODE = Path(__file__).parents[1] / "tasks" / "fixtures" / "gpumode" / "pairmix"
pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


@pytest.mark.slow
async def test_the_seed_compiles_for_sm90_with_its_resources(ws: Workspace, snapshot: Snapshot) -> None:
    out = await compile_kernel(ws, CompileKernelIn(task="row_sum", candidate=CandidateRef(seed=True)))
    r = out.report
    assert r.ok and r.language == "triton" and "sm_90" in r.mode and "no GPU: compiled, not run" in r.mode
    [k] = r.kernels
    assert k.name == "_row_sum" and k.registers is not None and k.registers > 0
    assert (k.spill_stores_bytes, k.spill_loads_bytes) == (0, 0) and k.num_warps == 4
    assert k.occupancy is not None and k.occupancy.arch == "sm_90" and 0 < k.occupancy.occupancy <= 1
    assert "BLOCK_N=1024" in (k.config or "")  # launched as the dry run on the smoke workload launched it
    stored = await ws.store.get_candidate(out.candidate_id)
    assert (stored.source, stored.language) == (ROW_SUM_SEED, "triton")
    assert (await snapshot())["attempts"] == []


async def test_a_candidate_that_does_not_compile_gets_a_report_saying_why(
    ws: Workspace, tiny_task: str
) -> None:
    out = await compile_kernel(
        ws, CompileKernelIn(task=tiny_task, candidate=CandidateRef(source=NO_MODELNEW))
    )
    assert not out.report.ok and out.report.kernels == []
    errors = [d.message for d in out.report.diagnostics if d.severity == "error"]
    assert errors and "the module defines none of ModelNew" in errors[0]


async def test_a_gpu_mode_candidate_is_told_to_define_custom_kernel_not_modelnew(ws: Workspace) -> None:
    """The compile report names the entry point of the task's own kind."""
    out = await compile_kernel(
        ws, CompileKernelIn(task=str(GPUMODE), candidate=CandidateRef(source=NO_MODELNEW))
    )
    [err] = [d.message for d in out.report.diagnostics if d.severity == "error"]
    assert "defines none of custom_kernel; a Python module defining `custom_kernel(data)`" in err, err
    assert "ModelNew" not in err


async def test_bad_arguments_are_refused_writing_nothing(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    before = await snapshot()
    with pytest.raises(TaskError, match="unknown task 'row-sum': not a built-in"):
        await compile_kernel(ws, CompileKernelIn(task="row-sum", candidate=CandidateRef(source=ROW_SUM_SEED)))
    with pytest.raises(ToolFailure, match="does not parse as Python: line 3"):
        await compile_kernel(ws, CompileKernelIn(task=tiny_task, candidate=CandidateRef(source=NOT_PYTHON)))
    with pytest.raises(ToolFailure, match="has no cuda seed: it starts from the reference"):
        await compile_kernel(
            ws, CompileKernelIn(task=tiny_task, candidate=CandidateRef(seed=True, language="cuda"))
        )
    assert await snapshot() == before
