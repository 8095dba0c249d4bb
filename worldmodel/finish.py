"""The end of an intent's refine phase together with the tree edits of its reflection, in one transaction.

An MCP host that reflects while it finishes an intent sends the edits and new intents with the call: the
intent's new status, the edits (as `edits.apply_edits_in` checks and writes them) and the new intents (as
`intents.apply_intents_in` does) are committed together or not at all, so a refused edit leaves the intent
still being refined and nothing written, and the same call can be made again, corrected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ksearch.worldmodel import rows
from ksearch.worldmodel.edits import apply_edits_in
from ksearch.worldmodel.errors import EditRejected
from ksearch.worldmodel.intents import apply_intents_in
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node
from ksearch.worldmodel.store import Store

EndStatus = Literal["closed", "failed", "open"]


class Finished(BaseModel):
    """What `finish_refine` wrote."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    node: Node
    """The intent after its refine phase (and after the edits)"""
    edited: list[Node]
    """Each edit's node after the edits, in request order"""
    added: list[Node]
    """The new intents, in request order"""


async def finish_refine(
    store: Store,
    search_id: int,
    node_id: int,
    status: EndStatus,
    *,
    edits: Sequence[EditSpec | Mapping[str, Any]] = (),
    intents: Sequence[IntentSpec | Mapping[str, Any]] = (),
    author: str = "human",
    round: int,
    reason: str = "",
) -> Finished:
    """End the refine phase of intent `node_id` (`closed`, `failed`, or `open` again: released), then apply
    `edits` and insert `intents` under the same rules as edit_tree and propose_intents, seeing the intent's
    new status. All in one transaction: a refused edit or intent raises `EditRejected` (its `part` says
    which list, "edits" or "new_intents") and nothing is written, the status change included."""
    async with store.transaction() as db:
        if status == "open":
            await rows.set_node_status(db, node_id, "open")
        else:
            await rows.close_node(db, node_id, status)
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
        return Finished(node=await rows.node(db, node_id), edited=edited, added=added)
