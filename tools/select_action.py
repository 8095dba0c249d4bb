"""select_action: phase 1 — the next intent to work on, by the search's selection rule, with the reason."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.workspace import Workspace
from worldmodel.models import Node
from worldmodel.select import select_action as _select


class SelectActionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search: int | str = Field(description="Search id or name")


class SelectionOut(BaseModel):
    node: Node | None
    reason: str
    base_attempt_id: int | None = None  # best attempt on the path to the node: the code to start from
    base_candidate_id: str | None = None


async def select_action(ws: Workspace, inp: SelectActionIn) -> SelectionOut:
    s = await ws.search(inp.search)
    sel = await _select(ws.store, s.id)
    if sel.node_id is None:
        return SelectionOut(node=None, reason=sel.reason)
    node = await ws.store.get_node(sel.node_id)
    base = await base_attempt(ws, node)
    return SelectionOut(
        node=node,
        reason=sel.reason,
        base_attempt_id=base.id if base else None,
        base_candidate_id=base.candidate_id if base else None,
    )


async def base_attempt(ws: Workspace, node: Node):  # -> Attempt | None
    """The code an intent starts from: the one it names, else the best attempt on its path to the root."""
    if node.base_attempt_id is not None:
        return await ws.store.get_attempt(node.base_attempt_id)
    cur: Node | None = node
    while cur is not None:
        if cur.best_attempt_id is not None:
            return await ws.store.get_attempt(cur.best_attempt_id)
        cur = await ws.store.get_node(cur.parent_id) if cur.parent_id is not None else None
    return None
