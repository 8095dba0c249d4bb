"""profile_ncu, called as a function: without a GPU it says that profiling needs one; an unknown workload is
refused naming the task's workloads, before the sandbox is asked."""

from __future__ import annotations

import pytest
from toolkit import ROW_SUM_SEED, Snapshot

from ksearch.gpu.sandbox.api import SandboxError
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.profile_ncu import ProfileIn, profile_ncu
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


async def test_without_a_gpu_profiling_is_refused_saying_why(ws: Workspace, snapshot: Snapshot) -> None:
    await create_search(ws, CreateSearchIn(task="row_sum", name="rs"))
    before = await snapshot()
    with pytest.raises(SandboxError) as e:
        await profile_ncu(ws, ProfileIn(search="rs", candidate=CandidateRef(seed=True)))
    assert str(e.value) == "profiling needs a GPU; this machine has none (CPU interpreter mode)"
    after = await snapshot()
    assert after["attempts"] == before["attempts"] == [] and after["nodes"] == before["nodes"]


async def test_an_unknown_workload_or_search_is_refused(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    before = await snapshot()
    with pytest.raises(ToolFailure) as e:
        await profile_ncu(
            ws, ProfileIn(task=tiny_task, candidate=CandidateRef(source=ROW_SUM_SEED), workload="big")
        )
    assert (
        str(e.value)
        == "workload: unknown workload 'big' for task 'tiny_rows'; it has: wide, tall, heldout, smoke"
    )
    with pytest.raises(NotFound, match="no search named 'rs'"):
        await profile_ncu(ws, ProfileIn(search="rs", candidate=CandidateRef(source=ROW_SUM_SEED)))
    assert await snapshot() == before
