"""profile_ncu: Nsight Compute on one workload of a candidate: a few numbers and ncu's own advice."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.common import CandidateJob, resolve_candidate, sandbox_of, task_for
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.call_clock import part
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import ProfileSummary


class ProfileIn(CandidateJob):
    workload: str | None = Field(
        None, max_length=200, description="Workload name; default: the first search one"
    )


class ProfileOut(ToolModel):
    candidate_id: str
    profile: ProfileSummary


async def profile_ncu(ws: Workspace, inp: ProfileIn) -> ProfileOut:
    _, task = await task_for(ws, inp.search, inp.task)
    names = [w.name for w in task.workloads]
    wl = inp.workload or task.by_split("search")[0].name
    if wl not in names:
        raise ToolFailure(
            f"workload: unknown workload {wl!r} for task {task.name!r}; it has: {', '.join(names)}"
        )
    cand = await resolve_candidate(ws, inp.candidate, task)
    sb = await sandbox_of(ws)
    # the sandbox reports no phases here: a wait for a worker is inside this part
    with part("profile", f"profiling: {wl}"):
        prof = await sb.profile(cand, task, wl)
    return ProfileOut(candidate_id=cand.id, profile=prof)
