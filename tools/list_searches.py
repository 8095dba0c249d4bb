"""list_searches: the searches in this database, with their best result so far."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs


class SearchRow(ToolModel):
    id: int
    name: str
    task: str
    status: str
    round: int
    policy: str
    attempts: int
    best_attempt_id: int | None
    best_speedup_vs_eager: float | None = Field(
        description="The best's geomean speedup vs eager over the search workloads (`best_workloads` of them)"
    )
    best_workloads: int | None = Field(None, description="How many workloads best_speedup_vs_eager covers")
    final_speedup_vs_eager: float | None = Field(
        None, description="After a final evaluation that kept the best: its speedup over every workload"
    )
    final_workloads: int | None = Field(None, description="How many workloads final_speedup_vs_eager covers")
    best: str = Field("", description="The best in words, naming the workloads each figure covers")


async def list_searches(ws: Workspace) -> list[SearchRow]:
    rows = []
    holders = await runs.holders(ws.store)  # a search whose run died reads as interrupted, not running
    for s in await ws.store.list_searches():
        speedups = await ws.store.attempt_speedups(s.id)  # id -> speedup: no evaluation JSON to load
        fig = await ws.records.best_figure(s)
        rows.append(
            SearchRow(
                id=s.id,
                name=s.name,
                task=s.task,
                status=runs.shown_status(s, holders.get(s.id)),
                round=s.round,
                policy=s.config.policy,
                attempts=len(speedups),
                best_attempt_id=s.best_attempt_id,
                best_speedup_vs_eager=speedups.get(s.best_attempt_id) if s.best_attempt_id else None,
                best_workloads=fig.workloads if fig else None,
                final_speedup_vs_eager=fig.final_speedup_vs_eager if fig else None,
                final_workloads=fig.final_workloads if fig else None,
                best=fig.text() if fig else "",
            )
        )
    return rows
