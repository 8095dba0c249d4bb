"""The loop's phase prompts, filled from the store: served as MCP prompts and returned by the tools.

An assistant that follows these gets the same context and instructions ksearch's own driver gives
its model: analyse and seed, implement an intent, reflect and edit.
"""

from __future__ import annotations

from ksearch.tools.bank import ops as bank
from ksearch.tools.common import node_in
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.prompting import contexts
from ksearch.tools.prompting.fill import Phase, render_prompt
from ksearch.tools.prompting.phase_models import InitContext, UpdateContext, WriteContext
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Node

INIT_HINT = (
    "When done, call propose_intents with these intents and edit_tree (op=update on the root) to store your "
    "analysis as the root's notes. Then call select_action."
)
WRITE_HINT = (
    "Put your explanation and prediction in the module's docstring. Then check it with compile_kernel and "
    "run_correctness if you like, and record it with benchmark (node_id={node}): its result says whether to "
    "write another implementation or to reflect."
)
UPDATE_HINT = (
    "Apply your answer over MCP: `edits` with edit_tree (updates, prunes, moves, re-bases), `new_intents` with "
    "propose_intents (your reflection as its `reason`, or in an intent's notes); a refused edit comes back "
    "with the reason. Next: {next}"
)
# the reflect prompt after finish_intent applied the edits it was given: sent again, they would be logged twice
UPDATE_APPLIED_HINT = (
    "{applied} Apply further changes only if this prompt gives you a new reason: `edits` with edit_tree, "
    "`new_intents` with propose_intents. Next: {next}"
)


def update_hint(applied: loop.Applied | None, next_step: str) -> str:
    """The reflect prompt's last paragraph: how to apply the answer, or that it was applied already."""
    if applied is None:
        return UPDATE_HINT.format(next=next_step)
    return UPDATE_APPLIED_HINT.format(applied=applied.text(), next=next_step)


def prompt_text(phase: Phase, ctx: InitContext | WriteContext | UpdateContext, hint: str) -> str:
    system, user = render_prompt(phase, ctx)
    return f"{system}\n\n{user}\n\n{hint}"


async def init_context(ws: Workspace, search: int | str) -> InitContext:
    s = await ws.search(search)
    root = await ws.store.root(s.id)
    seed, _ = await contexts.base_source(ws, s, root)
    brief = await contexts.task_brief(
        ws, s
    )  # first: it reads the task's facts, which the bank's match uses too
    lessons, ranked = await bank.lessons_for(ws, s, "analyse")
    return InitContext(
        task=brief,
        seed_source=seed,
        tunables=contexts.tunables_of(seed),
        tree_view=await contexts.tree_view(ws, s.id),
        bank=lessons,
        bank_settings=bank.winning_settings(ranked),
    )


async def analyse_kernel(ws: Workspace, search: int | str) -> str:
    return prompt_text("init", await init_context(ws, search), INIT_HINT)


async def _node(ws: Workspace, search_id: int, node_id: int | str) -> Node:
    node = await node_in(ws, await ws.search(search_id), node_id)
    if node.kind == "root":
        raise ToolFailure(f"node {node.id} is the root, not an intent: give the id or handle of an intent")
    return node


async def _default_node(ws: Workspace, search_id: int, status: str) -> Node:
    """The intent a prompt without node_id is about: the one being refined, or the one finished last."""
    nodes = [n for n in await ws.store.list_nodes(search_id) if n.kind == "intent"]
    if status == "active":
        chosen = [n for n in nodes if n.status == "active"]
    else:
        fin = await loop.last_finished(ws, search_id)
        chosen = [n for n in nodes if n.id == fin] if fin is not None else []
    if len(chosen) != 1:
        what = "being refined" if status == "active" else "finished in this search yet"
        raise ToolFailure(f"give node_id: {'no intent is' if not chosen else 'several intents are'} {what}")
    return chosen[0]


async def implement_intent(ws: Workspace, search: int | str, node_id: int | str | None = None) -> str:
    s = await ws.search(search)
    node = await (_node(ws, s.id, node_id) if node_id is not None else _default_node(ws, s.id, "active"))
    ctx = await contexts.write_context(ws, s, node)
    return prompt_text("write_code", ctx, WRITE_HINT.format(node=node.id))


async def reflect_and_edit(ws: Workspace, search: int | str, node_id: int | str | None = None) -> str:
    s = await ws.search(search)
    node = await (_node(ws, s.id, node_id) if node_id is not None else _default_node(ws, s.id, "finished"))
    ctx = await contexts.update_context(ws, s, node)
    applied = await loop.applied_with_finish(ws, s.id, node.id)
    return prompt_text("update", ctx, update_hint(applied, (await loop.loop_state(ws, s.id)).next))
