"""run_correctness: run a candidate against the reference on fresh inputs, per workload."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.common import (
    CandidateRef,
    Progress,
    check_workloads,
    eval_settings,
    resolve_candidate,
    summarize,
    task_for,
)
from tools.workspace import Workspace
from worldmodel.models import Evaluation


class RunCorrectnessIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search: int | str | None = Field(None, description="Search id or name (or give `task`)")
    task: str | None = Field(
        None, max_length=1000, description="Task name or path, for a free-standing check"
    )
    candidate: CandidateRef
    workloads: list[str] | None = Field(
        None, max_length=64, description="Workload names; default: the search set"
    )
    trials: int = Field(3, ge=1, le=20, description="Fresh random inputs per workload")


class EvaluationOut(BaseModel):
    candidate_id: str
    summary: str
    evaluation: Evaluation
    attempt_id: int | None = None


async def run_correctness(
    ws: Workspace, inp: RunCorrectnessIn, progress: Progress | None = None
) -> EvaluationOut:
    s, task = await task_for(ws, inp.search, inp.task)
    check_workloads(task, inp.workloads)
    cand = await resolve_candidate(ws, inp.candidate)
    settings = await eval_settings(ws, s, task, inp.workloads, inp.trials)
    ev = await (await ws.sandbox()).evaluate(cand, task, settings, timing=False, progress=progress)
    return EvaluationOut(candidate_id=cand.id, summary=summarize(ev), evaluation=ev)
