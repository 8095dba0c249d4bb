"""run_correctness: run a candidate against the reference on fresh inputs, per workload."""

from __future__ import annotations

from pydantic import BaseModel

from tools.common import (
    MeasuredJob,
    Progress,
    check_workloads,
    eval_settings,
    resolve_candidate,
    summarize,
    task_for,
)
from tools.workspace import Workspace
from worldmodel.models import Evaluation


class RunCorrectnessIn(MeasuredJob):
    """Check a candidate (no timing)."""


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
