"""finish_intent: end an intent's refine phase — close it (`closed` with a correct attempt, else `failed`;
`open` again when an attempt was inconclusive) and hand back what phase 3 (update) reflects on, as the
reflect prompt.

A host that has reflected already sends its reflection's `edits` and `new_intents` with the call: they are
applied right after the intent is closed, under edit_tree's and propose_intents' rules, in the same
transaction, so the call is all or nothing (worldmodel/finish.py): a refused item changes nothing, the intent
stays being refined, and the same call can be sent again, corrected."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, model_validator

from ksearch.tools.bank.record import record_quietly
from ksearch.tools.common import node_in
from ksearch.tools.edit_tree import with_reason
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.state import Applied, LoopState, RefineState
from ksearch.tools.prompting import contexts
from ksearch.tools.prompting.phase_models import UpdateContext
from ksearch.tools.prompting.phases import prompt_text, update_hint
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.claims import finish_record
from ksearch.worldmodel.errors import EditRejected, InvalidTransition, KsearchError
from ksearch.worldmodel.finish import Finished, finish_refine
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node, NodeRef, NodeStatus, Search


class FinishIntentIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    node_id: NodeRef | None = Field(
        None,
        description="The intent being refined (its id or handle); default: the search's one active intent",
    )
    edits: list[EditSpec] = Field(default_factory=list, max_length=100)
    """Your reflection's changes to existing nodes, as edit_tree takes them (update, move, prune, reopen, pin,
    unpin, veto, unveto), applied in order right after the intent is closed (they see its new status). All or
    nothing with the close and the new intents: a refused item changes nothing, the intent stays being refined"""
    new_intents: list[IntentSpec] = Field(default_factory=list, max_length=50)
    """Your reflection's new intents, as propose_intents takes them (each under its parent_id, default the
    root), added after the edits"""
    reason: str = Field("", max_length=2000)
    """Why (your reflection): kept in the edit log with each new intent, as propose_intents' reason, and with each
    edit that gives no `reason` of its own; given alone, with the intent's end (an entry `finish`)"""
    author: str = Field("human", min_length=1, max_length=80)
    """Who asks: human | llm:<model> (kept in the edit log with the edits and new intents)"""
    with_prompt: bool | None = None
    """Return phase 3's reflect prompt (often tens of KB). Default: only when the call brings no reflection
    (neither `edits` nor `new_intents`)"""

    @model_validator(mode="after")
    def _reason_goes_with_edits(self) -> FinishIntentIn:
        # an edit without a reason of its own is logged with the reflection's
        self.edits = with_reason(self.edits, self.reason)
        return self


class FinishOut(ToolModel):
    node: Node = Field(
        description="The intent, now closed (it has a correct attempt), failed, or open again (no correct "
        "attempt, but one the evaluator could not judge: the CPU interpreter ran out of time)"
    )
    refine: RefineState = Field(description="How its refine phase ended")
    applied: Applied | None = None
    """The `edits` and `new_intents` given, all applied (None: none were given)"""
    reflect_prompt: str = Field(
        description="Phase 3: what to reflect on and how to edit the tree; '' when not asked for (a call that "
        "brought its reflection gets none unless with_prompt is true)"
    )
    loop: LoopState
    next: str


async def close_refine(
    ws: Workspace, s: Search, node: Node, *, author: str = "human"
) -> tuple[Node, loop.RefineState, UpdateContext]:
    """Close the claimed intent and build the update context (the driver's and a host's phase 3 input)."""
    done, refine, _ = await end_refine(ws, s, node, author=author)
    return done.node, refine, await contexts.update_context(ws, s, done.node)


