"""benchmark_batch: several candidates of one search benchmarked in one call, each recorded as `benchmark` records it.

A batch is what a host or the driver has when it wrote several implementations at once (the driver's `branching`).
Every item is checked first (an item refused says why; the others go on), then all are evaluated at once: the
sandbox compiles each candidate statically as soon as it arrives, a machine with several worker slots (GPUs, or CPU
workers) runs them side by side, and on one GPU each waits for the slot in the batch's order, so that no timing ever
overlaps another candidate's GPU work. The results are recorded in the batch's order; an item on an intent whose
refine phase the items before it ended is returned evaluated but not recorded, with the reason.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import Field

from ksearch.tools import benchmark as one
from ksearch.tools.common import CandidateRef, Progress, summarize
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.run_correctness import EvaluationOut
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Evaluation, NodeRef

MAX_ITEMS = 8


class BatchItem(ToolIn):
    candidate: CandidateRef = Field(
        description="The candidate: exactly one of its `source`, a `candidate_id`, `seed: true` or `solution_json`, "
        "with its `language`"
    )
    node_id: NodeRef | None = Field(
        None, description="Intent this candidate implements (its id or handle): records the attempt there"
    )
    base_attempt_id: int | None = Field(
        None, ge=1, description="Attempt whose code this one modifies (default as in benchmark)"
    )


class BenchmarkBatchIn(ToolIn):
    search: int | str = Field(description="Search id or name: every item is recorded as an attempt of it")
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_ITEMS, description="The candidates, in order")
    workloads: list[str] | None = Field(
        None, max_length=64, description="Workload names; default: the search set"
    )
    trials: int = Field(3, ge=1, le=20, description="Fresh random inputs per workload")
    author: str = Field(
        "human",
        min_length=1,
        max_length=80,
        description="human | llm:<model> | tuner (a seed item is 'seed')",
    )


class BatchResult(ToolModel):
    index: int = Field(description="The item's place in the batch, from 0")
    result: EvaluationOut | None = Field(None, description="Its evaluation and, where recorded, its attempt")
    recorded: bool = Field(False, description="Whether it was recorded as an attempt")
    refused: str = Field("", description="Why it was not evaluated or not recorded (empty when it was both)")


class BatchOut(ToolModel):
    results: list[BatchResult]
    seconds: float = Field(description="Wall time of the batch, from its first check to its last record")
    summary: str = Field(description="Each item's outcome in a line, and the batch's pace")
    next: str = Field("", description="What to do next in the loop")


async def benchmark_batch(ws: Workspace, inp: BenchmarkBatchIn, progress: Progress | None = None) -> BatchOut:
    t0 = time.perf_counter()
    n = len(inp.items)
    results = [BatchResult(index=i) for i in range(n)]
    jobs: dict[int, one.Prepared] = {}
    for i, item in enumerate(inp.items):
        single = one.BenchmarkIn(
            search=inp.search,
            candidate=item.candidate,
            node_id=item.node_id,
            base_attempt_id=item.base_attempt_id,
            workloads=inp.workloads,
            trials=inp.trials,
            author=inp.author,
        )
        try:
            jobs[i] = await one.prepare(ws, single)
        except (ToolFailure, NotFound) as e:
            results[i].refused = f"not evaluated: {e}"
    if not jobs:
        raise ToolFailure(
            "no item of the batch could be evaluated:\n"
            + "\n".join(f"item {r.index}: {r.refused.removeprefix('not evaluated: ')}" for r in results)
        )

    async def run(i: int) -> Evaluation:
        async def said(what: str, frac: float) -> None:
            if progress is not None:
                await progress(f"[{i + 1}/{n}] {what}", (i + frac) / n)

        return await one.evaluate(ws, jobs[i], said)

    evals = dict(zip(jobs, await asyncio.gather(*(run(i) for i in jobs)), strict=True))
    for i, job in jobs.items():
        ev = evals[i]
        if job.node is not None and job.search is not None and job.refine is not None:
            # the items before it may have ended the phase (the cap, the stagnation window): recorded on the phase
            # as it stands now, or not at all
            try:
                job.refine = await one.refinable(ws, job.search, await ws.store.get_node(job.node.id))
            except ToolFailure as e:
                cand = job.candidate.id if job.candidate is not None else ""
                results[i].result = EvaluationOut(candidate_id=cand, summary=summarize(ev), evaluation=ev)
                results[i].refused = f"evaluated, not recorded: {e}"
                continue
        out = await one.finish(ws, job, ev)
        results[i].result, results[i].recorded = out, out.attempt_id is not None
    seconds = time.perf_counter() - t0
    search = next(iter(jobs.values())).search
    assert search is not None  # `search` is required
    return BatchOut(
        results=results,
        seconds=seconds,
        summary=_summary(results, seconds),
        next=(await loop.loop_state(ws, search.id)).next,  # the loop's step after the whole batch
    )


def _summary(results: list[BatchResult], seconds: float) -> str:
    lines = []
    for r in results:
        if r.result is None:
            lines.append(f"item {r.index}: {r.refused}")
            continue
        ev = r.result.evaluation
        where = f"attempt #{r.result.attempt_id}" if r.recorded else r.refused
        speed = f", {ev.speedup_vs_eager:.2f}x vs eager" if ev.status == "ok" and ev.speedup_vs_eager else ""
        lines.append(f"item {r.index}: {ev.status}{speed}, candidate {r.result.candidate_id}; {where}")
    lines.append(pace_line(results, seconds))
    return "\n".join(lines)


def pace_line(results: list[BatchResult], seconds: float) -> str:
    """The batch's pace: how many of its items were evaluated, in what wall time."""
    done = sum(r.result is not None for r in results)
    return f"{done} of {len(results)} evaluated in {seconds:.1f} s ({60 * done / seconds:.1f} per minute)"
