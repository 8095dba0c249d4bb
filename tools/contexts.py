"""Build what a policy (or an MCP prompt) sees from the store: the task brief, the tree view, outcomes.

The driver and the MCP prompts use these same builders, so an assistant following the prompts gets
exactly the information ksearch's own driver gives its model.
"""

from __future__ import annotations

from typing import Any

from gpu.tasks.tunables import TunableError, read_tunables
from tools.common import summarize
from tools.phase_models import AttemptOutcome, TaskBrief
from tools.select_action import base_attempt
from tools.workspace import Workspace
from worldmodel.models import Attempt, Node, Search
from worldmodel.render import render_tree

TREE_BUDGET = 6000


async def hardware_text(ws: Workspace) -> str:
    hw = await (await ws.sandbox()).hardware()
    facts = hw.model_dump(exclude_none=True)
    return "; ".join(f"{k}={v}" for k, v in facts.items())


async def task_brief(ws: Workspace, s: Search) -> TaskBrief:
    task = ws.task(s.task)
    src = task.source_path.read_text() if task.source_path.is_file() else ""
    return TaskBrief(
        name=task.name,
        title=task.title,
        op=task.op,
        dtype=task.dtype,
        bound=task.bound,
        description=task.description,
        reference_source=src,
        workloads=[f"{w.name}: {w.params}" for w in task.by_split("search")],
        language=s.config.language,
        hardware=await hardware_text(ws),
    )


def tunables_of(source: str) -> dict[str, list[Any]]:
    """The space a candidate declares (TUNABLES), or {} when it declares none or declares it badly."""
    try:
        return {name: t.values for name, t in read_tunables(source).items()}
    except TunableError:
        return {}


def params_of(source: str) -> dict[str, Any]:
    """The tunable values a candidate's source sets: what an attempt actually measured."""
    try:
        return {name: t.current for name, t in read_tunables(source).items()}
    except TunableError:
        return {}


async def tree_view(ws: Workspace, search_id: int, budget: int = TREE_BUDGET) -> str:
    s = await ws.search(search_id)
    nodes = await ws.store.list_nodes(search_id)
    attempts = await ws.store.attempt_speedups(search_id)
    return render_tree(nodes, attempts, budget_chars=budget, best_attempt_id=s.best_attempt_id)


async def base_source(ws: Workspace, s: Search, node: Node) -> tuple[str, Attempt | None]:
    """The code an intent starts from: the best attempt on its path, else the task's seed."""
    att = await base_attempt(ws, node)
    if att is not None:
        return (await ws.store.get_candidate(att.candidate_id)).source, att
    task = ws.task(s.task)
    seed = task.seeds.get(s.config.language)
    if seed is None:
        raise ValueError(f"task {task.name!r} has no {s.config.language} seed and no attempt to start from")
    return seed, None


def outcome(att: Attempt, source: str, base: Attempt | None) -> AttemptOutcome:
    ev = att.evaluation
    sp = att.speedup
    base_sp = base.speedup if base is not None else None
    return AttemptOutcome(
        attempt_id=att.id,
        node_id=att.node_id,
        params=params_of(source),
        status=ev.status if ev else "missing",
        speedup_vs_eager=sp,
        speedup_vs_base=(sp / base_sp) if (sp and base_sp) else None,
        summary=summarize(ev) if ev else "",
    )


async def history(ws: Workspace, search_id: int, limit: int = 40) -> list[AttemptOutcome]:
    out = []
    for a in (await ws.store.list_attempts(search_id))[-limit:]:
        o = await outcome_of(ws, a, None)
        o.summary = ""  # compact: the full feedback stays in the store
        out.append(o)
    return out


async def outcome_of(ws: Workspace, att: Attempt, base: Attempt | None) -> AttemptOutcome:
    return outcome(att, (await ws.store.get_candidate(att.candidate_id)).source, base)


def open_intents(nodes: list[Node]) -> list[dict[str, Any]]:
    return [
        {
            "id": n.id,
            "title": n.title,
            "priority": n.priority,
            "difficulty": n.difficulty,
            "params": n.params,
            "parent_id": n.parent_id,
        }
        for n in nodes
        if n.kind == "intent" and n.status == "open" and not n.vetoed
    ]
