"""get_tree: read a search's world-model tree (compact text for prompts, JSON, or a Mermaid diagram)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.render import MIN_BUDGET, render_search, render_tree, tree_json, tree_mermaid


class GetTreeIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    format: Literal["text", "json", "mermaid"] = Field(
        "text",
        description="text: compact view for reading (notes, best path, open frontier; within budget_chars) | "
        "json: every node and its attempts as data | mermaid: a flowchart of the tree",
    )
    budget_chars: int = Field(6000, ge=500, le=200_000, description="Hard size budget of the text view")


class TreeOut(ToolModel):
    search_id: int
    search_name: str
    round: int = Field(description="Rounds started so far")
    nodes: int = Field(
        description="How many nodes the tree has (the nodes themselves are under `tree.nodes`)"
    )
    best_attempt_id: int | None = Field(description="The search's best attempt (None: none yet)")
    best_lost: str = Field(
        "", description="When the search's best failed the final evaluation: which, why, and what replaced it"
    )
    text: str | None = Field(None, description="format text or mermaid: the view")
    tree: dict[str, Any] | None = Field(
        None,
        description="format json: {root_id, best_node_id, best_path (node ids from the root to the best node), "
        "counts (nodes by status), nodes: [every node as stored (id, parent_id, kind, title, status, priority, "
        "difficulty, expected_speedup, rationale, notes, best_attempt_id, pinned, vetoed, ...) plus best_speedup "
        "(its best attempt's geomean speedup vs eager; null when none or CPU-interpreted), best_cpu_interpreter "
        "(its best is correct but timed in the CPU interpreter) and children (child ids)]}",
    )


async def get_tree(ws: Workspace, inp: GetTreeIn) -> TreeOut:
    s = await ws.search(inp.search)
    nodes = await ws.store.list_nodes(s.id)
    attempts = await ws.store.attempt_speedups(s.id)  # id -> speedup: all the views need
    out = TreeOut(
        search_id=s.id, search_name=s.name, round=s.round, nodes=len(nodes), best_attempt_id=s.best_attempt_id
    )
    verdict = await ws.store.final_verdict(s.id)
    out.best_lost = verdict.note() if verdict is not None else ""
    if inp.format == "json":
        out.tree = tree_json(nodes, attempts, best_attempt_id=s.best_attempt_id)
    elif inp.format == "mermaid":
        out.text = tree_mermaid(nodes, attempts)
    else:
        note = out.best_lost[: inp.budget_chars - MIN_BUDGET - 1]  # the budget stays hard
        budget = inp.budget_chars - (len(note) + 1 if note else 0)
        out.text = render_tree(
            nodes,
            attempts,
            budget_chars=budget,
            best_attempt_id=s.best_attempt_id,
            no_result=verdict is not None and s.best_attempt_id is None and verdict.current(s.round),
            final=verdict.final_figure(s.best_attempt_id) if verdict is not None else None,
        )
        if note:
            out.text = f"{note}\n{out.text}"
    return out


async def tree_text(ws: Workspace, search_id: int, budget_chars: int = 6000) -> str:
    """The search's tree as `ksearch tree` prints it: a title line (name, task, round, shown status), the note
    of a best that failed the final evaluation, then the tree, all within `budget_chars` (ValueError below
    MIN_BUDGET + 1)."""
    return await render_search(ws.store, search_id, budget_chars)
