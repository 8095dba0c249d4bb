"""list_searches: the searches in this database, with their best result so far."""

from __future__ import annotations

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
    best_speedup_vs_eager: float | None


async def list_searches(ws: Workspace) -> list[SearchRow]:
    rows = []
    holders = await runs.holders(ws.store)  # a search whose run died reads as interrupted, not running
    for s in await ws.store.list_searches():
        speedups = await ws.store.attempt_speedups(s.id)  # id -> speedup: no evaluation JSON to load
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
            )
        )
    return rows
