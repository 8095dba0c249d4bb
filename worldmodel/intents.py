"""Inserting open intents into the tree (validated, all or nothing, each logged); see `edits.py` for the rules
every change follows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite

from ksearch.worldmodel import handles, rows
from ksearch.worldmodel.edit_checks import (
    _ACCEPTED,
    _check_author,
    _check_round,
    _duplicate_problem,
    _Siblings,
    _validate_items,
    text_problem,
)
from ksearch.worldmodel.errors import EditProblem, EditRejected, NotFound
from ksearch.worldmodel.models import IntentSpec, Node, NodeStatus
from ksearch.worldmodel.similarity import TitleKey, near_duplicate, stored_key
from ksearch.worldmodel.store import Store

# ---------------------------------------------------------------------- intents


async def apply_intents(
    store: Store,
    search_id: int,
    specs: Sequence[IntentSpec | Mapping[str, Any]],
    author: str,
    round: int,
    reason: str = "",
) -> list[Node]:
    """Insert open intents (each under `parent_id`, the root when omitted). All or nothing (see
    `apply_intents_in`)."""
    async with store.transaction() as db:
        return await apply_intents_in(db, search_id, specs, author=author, round=round, reason=reason)


async def apply_intents_in(
    db: aiosqlite.Connection,
    search_id: int,
    specs: Sequence[IntentSpec | Mapping[str, Any]],
    *,
    author: str,
    round: int,
    reason: str = "",
) -> list[Node]:
    """Insert open intents (each under `parent_id`, the root when omitted), all or nothing, inside the caller's
    transaction (`Store.transaction()`; a refusal raises, so the caller's rollback drops whatever else it wrote).

    Refused (with every problem listed): invalid fields or result fields; a parent that does not
    exist, belongs to another search, or is pruned or vetoed; a base attempt of another search; a
    title that near-duplicates a sibling or another item of the same request.
    Returns the new nodes in request order.
    """
    _check_author(author)
    _check_round(round)
    validated, problems = _validate_items(IntentSpec, specs)
    why = text_problem(reason)
    if why is not None:  # the batch's reason goes into every item's edit-log entry
        problems.append(
            EditProblem(index=0, field="reason", problem=f"reason {why}", accepted=_ACCEPTED["reason"])
        )
    await rows.search_row(db, search_id)
    root_row = await rows.fetchone(
        db, "SELECT id FROM nodes WHERE search_id = ? AND kind = 'root'", (search_id,)
    )
    if root_row is None:
        raise NotFound(f"search {search_id} has no root node (damaged database)")
    root_id = int(root_row[0])
    # a parent named by handle: one of the search's, or an earlier item's of this request (a negative key: -1 - its
    # index, for a node not inserted yet)
    parent_keys = await _parent_keys(db, search_id, validated, root_id, problems)
    parents = await rows.nodes_by_id(db, {k for k in parent_keys.values() if k > 0})
    wanted_bases = {s.base_attempt_id for s in validated if s is not None and s.base_attempt_id is not None}
    bases = await _attempt_searches(db, wanted_bases)
    siblings = _Siblings(db)
    # a veto says "never this idea": its title is refused under any parent, not only beside it
    vetoed = [
        (int(nid), title, stored_key(title, params))
        for nid, title, params in await rows.fetchall(
            db, "SELECT id, title, params FROM nodes WHERE search_id = ? AND vetoed = 1", (search_id,)
        )
    ]
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        if index not in parent_keys:  # its parent's handle named nothing (said above)
            continue
        pid = parent_keys[index]
        refused = None if pid < 0 else _parent_refused(parents.get(pid), pid, search_id)
        if refused is not None:
            problems.append(
                EditProblem(index=index, field="parent_id", problem=refused[0], accepted=refused[1])
            )
            continue
        if spec.base_attempt_id is not None and bases.get(spec.base_attempt_id) != search_id:
            owner = bases.get(spec.base_attempt_id)
            where = "does not exist" if owner is None else f"belongs to search {owner}"
            problems.append(_problem(index, "base_attempt_id", f"attempt #{spec.base_attempt_id} {where}"))
            continue
        key = TitleKey.of(spec.title, spec.params)
        veto = next(((nid, t) for nid, t, vkey in vetoed if near_duplicate(key, vkey)), None)
        if veto is not None:
            problems.append(
                EditProblem(
                    index=index,
                    field="title",
                    problem=f"title {spec.title!r} is a near-duplicate of vetoed node #{veto[0]} {veto[1]!r}",
                    accepted=f"a distinct idea, or unveto #{veto[0]} first",
                )
            )
            continue
        dup = await siblings.duplicate_of(pid, key)
        if dup is not None:
            problems.append(_duplicate_problem(index, None, spec.title, dup))
            continue
        (await siblings.under(pid))[f"item {index}"] = (key, spec.title, "new")
    if problems:
        raise EditRejected(sorted(problems, key=lambda p: p.index))
    new_ids: list[int] = []
    inserted: dict[int, Node] = {}  # -1 - index → the item's node, for items named as a later item's parent
    for index, spec in enumerate(validated):
        assert spec is not None
        pid = parent_keys[index]
        parent = parents[pid] if pid > 0 else inserted[pid]
        title = spec.title.strip()
        nid = await rows.insert_node(
            db,
            search_id=search_id,
            parent=parent,
            title=title,
            rationale=spec.rationale,
            priority=spec.priority,
            difficulty=spec.difficulty,
            expected_speedup=spec.expected_speedup,
            notes=spec.notes,
            author=author,
            round=round,
            params=spec.params,
            base_attempt_id=spec.base_attempt_id,
            handle=spec.handle,
        )
        if -1 - index in parent_keys.values():
            inserted[-1 - index] = await rows.node(db, nid)
        payload = spec.model_dump(mode="json")
        if spec.handle is None:  # the edit log of an intent without a handle reads as it always did
            del payload["handle"]
        payload.update(kind="intent", title=title, parent_id=parent.id)
        await rows.log_edit(
            db,
            search_id=search_id,
            op="insert",
            node_id=nid,
            payload=payload,
            author=author,
            round=round,
            reason=reason,
        )
        new_ids.append(nid)
    created = await rows.nodes_by_id(db, new_ids)
    return [created[i] for i in new_ids]


async def _parent_keys(
    db: aiosqlite.Connection,
    search_id: int,
    validated: Sequence[IntentSpec | None],
    root_id: int,
    problems: list[EditProblem],
) -> dict[int, int]:
    """item index → its parent's id, or -1 - the index of an earlier item whose handle names it; a parent handle
    that names nothing, and a new handle the search or the request already has, are added to `problems`."""
    named = [s.handle for s in validated if s is not None and s.handle is not None]
    named += [s.parent_id for s in validated if s is not None and isinstance(s.parent_id, str)]
    taken = await handles.handle_ids(db, search_id, named)
    earlier: dict[str, int] = {}
    keys: dict[int, int] = {}
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        ref = spec.parent_id
        nid = root_id if ref is None else handles.as_id(ref)
        if nid is None:
            assert isinstance(ref, str)
            if ref in earlier:
                nid = -1 - earlier[ref]
            elif ref in taken:
                nid = taken[ref]
        if nid is None:
            later = any(s is not None and s.handle == ref for s in validated[index:])
            why = (
                f"parent handle {ref!r} is given by a later item of this request"
                if later
                else await handles.unknown_handle(db, search_id, str(ref))
            )
            problems.append(_problem(index, "parent_id", why))
        else:
            keys[index] = nid
        if spec.handle is not None:
            if spec.handle in taken or spec.handle in earlier:
                owner = (
                    f"node #{taken[spec.handle]}" if spec.handle in taken else f"item {earlier[spec.handle]}"
                )
                problems.append(
                    _problem(index, "handle", f"handle {spec.handle!r} is already {owner}'s in this search")
                )
            else:
                earlier[spec.handle] = index
    return keys


def _problem(index: int, field: str, problem: str) -> EditProblem:
    return EditProblem(index=index, field=field, problem=problem, accepted=_ACCEPTED[field])


def _parent_refused(parent: Node | None, pid: int, search_id: int) -> tuple[str, str] | None:
    """(problem, what is accepted) when a new intent cannot go under `parent`, else None."""
    if parent is None or parent.search_id != search_id:
        where = "does not exist" if parent is None else f"belongs to search {parent.search_id}"
        return f"parent node #{pid} {where}", _ACCEPTED["parent_id"]
    if parent.status == NodeStatus.pruned:
        return f"parent node #{pid} is pruned", f"a parent that is not pruned, or reopen #{pid} first"
    if parent.vetoed:
        return (
            f"parent node #{pid} is vetoed: nothing grows under it",
            f"another parent, or unveto #{pid} first",
        )
    return None


async def _attempt_searches(db: aiosqlite.Connection, ids: set[int]) -> dict[int, int]:
    ids = {i for i in ids if rows.storable_id(i)}  # larger ones cannot exist (nor be bound)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    found = await rows.fetchall(db, f"SELECT id, search_id FROM attempts WHERE id IN ({marks})", sorted(ids))
    return {int(a): int(s) for a, s in found}
