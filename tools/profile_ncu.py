"""profile_ncu: Nsight Compute on one workload of a candidate: a few numbers and ncu's own advice."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.common import CandidateJob, resolve_candidate, task_for
from ksearch.tools.errors import ToolFailure
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
    prof = await (await ws.sandbox()).profile(cand, task, wl)
    return ProfileOut(candidate_id=cand.id, profile=prof)
