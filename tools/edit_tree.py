"""edit_tree: re-prioritise, annotate, re-base, move, prune, reopen, pin or veto nodes. Never results."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.bank.record import HUMAN, record_quietly
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.schema import ToolIn
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_edits
from ksearch.worldmodel.errors import EditRejected
from ksearch.worldmodel.models import EditSpec, Node


class EditTreeIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    edits: list[EditSpec] = Field(
        min_length=1,
        max_length=100,
        description=(
            "Changes applied in order, all or nothing (later items see earlier ones): "
            "update, move, prune, reopen, pin, unpin, veto, unveto"
        ),
    )
    author: str = Field(
        "human",
        min_length=1,
        max_length=80,
        description="Who asks: human | llm:<model> | tuner (kept in the edit log)",
    )
    reason: str = Field(
        "",
        max_length=2000,
        description="Why these edits (a reflection, as propose_intents' and finish_intent's reason): kept in the "
        "edit log with every edit that gives no `reason` of its own",
    )


_BANKED_OPS = ("prune", "veto", "unveto", "reopen")


def with_reason(edits: list[EditSpec], reason: str) -> list[EditSpec]:
    """The edits, each without a reason of its own given the batch's (edit_tree's and finish_intent's)."""
    return [e.model_copy(update={"reason": reason}) if reason and not e.reason else e for e in edits]


async def edit_tree(ws: Workspace, inp: EditTreeIn) -> list[Node]:
    s = await ws.search(inp.search)
    edits = with_reason(inp.edits, inp.reason)
    try:
        done = await apply_edits(ws.store, s.id, edits, author=inp.author, round=s.round)
    except EditRejected as e:
        raise ToolFailure("no edit was applied", problems=e.problems) from e
    except ValueError as e:  # the batch as a whole was refused (e.g. a bad author), with the reason
        raise ToolFailure(str(e)) from e
    await loop.applied_later(ws, s, edits=len(done))
    if any(e.op in _BANKED_OPS or (inp.author == HUMAN and e.notes is not None) for e in edits):
        await record_quietly(
            ws, s.id
        )  # a person's notes and vetoes, and prunes with their reasons, are lessons
    return done
