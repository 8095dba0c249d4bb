"""finish_intent: end an intent's refine phase — close it (`closed` with a correct attempt, else `failed`;
`open` again when an attempt was inconclusive) and hand back what phase 3 (update) reflects on, as the
reflect prompt."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools import contexts, loop
from ksearch.tools.common import node_in
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import LoopState, RefineState
from ksearch.tools.phase_models import UpdateContext
from ksearch.tools.phase_prompts import UPDATE_HINT, prompt_text
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Node, NodeStatus, Search


class FinishIntentIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    node_id: int | None = Field(
        None, ge=1, description="The intent being refined; default: the search's one active intent"
    )


class FinishOut(ToolModel):
    node: Node = Field(
        description="The intent, now closed (it has a correct attempt), failed, or open again (no correct "
        "attempt, but one the evaluator could not judge: the CPU interpreter ran out of time)"
    )
    refine: RefineState = Field(description="How its refine phase ended")
    reflect_prompt: str = Field(description="Phase 3: what to reflect on and how to edit the tree")
    loop: LoopState
    next: str


async def close_refine(ws: Workspace, s: Search, node: Node) -> tuple[Node, loop.RefineState, UpdateContext]:
    """Close the claimed intent and build the update context (the driver's and a host's phase 3 input)."""
    refine = await loop.refine_state(ws, s, node)
    atts = await loop.phase_attempts(ws, node)
    cur = await ws.store.get_node(node.id)
    if (
        cur.status == NodeStatus.active
        and cur.best_attempt_id is None
        and any(a.evaluation and a.evaluation.inconclusive for a in atts)
    ):
        # the evaluator could not judge an attempt (the CPU interpreter ran out of time): the idea was
        # not shown to fail, so it is released (open), not failed
        closed = await ws.store.set_node_status(node.id, "open")
    else:
        closed = await ws.store.close_node(node.id, "closed" if cur.best_attempt_id is not None else "failed")
    await loop.finished(ws, s, closed)
    return closed, refine, await contexts.update_context(ws, s, closed)


async def finish_intent(ws: Workspace, inp: FinishIntentIn) -> FinishOut:
    s = await ws.search(inp.search)
    node = await _active(ws, s, inp.node_id)
    node, refine, ctx = await close_refine(ws, s, node)
    state = await loop.loop_state(ws, s.id)
    return FinishOut(
        node=node,
        refine=refine,
        reflect_prompt=prompt_text("update", ctx, UPDATE_HINT.format(next=state.next)),
        loop=state,
        next=state.next,
    )


async def _active(ws: Workspace, s: Search, node_id: int | None) -> Node:
    if node_id is None:
        active = [n for n in await ws.store.list_nodes(s.id) if n.kind == "intent" and n.status == "active"]
        if len(active) != 1:
            raise ToolFailure(
                "no intent is being refined; claim one with select_action"
                if not active
                else f"several intents are being refined ({', '.join(f'#{n.id}' for n in active)}): give node_id"
            )
        return active[0]
    node = await node_in(ws, s, node_id)
    if node.status != "active":
        raise ToolFailure(
            f"intent #{node_id} is {node.status.value}, not being refined: only a claimed (active) intent "
            "can be finished"
        )
    return node
