"""select_action: phase 1 — claim the next intent by the search's selection rule, with the reason.

Claiming starts a round: the intent becomes `active`, the search's round counter moves on, and the code
the refine phase builds on is fixed, in one transaction that also keeps the lanes and the round budget
(worldmodel/claims.py). The answer carries the loop's state and what to do next.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from ksearch.tools.common import node_ids_of, node_in
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.state import LoopState
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.claims import ClaimRefused, claim_intent
from ksearch.worldmodel.models import Attempt, Node, NodeRef, Search
from ksearch.worldmodel.select import select_action as _select


class SelectActionIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    node_id: NodeRef | None = Field(
        None,
        description="Claim this open intent (its id, or the handle given in propose_intents) instead of the "
        "selection rule's choice (a person or host picking the idea to work on)",
    )
    skip: list[NodeRef] = Field(
        default_factory=list,
        max_length=1000,
        description="Open intents the rule passes over this time (e.g. ones your policy cannot implement); they "
        "stay open",
    )
    claim: bool = Field(
        True,
        description="Claim the intent (start its refine phase, a new round). False: only say which intent "
        "the rule would pick, changing nothing",
    )


class SelectionOut(ToolModel):
    node: Node | None = Field(description="The intent selected (None: nothing to select, see `reason`)")
    reason: str = Field(description="Why this intent (its score), or why none")
    claimed: bool = Field(False, description="True when the intent is now active: its refine phase started")
    round: int = Field(0, description="The search's round after this call")
    base_attempt_id: int | None = Field(
        None, description="Attempt whose code the refine phase builds on (None: write from scratch)"
    )
    base_candidate_id: str | None = Field(None, description="That attempt's candidate id")
    loop: LoopState | None = Field(None, description="The loop's state after this call")
    next: str = Field("", description="What to do next")


async def select_action(
    ws: Workspace,
    inp: SelectActionIn,
    *,
    lanes: int = 1,
    budget_checked: bool = False,
    round_budget: bool = True,
) -> SelectionOut:
    """Select (and by default claim) the next intent.

    `lanes`: how many intents may be refined at once (a host and a person refine one; the built-in driver one
    per GPU). `budget_checked` is for callers that enforce their own budgets (the driver's run options); the
    round budget is still kept, by the claim itself, unless `round_budget` is False (a person's kernel is
    measured whatever the budget).

    The claim is decided in the database (worldmodel/claims.py): the lanes, the round budget and the intent
    still being open are checked in the transaction that claims it and starts its round, so a caller that lost a
    race to another process gets the refusal a later caller would, with nothing written.
    """
    s = await ws.search(inp.search)
    # asked before anything is selected: a refused claim writes nothing, and a look (claim=false) says the same
    blocked = await _claim_refused(ws, s, lanes=lanes, budget_checked=budget_checked)
    if not inp.claim:
        return await _look(ws, s, inp, blocked)
    if blocked is not None:
        raise ToolFailure(blocked.why)
    named = await _named(ws, s, inp.node_id) if inp.node_id is not None else None
    got = await claim_intent(
        ws.store,
        s.id,
        node_id=named,
        skip=frozenset(await node_ids_of(ws, s, inp.skip)),
        lanes=lanes,
        keep_round_budget=round_budget,
    )
    if got.refused is not None:
        raise await _lost(ws, inp, got.refused, lanes=lanes, budget_checked=budget_checked)
    state = await loop.loop_state(ws, s.id)
    if got.node is None:
        return SelectionOut(node=None, reason=got.reason, round=got.round, loop=state, next=state.next)
    base = await ws.store.get_attempt(got.base_attempt_id) if got.base_attempt_id is not None else None
    return SelectionOut(
        node=got.node,
        reason=got.reason,
        claimed=True,
        round=got.round,
        base_attempt_id=base.id if base else None,
        base_candidate_id=base.candidate_id if base else None,
        loop=state,
        next=state.next,
    )


async def _look(ws: Workspace, s: Search, inp: SelectActionIn, blocked: _Refusal | None) -> SelectionOut:
    """claim=false: the intent a claim would take now, changing nothing."""
    node_id: int | None
    if inp.node_id is not None:
        node_id, reason = await _named(ws, s, inp.node_id), "chosen by the caller"
    else:
        skip = frozenset(await node_ids_of(ws, s, inp.skip))
        sel = await _select(ws.store, s.id, claim=False, skip=skip)
        node_id, reason = sel.node_id, sel.reason
    if node_id is None:
        state = await loop.loop_state(ws, s.id)
        return SelectionOut(node=None, reason=reason, round=s.round, loop=state, next=state.next)
    node = await ws.store.get_node(node_id)
    base = await base_attempt(ws, node)
    return SelectionOut(
        node=node,
        reason=reason,
        round=s.round,
        base_attempt_id=base.id if base else None,
        base_candidate_id=base.candidate_id if base else None,
        next=_look_next(node, blocked),
    )


async def _lost(
    ws: Workspace, inp: SelectActionIn, refused: ClaimRefused, *, lanes: int, budget_checked: bool
) -> ToolFailure:
    """The refusal for a claim the database refused (another process claimed, or started the last round, between
    this call's own checks and its claim): the answer a caller arriving after that process gets."""
    s = await ws.search(inp.search)
    blocked = await _claim_refused(ws, s, lanes=lanes, budget_checked=budget_checked)
    if blocked is not None:
        return ToolFailure(blocked.why)
    if refused.kind == "rounds":
        return ToolFailure(loop.spent_text(refused.text(), s.name))
    if inp.node_id is not None:
        try:
            await _named(ws, s, inp.node_id)
        except ToolFailure as e:
            return e
    # the state moved on again since the refusal: say what happened and how to go on
    return ToolFailure(
        f"another caller changed the search while this claim was made ({refused.text()}); nothing was claimed. "
        f"Call select_action (search={s.name!r}) again"
    )


class _Refusal(NamedTuple):
    why: str  # what the refusal says, with what to do instead
    spent: bool  # a budget is spent (else the loop is elsewhere: init, or an intent still being refined)


async def _claim_refused(ws: Workspace, s: Search, *, lanes: int, budget_checked: bool) -> _Refusal | None:
    """Why the loop allows no claim now, saying what to do instead (None: a claim is allowed)."""
    if (holder := await loop.other_run(ws, s)) is not None:
        # another process's run claims the intents: a claim by hand would take a round from under it
        active = [n for n in await ws.store.list_nodes(s.id) if n.kind == "intent" and n.status == "active"]
        refining = [await loop.refine_state(ws, s, n) for n in active]
        return _Refusal(f"nothing was claimed. {loop.run_holds_text(s, holder, refining)}", False)
    nodes = await ws.store.list_nodes(s.id)
    if await loop.seed_unmeasured(ws, s):
        state = await loop.loop_state(ws, s.id)
        return _Refusal(f"the seed is not measured yet. {state.next}", False)
    if not any(n.kind == "intent" for n in nodes):
        return _Refusal(
            "the tree has no intents yet (phase 0, init): read the prompt analyse_kernel, then call "
            "propose_intents with the first intents",
            False,
        )
    active = [n for n in nodes if n.kind == "intent" and n.status == "active"]
    if len(active) >= lanes == 1:
        r = await loop.refine_state(ws, s, active[0])
        return _Refusal(
            f"intent #{r.node_id} is still being refined (round {r.round}, {r.attempts} of at most {r.cap} "
            f"attempts): finish it first with finish_intent (search={s.name!r}, node_id={r.node_id})",
            False,
        )
    if len(active) >= lanes:
        ids = ", ".join(f"#{n.id}" for n in active)
        return _Refusal(
            f"{len(active)} intents are being refined ({ids}), as many as the {lanes} lanes allow: finish one "
            f"first with finish_intent (search={s.name!r}, node_id={active[0].id})",
            False,
        )
    if not budget_checked:
        b = await loop.budget_state(ws, s)
        if b.exhausted:
            return _Refusal(loop.spent_text(b.exhausted, s.name), True)
    return None


def _look_next(node: Node, blocked: _Refusal | None) -> str:
    """`next` after claim=false: the rule's pick, and whether claiming it now would start a round."""
    if blocked is None:
        return "Nothing was claimed (claim=false). Call select_action again without claim=false to start it."
    if blocked.spent:
        return f"Nothing was claimed (claim=false). #{node.id} would be next if the budget were raised. {blocked.why}"
    return f"Nothing was claimed (claim=false), and a claim now would be refused: {blocked.why}"


async def _named(ws: Workspace, s: Search, ref: NodeRef) -> int:
    node = await node_in(ws, s, ref)
    if node.kind != "intent" or node.status != "open" or node.vetoed:
        what = "the root" if node.kind == "root" else ("vetoed" if node.vetoed else node.status.value)
        raise ToolFailure(
            f"node {node.id} is {what}; only an open, unvetoed intent can be claimed "
            "(edit_tree op=reopen / unveto first)"
        )
    return node.id


async def base_attempt(ws: Workspace, node: Node) -> Attempt | None:
    """The code an intent starts from: the attempt it names, else the best attempt on its path to the root."""
    if node.base_attempt_id is not None:
        return await ws.store.get_attempt(node.base_attempt_id)
    cur: Node | None = node
    while cur is not None:
        if cur.best_attempt_id is not None:
            return await ws.store.get_attempt(cur.best_attempt_id)
        cur = await ws.store.get_node(cur.parent_id) if cur.parent_id is not None else None
    return None
