"""The end of an intent's refine phase together with the tree edits of its reflection, in one transaction.

An MCP host that reflects while it finishes an intent sends the edits and new intents with the call: the
intent's new status, the edits (as `edits.apply_edits_in` checks and writes them) and the new intents (as
`intents.apply_intents_in` does) are committed together or not at all, so a refused edit leaves the intent
still being refined and nothing written, and the same call can be made again, corrected.

The end is decided in the transaction (claims.py): only an intent still `active` is finished, so of two processes
finishing it at once one does and the other is refused; whether it ends `closed` is read there too (a correct
attempt recorded a moment before counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ksearch.worldmodel import rows
from ksearch.worldmodel.claims import record_finish
from ksearch.worldmodel.edits import apply_edits_in
from ksearch.worldmodel.errors import EditRejected, InvalidTransition
from ksearch.worldmodel.intents import apply_intents_in
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node
from ksearch.worldmodel.store import Store

EndStatus = Literal["closed", "failed", "open"]
WithoutBest = Literal["failed", "open"]


class Finished(BaseModel):
    """What `finish_refine` wrote."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    node: Node
    """The intent after its refine phase (and after the edits)"""
    edited: list[Node]
    """Each edit's node after the edits, in request order"""
    added: list[Node]
    """The new intents, in request order"""
    status: EndStatus
    """The status the refine phase ended with"""


async def finish_refine(
    store: Store,
    search_id: int,
    node_id: int,
    without_best: WithoutBest = "failed",
    *,
    edits: Sequence[EditSpec | Mapping[str, Any]] = (),
    intents: Sequence[IntentSpec | Mapping[str, Any]] = (),
    author: str = "human",
    round: int,
    reason: str = "",
) -> Finished:
    """End the refine phase of the active intent `node_id`: `closed` when it holds a correct attempt, else
    `without_best` (`failed`, or `open` again: released), then apply `edits` and insert `intents` under the same
    rules as edit_tree and propose_intents, seeing the intent's new status. All in one transaction, with the end
    recorded (claims.record_finish: who, when; the intent the update phase follows). An intent that is not
    active (finished already, by this caller or another) raises `InvalidTransition`; a refused edit or intent
    raises `EditRejected` (its `part` says which list, "edits" or "new_intents"); either way nothing is
    written, the status change included."""
    async with store.transaction() as db:
        node = await rows.node(db, node_id)
        if node.search_id != search_id or node.kind != "intent":
            raise InvalidTransition(f"node #{node_id} is no intent of search {search_id}")
        status: EndStatus = "closed" if node.best_attempt_id is not None else without_best
        cur = await db.execute(
            "UPDATE nodes SET status = ? WHERE id = ? AND status = 'active'", (status, node_id)
        )
        if cur.rowcount != 1:
            raise InvalidTransition(
                f"intent #{node_id} is {node.status.value}, not being refined: only an active intent can be finished"
            )
        if reason and not edits and not intents:  # nothing else carries the reflection's reason: the end does
            await rows.log_edit(
                db,
                search_id=search_id,
                op="finish",
                node_id=node_id,
                payload={"status": status},
                author=author,
                round=round,
                reason=reason,
            )
        edited: list[Node] = []
        added: list[Node] = []
        try:
            if edits:
                edited = await apply_edits_in(db, search_id, edits, author=author, round=round)
        except EditRejected as e:
            raise EditRejected(e.details, part="edits") from e
        try:
            if intents:
                added = await apply_intents_in(
                    db, search_id, intents, author=author, round=round, reason=reason
                )
        except EditRejected as e:
            raise EditRejected(e.details, part="new_intents") from e
        applied = {"edits": len(edited), "new_intents": [n.id for n in added]} if edits or intents else None
        await record_finish(db, search_id, node_id, status, by=author, applied=applied, round=round)
        return Finished(node=await rows.node(db, node_id), edited=edited, added=added, status=status)
