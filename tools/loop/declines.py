"""Intents a policy declined: written by the built-in driver through `decline_intent`, read back by every face
that shows a search's history (the page's chart, the HTML export) through `declines_in`.

A decline is kept as an edit of the intent's notes, so a model reading the tree and a person reading the node
both see it: a line "[declined by the P policy; waiting for a model or a person] why" (before any attempt: the
intent is open again, its round given back) or "[declined by the P policy after N attempts] why" (its refine
phase just ends). The same line is the edit's reason, which is how the edit log tells a decline from another
change of notes.
"""

from __future__ import annotations

import re
from datetime import datetime

from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.loop import state as loop
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Edit, EditSpec, Node, Search

__all__ = ["Decline", "decline_intent", "decline_note", "declines_in"]

_NOTE = re.compile(
    r"^\[declined by the (?P<by>.+?) policy(?: after (?P<n>\d+) attempts)?"
    r"(?:; waiting for a model or a person)?\] (?P<why>.*)$",
    re.S,
)
_MAX_NOTES = 4000  # a node's notes (worldmodel)
_MAX_REASON = 2000  # an edit's reason (worldmodel)


class Decline(ToolModel):
    """A policy declined an intent."""

    node_id: int
    round: int
    """The round the intent was claimed in"""
    by: str
    """The policy that declined it"""
    attempts: int
    """Attempts made on it before (0: declined before any, and its round was given back)"""
    why: str
    """The policy's reason"""
    at: datetime
    """When"""


def decline_note(by: str, attempts: int, why: str) -> str:
    """The line a decline adds to the intent's notes (and gives as its edit's reason)."""
    if attempts:
        return f"[declined by the {by} policy after {attempts} attempts] {why}"
    return f"[declined by the {by} policy; waiting for a model or a person] {why}"


async def decline_intent(
    ws: Workspace, s: Search, node: Node, why: str, *, by: str, attempts: int, author: str
) -> bool:
    """Record that the policy `by` cannot implement `node` (an edit of its notes, by `author`). Before any
    attempt the claim is undone: the intent is open again and its round is given back (True); after attempts
    nothing more is done here: the caller ends its refine phase (False)."""
    note = decline_note(by, attempts, why)
    edit = EditSpec(
        op="update",
        node_id=node.id,
        notes=(node.notes + "\n" + note).strip()[:_MAX_NOTES],
        reason=note[:_MAX_REASON],
    )
    await edit_tree(ws, EditTreeIn(search=s.id, edits=[edit], author=author))
    if attempts:
        return False
    await loop.give_back(ws, s, node)
    return True


def _notes_set(e: Edit) -> str | None:
    """The notes an edit set, if it set any."""
    notes = e.payload.get("changes", {}).get("notes") if e.op == "update" else e.payload.get("notes")
    return notes if isinstance(notes, str) else None


def _last_line(text: str | None) -> str:
    return (text or "").rsplit("\n", 1)[-1]


def declines_in(edits: list[Edit]) -> list[Decline]:
    """The declines in a search's edit log, oldest first. An edit is one when its reason is a decline line,
    or (recorded before declines gave one) when the notes it set end with a new decline line."""
    out = []
    notes: dict[int, str | None] = {}  # node id -> its notes so far, to tell a new line from a kept one
    for e in edits:
        if e.node_id is None:
            continue
        before, after = notes.get(e.node_id), _notes_set(e)
        if after is not None:
            notes[e.node_id] = after
        if e.op != "update" or e.author.startswith("human"):
            continue
        line = e.reason if e.reason.startswith("[declined by the ") else None
        if line is None and not e.reason and _last_line(after) != _last_line(before):
            line = _last_line(after)
        m = _NOTE.match(line) if line is not None else None
        if m is None:
            continue
        out.append(
            Decline(
                node_id=e.node_id,
                round=e.round,
                by=m["by"],
                attempts=int(m["n"] or 0),
                why=m["why"],
                at=e.created_at,
            )
        )
    return out
