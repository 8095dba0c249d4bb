"""select_action: phase 1 — claim the next intent by the search's selection rule, with the reason.

Claiming starts a round: the intent becomes `active`, the search's round counter moves on, and the code
the refine phase builds on is fixed. The answer carries the loop's state and what to do next.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from ksearch.tools import loop
from ksearch.tools.common import node_in
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import LoopState
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Attempt, Node, Search
from ksearch.worldmodel.select import select_action as _select


class SelectActionIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    node_id: int | None = Field(
        None,
        ge=1,
        description="Claim this open intent instead of the selection rule's choice (a person or host "
        "picking the idea to work on)",
    )
    skip: list[int] = Field(
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
    parallel: bool = False,
    budget_checked: bool = False,
) -> SelectionOut:
    """Select (and by default claim) the next intent.

    `parallel` lets the built-in driver refine several intents at once (one per GPU); a host refines one
    at a time. `budget_checked` is for callers that enforce their own budgets (the driver's run options).
    """
    s = await ws.search(inp.search)
    # asked before anything is selected: a refused claim writes nothing, and a look (claim=false) says the same
    blocked = await _claim_refused(ws, s, parallel=parallel, budget_checked=budget_checked)
    if inp.claim and blocked is not None:
        raise ToolFailure(blocked.why)
    node_id: int | None
    if inp.node_id is not None:
        node_id, reason = await _named(ws, s, inp.node_id), "chosen by the caller"
        if inp.claim:
            await ws.store.set_node_status(node_id, "active")
    else:
        # Selection and claim in one transaction: parallel lanes never get the same intent.
        sel = await _select(ws.store, s.id, claim=inp.claim, skip=frozenset(inp.skip))
        node_id, reason = sel.node_id, sel.reason
    if node_id is None:
        state = await loop.loop_state(ws, s.id)
        return SelectionOut(node=None, reason=reason, round=s.round, loop=state, next=state.next)
    node = await ws.store.get_node(node_id)
    base = await base_attempt(ws, node)
    if not inp.claim:
        return SelectionOut(
            node=node,
            reason=reason,
            round=s.round,
            base_attempt_id=base.id if base else None,
            base_candidate_id=base.candidate_id if base else None,
            next=_look_next(node, blocked),
        )
    # The claim starts a round; the base is fixed now, before the node's own new attempts move its best.
    await ws.store.bump_round(s.id)
    if s.status != "running":
        await ws.store.set_search_status(s.id, "running")
    s = await ws.search(s.id)
    await loop.claim(ws, s, node, base.id if base else None)
    state = await loop.loop_state(ws, s.id)
    return SelectionOut(
        node=node,
        reason=reason,
        claimed=True,
        round=s.round,
        base_attempt_id=base.id if base else None,
        base_candidate_id=base.candidate_id if base else None,
        loop=state,
        next=state.next,
    )


class _Refusal(NamedTuple):
    why: str  # what the refusal says, with what to do instead
    spent: bool  # a budget is spent (else the loop is elsewhere: init, or an intent still being refined)


async def _claim_refused(
    ws: Workspace, s: Search, *, parallel: bool, budget_checked: bool
) -> _Refusal | None:
    """Why the loop allows no claim now, saying what to do instead (None: a claim is allowed)."""
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
    if not parallel:
        active = [n for n in nodes if n.kind == "intent" and n.status == "active"]
        if active:
            r = await loop.refine_state(ws, s, active[0])
            return _Refusal(
                f"intent #{r.node_id} is still being refined (round {r.round}, {r.attempts} of at most {r.cap} "
                f"attempts): finish it first with finish_intent (node_id={r.node_id})",
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


async def _named(ws: Workspace, s: Search, node_id: int) -> int:
    node = await node_in(ws, s, node_id)
    if node.kind != "intent" or node.status != "open" or node.vetoed:
        what = "the root" if node.kind == "root" else ("vetoed" if node.vetoed else node.status.value)
        raise ToolFailure(
            f"node {node_id} is {what}; only an open, unvetoed intent can be claimed "
            "(edit_tree op=reopen / unveto first)"
        )
    return node_id


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
