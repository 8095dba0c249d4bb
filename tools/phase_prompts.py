"""The driver's phase prompts, filled from the store, served as MCP prompts.

An assistant that follows these gets the same context and instructions ksearch's own driver gives
its model: analyse and seed, implement an intent, reflect and edit.
"""

from __future__ import annotations

from tools import contexts
from tools.errors import ToolFailure
from tools.phase_models import InitContext, UpdateContext, WriteContext
from tools.prompting import render_prompt
from tools.workspace import Workspace
from worldmodel.errors import NotFound

TOOL_HINT = {
    "init": "When done, call propose_intents with these intents and edit_tree to store your analysis as the "
    "root's notes.",
    "write_code": "Then call compile_kernel, run_correctness and benchmark with node_id={node} to record it.",
    "update": "Apply your answer with edit_tree (updates, prunes) and propose_intents (new intents).",
}


def _join(system: str, user: str, hint: str) -> str:
    return f"{system}\n\n{user}\n\n{hint}"


async def analyse_kernel(ws: Workspace, search: int | str) -> str:
    s = await ws.search(search)
    root = await ws.store.root(s.id)
    seed, _ = await contexts.base_source(ws, s, root)
    ctx = InitContext(
        task=await contexts.task_brief(ws, s),
        seed_source=seed,
        tunables=contexts.tunables_of(seed),
        tree_view=await contexts.tree_view(ws, s.id),
    )
    return _join(*render_prompt("init", ctx), TOOL_HINT["init"])


async def _node(ws: Workspace, search_id: int, node_id: int):  # -> Node
    try:
        node = await ws.store.get_node(node_id)
    except NotFound as e:
        raise ToolFailure(str(e)) from e
    if node.search_id != search_id:
        raise ToolFailure(f"node {node_id} is not in search {search_id}")
    return node


async def implement_intent(ws: Workspace, search: int | str, node_id: int) -> str:
    s = await ws.search(search)
    node = await _node(ws, s.id, node_id)
    src, base = await contexts.base_source(ws, s, node)
    attempts = await ws.store.list_attempts(s.id, node.id)
    last = attempts[-1] if attempts else None
    ctx = WriteContext(
        task=await contexts.task_brief(ws, s),
        intent_id=node.id,
        intent_title=node.title,
        intent_rationale=node.rationale,
        intent_params=node.params,
        base_source=src,
        base_summary=(await contexts.outcome_of(ws, base, None)).summary if base else "",
        feedback=(await contexts.outcome_of(ws, last, base)).summary if last else "",
        attempt_index=len(attempts),
        tunables=contexts.tunables_of(src),
        tree_view=await contexts.tree_view(ws, s.id),
    )
    return _join(*render_prompt("write_code", ctx), TOOL_HINT["write_code"].format(node=node.id))


async def reflect_and_edit(ws: Workspace, search: int | str, node_id: int) -> str:
    s = await ws.search(search)
    node = await _node(ws, s.id, node_id)
    _, base = await contexts.base_source(ws, s, node)
    attempts = await ws.store.list_attempts(s.id, node.id)
    best = await ws.store.best_attempt(s.id)
    ctx = UpdateContext(
        task=await contexts.task_brief(ws, s),
        round=s.round,
        intent_id=node.id,
        intent_title=node.title,
        intent_params=node.params,
        prediction=node.expected_speedup,
        outcomes=[await contexts.outcome_of(ws, a, base) for a in attempts],
        history=await contexts.history(ws, s.id),
        tree_view=await contexts.tree_view(ws, s.id),
        open_intents=contexts.open_intents(await ws.store.list_nodes(s.id)),
        best_speedup=best.speedup if best else None,
    )
    return _join(*render_prompt("update", ctx), TOOL_HINT["update"])
