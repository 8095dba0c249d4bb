"""propose_intents: add open intents under a node (validated; near-duplicates refused)."""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.schema import ToolIn
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.errors import EditRejected
from ksearch.worldmodel.models import IntentSpec, Node


class ProposeIntentsIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    intents: list[IntentSpec] = Field(
        min_length=1,
        max_length=50,
        description="The intents to add (1-50), each under its parent_id (default: the root); added all or "
        "none",
    )
    author: str = Field("human", min_length=1, max_length=80, description="human | llm:<model> | tuner")
    reason: str = Field(
        "", max_length=2000, description="Why these intents are proposed; kept in the edit log with each one"
    )


async def propose_intents(ws: Workspace, inp: ProposeIntentsIn) -> list[Node]:
    s = await ws.search(inp.search)
    try:
        added = await apply_intents(
            ws.store, s.id, inp.intents, author=inp.author, round=s.round, reason=inp.reason
        )
    except EditRejected as e:
        raise ToolFailure("no intent was added", problems=e.problems) from e
    except ValueError as e:  # the batch as a whole was refused (e.g. a bad author), with the reason
        raise ToolFailure(str(e)) from e
    await loop.applied_later(ws, s, new_intents=len(added))
    return added
