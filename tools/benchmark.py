"""benchmark: compile, check and time a candidate; on a node, record the attempt there.

Recording is the only path that writes results (the store enforces it): the node's best attempt and
the search's best move only when the evaluator says the new attempt is correct and faster.
"""

from __future__ import annotations

from pydantic import Field

from tools.common import (
    MeasuredJob,
    Progress,
    check_workloads,
    eval_settings,
    resolve_candidate,
    summarize,
    task_for,
)
from tools.errors import ToolFailure
from tools.run_correctness import EvaluationOut
from tools.workspace import Workspace
from worldmodel.errors import NotFound
from worldmodel.models import Attempt, Evaluation


class BenchmarkIn(MeasuredJob):
    node_id: int | None = Field(
        None, ge=1, description="Intent this candidate implements: records the attempt there"
    )
    base_attempt_id: int | None = Field(None, ge=1, description="Attempt whose code this one modifies")
    profile: bool = Field(False, description="Also run Nsight Compute on the first workload (GPU only)")
    author: str = Field("human", min_length=1, max_length=80, description="human | llm:<model> | tuner")


async def benchmark(ws: Workspace, inp: BenchmarkIn, progress: Progress | None = None) -> EvaluationOut:
    s, task = await task_for(ws, inp.search, inp.task)
    if inp.node_id is not None:
        if s is None:
            raise ToolFailure("`node_id` needs `search`: an attempt is recorded on a node of a search")
        try:
            node = await ws.store.get_node(inp.node_id)
        except NotFound as e:
            raise ToolFailure(str(e)) from e
        if node.search_id != s.id:
            raise ToolFailure(f"node {inp.node_id} belongs to another search, not {s.name!r}")
        if node.status == "pruned" or node.vetoed:
            raise ToolFailure(
                f"node {inp.node_id} is {'vetoed' if node.vetoed else 'pruned'}; reopen it first"
            )
    if inp.base_attempt_id is not None:  # checked now: after the evaluation it would be too late to say
        if s is None:
            raise ToolFailure("`base_attempt_id` needs `search`: it names an attempt of that search")
        try:
            base = await ws.store.get_attempt(inp.base_attempt_id)
        except NotFound as e:
            raise ToolFailure(f"base_attempt_id: {e} in search {s.name!r}") from e
        if base.search_id != s.id:
            raise ToolFailure(
                f"base_attempt_id: attempt #{base.id} belongs to another search, not {s.name!r}"
            )
    check_workloads(task, inp.workloads)
    cand = await resolve_candidate(ws, inp.candidate)
    settings = await eval_settings(ws, s, task, inp.workloads, inp.trials)
    sb = await ws.sandbox()
    ev = await sb.evaluate(
        cand,
        task,
        settings,
        timing=True,
        profile_workload=settings.workloads[0] if inp.profile else None,
        progress=progress,
    )
    attempt_id = None
    if s is not None:
        att = await record(ws, s.id, inp.node_id, cand.id, ev, inp.base_attempt_id, s.round, inp.author)
        attempt_id = att.id
    return EvaluationOut(candidate_id=cand.id, summary=summarize(ev), evaluation=ev, attempt_id=attempt_id)


async def record(
    ws: Workspace,
    search_id: int,
    node_id: int | None,
    candidate_id: str,
    ev: Evaluation,
    base_attempt_id: int | None,
    round: int,
    author: str,
) -> Attempt:
    from gpu.compare import compare

    def better(a: Attempt, b: Attempt) -> bool:
        # Noise-aware: the new attempt replaces the best only when faster beyond measured spread.
        if b.evaluation is None or b.evaluation.status != "ok":
            return True
        return a.evaluation is not None and compare(a.evaluation, b.evaluation).faster

    return await ws.store.record_attempt(
        search_id,
        node_id,
        candidate_id,
        ev,
        base_attempt_id=base_attempt_id,
        round=round,
        author=author,
        better=better,
    )
