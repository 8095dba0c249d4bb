"""run_correctness: run a candidate against the reference on fresh inputs, per workload."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.common import (
    MeasuredJob,
    Progress,
    check_workloads,
    eval_settings,
    refuse_oversized,
    refuse_without_gpu,
    resolve_candidate,
    sandbox_of,
    summarize,
    task_for,
)
from ksearch.tools.loop.call_clock import EVALUATION, part
from ksearch.tools.loop.state import RefineState
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Evaluation


class RunCorrectnessIn(MeasuredJob):
    """Check a candidate (no timing)."""


class EvaluationOut(ToolModel):
    candidate_id: str = Field(description="Id to refer to this candidate again instead of resending source")
    summary: str = Field(description="The evaluation in a few lines: status, errors, numbers")
    evaluation: Evaluation
    attempt_id: int | None = Field(None, description="The attempt recorded (benchmark on a search)")
    base_attempt_id: int | None = Field(None, description="The attempt it was recorded as building on")
    base_assumed: str = Field(
        "",
        description="When no base_attempt_id was given: which attempt was taken as its base and why (the phase's "
        "correct code it is closest to); empty when the caller named the base",
    )
    refine: RefineState | None = Field(None, description="The intent's refine phase after this attempt")
    next: str = Field("", description="What to do next in the loop")


async def run_correctness(
    ws: Workspace, inp: RunCorrectnessIn, progress: Progress | None = None
) -> EvaluationOut:
    s, task = await task_for(ws, inp.search, inp.task)
    check_workloads(task, inp.workloads)
    await refuse_without_gpu(ws, task)
    await refuse_oversized(ws, task, inp.workloads or [])  # the defaults without a GPU are the smoke ones
    cand = await resolve_candidate(ws, inp.candidate, task)
    settings = await eval_settings(ws, s, task, inp.workloads, inp.trials)
    sb = await sandbox_of(ws)
    with part(EVALUATION, "evaluating"):
        ev = await sb.evaluate(cand, task, settings, timing=False, progress=progress)
    return EvaluationOut(candidate_id=cand.id, summary=summarize(ev), evaluation=ev)
