"""Names for nodes that a caller chose: a node is named by its id (12, or "#12" as the tree writes it) or by the
handle it was proposed with, unique in its search. A host that plans a round as one batch names the intents it
proposes before it knows their ids; ids stay global across searches, handles are the search's own."""

from __future__ import annotations

import re
from collections.abc import Iterable

import aiosqlite

from ksearch.worldmodel import rows
from ksearch.worldmodel.edit_checks import _ACCEPTED
from ksearch.worldmodel.errors import EditProblem
from ksearch.worldmodel.models import EditSpec

_ID = re.compile(r"#?([0-9]{1,19})")


def as_id(ref: int | str) -> int | None:
    """The id a reference spells (12, "12", "#12"), or None when it is a handle."""
    if isinstance(ref, int):
        return ref
    m = _ID.fullmatch(ref.strip())
    return int(m.group(1)) if m else None


def resolved(ref: int | str) -> int:
    """A reference already resolved to an id (after `resolve`); a handle here is a bug in the caller."""
    if isinstance(ref, int):
        return ref
    found = as_id(ref)
    if found is None:
        raise TypeError(f"node reference {ref!r} was not resolved to an id")
    return found


async def handle_ids(db: aiosqlite.Connection, search_id: int, handles: Iterable[str]) -> dict[str, int]:
    """handle → node id for those of `handles` that name a node of the search."""
    wanted = sorted(set(handles))
    out: dict[str, int] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for nid, handle in await rows.fetchall(
            db,
            f"SELECT id, handle FROM nodes WHERE search_id = ? AND handle IN ({marks})",
            (search_id, *chunk),
        ):
            out[str(handle)] = int(nid)
    return out


async def known_handles(db: aiosqlite.Connection, search_id: int, limit: int = 12) -> list[str]:
    """The search's handles, latest first (to say what a caller could have meant)."""
    found = await rows.fetchall(
        db,
        "SELECT handle FROM nodes WHERE search_id = ? AND handle IS NOT NULL ORDER BY id DESC LIMIT ?",
        (search_id, limit),
    )
    return [str(h) for (h,) in found]


async def unknown_handle(db: aiosqlite.Connection, search_id: int, handle: str) -> str:
    """Why `handle` names nothing, with the handles the search has."""
    names = await known_handles(db, search_id)
    have = f"its handles: {', '.join(names)}" if names else "no node of it has a handle"
    return f"no node of search {search_id} goes by handle {handle!r} ({have})"


async def resolve(db: aiosqlite.Connection, search_id: int, ref: int | str) -> int | None:
    """The node id `ref` names in the search: an id as given (its search is checked by the caller), a handle
    looked up; None for a handle no node of the search has."""
    nid = as_id(ref)
    if nid is not None:
        return nid
    assert isinstance(ref, str)
    return (await handle_ids(db, search_id, [ref])).get(ref)


async def resolve_edits(
    db: aiosqlite.Connection, search_id: int, validated: list[EditSpec | None], problems: list[EditProblem]
) -> None:
    """Each item's node and new parent as ids, in place; an item naming a handle the search lacks is refused."""
    named = [
        ref
        for s in validated
        if s is not None
        for ref in (s.node_id, s.parent_id)
        if isinstance(ref, str) and as_id(ref) is None
    ]
    found = await handle_ids(db, search_id, named)
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        update: dict[str, int] = {}
        for field in ("node_id", "parent_id"):
            ref = getattr(spec, field)
            if ref is None:
                continue
            nid = as_id(ref)
            if nid is None:
                nid = found.get(ref)
            if nid is None:
                accepted = _ACCEPTED["node_id" if field == "node_id" else "edit.parent_id"]
                why = await unknown_handle(db, search_id, ref)
                problems.append(EditProblem(index=index, field=field, problem=why, accepted=accepted))
            else:
                update[field] = nid
        named_all = len(update) == sum(getattr(spec, f) is not None for f in ("node_id", "parent_id"))
        validated[index] = spec.model_copy(update=update) if named_all else None