async def end_refine(
    ws: Workspace,
    s: Search,
    node: Node,
    *,
    edits: Sequence[EditSpec] = (),
    new_intents: Sequence[IntentSpec] = (),
    author: str = "human",
    reason: str = "",
) -> tuple[Finished, RefineState, Applied | None]:
    """End the claimed intent's refine phase, with the edits of its reflection when they are given (one
    transaction: refused edits leave everything as it was); the last item says what of them was applied.

    Whether the intent is still being refined is decided in that transaction: when another caller finished it
    first, this one is refused as a later caller is (`not_being_refined`), and nothing is written."""
    refine = await loop.refine_state(ws, s, node)
    atts = await loop.phase_attempts(ws, node)
    # the evaluator could not judge an attempt (the CPU interpreter ran out of time): without a correct attempt
    # the idea was not shown to fail, so it is released (open), not failed (a correct one closes it: the
    # transaction reads the node's best)
    inconclusive = any(a.evaluation and a.evaluation.inconclusive for a in atts)
    try:
        done = await finish_refine(
            ws.store,
            s.id,
            node.id,
            "open" if inconclusive else "failed",
            edits=edits,
            intents=new_intents,
            author=author,
            round=s.round,
            reason=reason,
        )
    except EditRejected as e:
        raise _refused(node, e, edits=len(edits)) from e
    except InvalidTransition as e:
        raise await not_being_refined(ws, s, node.id) from e
    except KsearchError:
        raise
    except ValueError as e:  # the batch as a whole was refused (a bad author), with the reason
        raise ToolFailure(f"finish_intent changed nothing: {e}") from e
    applied = (
        Applied(edits=len(done.edited), new_intents=[n.id for n in done.added])
        if edits or new_intents
        else None
    )
    await record_quietly(ws, s.id)  # what the intent taught, for the searches after this one
    return done, refine, applied


async def not_being_refined(ws: Workspace, s: Search, node_id: int) -> ToolFailure:
    """The refusal to finish an intent that is not being refined: already finished (how, when, by whom, when
    that was recorded), or never claimed; and what to do next."""
    node = await ws.store.get_node(node_id)
    record = await finish_record(ws.store, node_id)
    state = await loop.loop_state(ws, s.id)
    if record is not None and node.status.value == record.status != "active":
        what = f"intent #{node_id} was already finished ({record.describe()})"
    elif node.status in (NodeStatus.closed, NodeStatus.failed):
        what = f"intent #{node_id} was already finished ({node.status.value})"
    else:
        what = f"intent #{node_id} is {node.status.value}, not being refined"
    return ToolFailure(
        f"{what}: only a claimed (active) intent can be finished; nothing was changed. {state.next}"
    )


def _refused(node: Node, e: EditRejected, *, edits: int) -> ToolFailure:
    """A refused edit or new intent: what was not done, the way forward, and edit_tree's own problem lines."""
    if e.part == "edits":
        what, fix, tool = "no edit was applied", "the edits", "edit_tree"
    else:
        what, fix, tool = "no intent was added", "the new intents", "propose_intents"
        if edits:
            what += ", none of the edits was applied"
    return ToolFailure(
        f"`{e.part}` refused: {what}, and intent #{node.id} was not finished (it is still being refined; "
        f"nothing was changed). Correct {fix} and call finish_intent again, or call it without them and "
        f"apply them afterwards with {tool}",
        problems=e.problems,
    )


async def finish_intent(ws: Workspace, inp: FinishIntentIn) -> FinishOut:
    s = await ws.search(inp.search)
    node = await _active(ws, s, inp.node_id)
    done, refine, applied = await end_refine(
        ws, s, node, edits=inp.edits, new_intents=inp.new_intents, author=inp.author, reason=inp.reason
    )
    state = await loop.loop_state(ws, s.id)
    prompt = ""
    if inp.with_prompt if inp.with_prompt is not None else applied is None:
        ctx = await contexts.update_context(ws, s, done.node)  # the tree as the edits left it
        prompt = prompt_text("update", ctx, update_hint(applied, state.next))
    return FinishOut(
        node=done.node,
        refine=refine,
        applied=applied,
        reflect_prompt=prompt,
        loop=state,
        next=state.next if applied is None else f"{applied.text()} {state.next}",
    )


async def _active(ws: Workspace, s: Search, node_id: NodeRef | None) -> Node:
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
        raise await not_being_refined(ws, s, node.id)
    return node
