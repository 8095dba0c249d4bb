"""Validated changes to the intent tree: inserting intents and editing existing nodes.

Every call is all-or-nothing: all items are checked first, every problem is reported at once in an
`EditRejected` (what was wrong and what would be accepted), and only a fully valid batch is written,
in one transaction, each item appended to the edit log with its author, round and reason.

Integrity rule: nothing here can write a result. `IntentSpec` and `EditSpec` have no result fields
and forbid unknown keys, raw dicts are validated through them, and the SQL below only ever touches
non-result columns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiosqlite
from pydantic import BaseModel, ValidationError

from worldmodel import rows
from worldmodel.errors import EditProblem, EditRejected, NotFound
from worldmodel.models import EditSpec, IntentSpec, Node, NodeStatus
from worldmodel.similarity import TitleKey, near_duplicate, stored_key
from worldmodel.store import Store

__all__ = ["EditProblem", "EditRejected", "apply_edits", "apply_intents", "replay_edits"]

SpecT = TypeVar("SpecT", IntentSpec, EditSpec)

# Keys a caller might use to smuggle a result in; named in the refusal so the intent is clear.
RESULT_KEYS = frozenset(
    {
        "best_attempt_id",
        "best_attempt",
        "best",
        "best_speedup",
        "evaluation",
        "result",
        "results",
        "speedup",
        "speedup_vs_eager",
        "speedup_vs_compile",
        "timings",
        "correctness",
        "attempt_id",
        "visits",
        "status",
    }
)

_ACCEPTED: dict[str, str] = {
    "title": "a short imperative idea of 3-200 characters",
    "rationale": "text up to 4000 characters",
    "notes": "text up to 4000 characters",
    "priority": "a number from 0 (least) to 1 (most promising)",
    "difficulty": "an integer from 1 (a parameter change) to 5 (a rewrite)",
    "expected_speedup": "a number above 0 and at most 1000, or null",
    "parent_id": "the id of a node of this search (the root when omitted)",
    "params": "a JSON object of concrete settings",
    "base_attempt_id": "the id of an attempt of this search",
    "op": "one of update, prune, reopen, pin, unpin, veto, unveto",
    "node_id": "the id of a node of this search",
    "reason": "text up to 2000 characters",
}
_UPDATE_FIELDS = ("priority", "difficulty", "expected_speedup", "notes", "rationale", "title")
_ROOT_UPDATE_FIELDS = frozenset({"notes", "rationale", "title"})
_REOPENABLE = (NodeStatus.closed, NodeStatus.failed, NodeStatus.pruned)


# ---------------------------------------------------------------------- item validation


def _fields_of(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _validate_items(
    model: type[SpecT], items: Sequence[SpecT | Mapping[str, Any]]
) -> tuple[list[SpecT | None], list[EditProblem]]:
    """Validate each item through `model` (also model instances, in case they were built unchecked)."""
    specs: list[SpecT | None] = []
    problems: list[EditProblem] = []
    for index, item in enumerate(items):
        if isinstance(item, model):
            data: Any = item.model_dump()
            extra = getattr(item, "__pydantic_extra__", None)
            if extra:
                data.update(extra)
        elif isinstance(item, Mapping):
            data = dict(item)
        else:
            specs.append(None)
            problems.append(
                EditProblem(
                    index=index,
                    problem=f"expected an object, got {type(item).__name__}",
                    accepted=f"an object with fields {_fields_of(model)}",
                )
            )
            continue
        try:
            spec = model.model_validate(data)
        except ValidationError as exc:
            specs.append(None)
            node_id = data.get("node_id") if isinstance(data.get("node_id"), int) else None
            problems.extend(_pydantic_problems(model, index, node_id, exc))
            continue
        recheck = _recheck(spec)
        node_id = spec.node_id if isinstance(spec, EditSpec) else None
        problems.extend(
            EditProblem(
                index=index, node_id=node_id, field=f, problem=p, accepted=_ACCEPTED.get(f, "see the schema")
            )
            for f, p in recheck
        )
        specs.append(None if recheck else spec)
    return specs, problems


def _pydantic_problems(
    model: type[BaseModel], index: int, node_id: int | None, exc: ValidationError
) -> list[EditProblem]:
    out: list[EditProblem] = []
    for err in exc.errors():
        field = ".".join(str(x) for x in err["loc"]) or None
        top = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            if top in RESULT_KEYS:
                problem = (
                    f"'{top}' cannot be set by an edit: results, best attempts and lifecycle status are "
                    "written only by the evaluator (status changes: op prune / reopen)"
                )
            else:
                problem = f"unknown field '{top}'"
            accepted = f"only the fields {_fields_of(model)}"
        else:
            shown = repr(err.get("input"))
            if len(shown) > 60:
                shown = shown[:57] + "..."
            problem = f"{err['msg']} (got {shown})"
            accepted = _ACCEPTED.get(top, "see the schema")
        out.append(EditProblem(index=index, node_id=node_id, field=field, problem=problem, accepted=accepted))
    return out


def text_problem(value: str, *, one_line: bool = False) -> str | None:
    """Why `value` cannot be stored as text, or None. SQLite stores UTF-8, so a lone surrogate (e.g.
    from an undecodable command-line byte) cannot be written; a NUL byte cuts the text short in C
    tools and terminals, so it is refused everywhere; a one-line field (a title) takes no control
    characters at all."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains {value[exc.start]!r} at position {exc.start}, which is not valid Unicode text"
    for i, ch in enumerate(value):
        if ch == "\x00" or (one_line and (ch < " " or ch == "\x7f")):
            return f"contains the control character {ch!r} at position {i}"
    return None


def _recheck(spec: IntentSpec | EditSpec) -> list[tuple[str, str]]:
    """Range checks repeated here so they hold even if the pydantic models are loosened later."""
    bad: list[tuple[str, str]] = []
    for name in ("title", "rationale", "notes", "reason"):
        value = getattr(spec, name, None)
        why = text_problem(value, one_line=name == "title") if isinstance(value, str) else None
        if why is not None:
            bad.append((name, f"{name} {why}"))
    title = spec.title
    if title is not None and len(title.strip()) < 3:
        bad.append(("title", "title is blank or shorter than 3 characters once spaces are removed"))
    p = spec.priority
    if p is not None and not (math.isfinite(p) and 0.0 <= p <= 1.0):
        bad.append(("priority", f"priority {p} is outside 0..1"))
    d = spec.difficulty
    if d is not None and not (isinstance(d, int) and 1 <= d <= 5):
        bad.append(("difficulty", f"difficulty {d} is outside 1..5"))
    e = spec.expected_speedup
    if e is not None and not (math.isfinite(e) and 0.0 < e <= 1000.0):
        bad.append(("expected_speedup", f"expected_speedup {e} is outside (0, 1000]"))
    if isinstance(spec, IntentSpec):
        try:
            rows.dumps(spec.params)
        except TypeError as exc:
            bad.append(("params", str(exc)))
    return bad


def _check_author(author: str) -> None:
    if (
        not isinstance(author, str)
        or not author.strip()
        or len(author) > 100
        or text_problem(author, one_line=True)
    ):
        raise ValueError(
            f"bad author {author!r}; accepted: 'human', 'tuner' or 'llm:<model>' (1-100 characters)"
        )


def _check_round(round: int) -> None:
    if not isinstance(round, int) or round < 0:
        raise ValueError(f"bad round {round!r}; accepted: an integer >= 0")


# ---------------------------------------------------------------------- sibling titles


class _Siblings:
    """Titles under each parent, loaded once per batch and kept current as the batch is checked."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._by_parent: dict[int, dict[int | str, tuple[TitleKey, str, str]]] = {}

    async def under(self, parent_id: int) -> dict[int | str, tuple[TitleKey, str, str]]:
        """key (node id, or 'item N' for a not-yet-inserted intent) → (title key, title, status)."""
        found = self._by_parent.get(parent_id)
        if found is None:
            found = {}
            for nid, title, status, params in await rows.fetchall(
                self._db, "SELECT id, title, status, params FROM nodes WHERE parent_id = ?", (parent_id,)
            ):
                found[nid] = (stored_key(title, params), title, status)
            self._by_parent[parent_id] = found
        return found

    async def duplicate_of(
        self, parent_id: int, key: TitleKey, exclude: int | str | None = None
    ) -> tuple[int | str, str, str] | None:
        for other, (okey, title, status) in (await self.under(parent_id)).items():
            if other != exclude and near_duplicate(key, okey):
                return other, title, status
        return None


def _duplicate_problem(
    index: int, node_id: int | None, title: str, dup: tuple[int | str, str, str]
) -> EditProblem:
    other, other_title, status = dup
    if isinstance(other, int):
        what = f"node #{other} {other_title!r} ({status})"
        if status in ("closed", "failed", "pruned"):
            instead = f"a distinct idea, or reopen #{other} instead"
        else:
            instead = f"a distinct idea, or update #{other} (priority, notes) instead"
    else:
        what = f"{other} of this request ({other_title!r})"
        instead = "one of the two, or distinct ideas"
    return EditProblem(
        index=index,
        node_id=node_id,
        field="title",
        problem=f"title {title!r} is a near-duplicate of {what} under the same parent",
        accepted=instead,
    )


# ---------------------------------------------------------------------- intents


async def apply_intents(
    store: Store,
    search_id: int,
    specs: Sequence[IntentSpec | Mapping[str, Any]],
    author: str,
    round: int,
    reason: str = "",
) -> list[Node]:
    """Insert open intents (each under `parent_id`, the root when omitted). All or nothing.

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
    async with store.transaction() as db:
        await rows.search_row(db, search_id)
        root_row = await rows.fetchone(
            db, "SELECT id FROM nodes WHERE search_id = ? AND kind = 'root'", (search_id,)
        )
        if root_row is None:
            raise NotFound(f"search {search_id} has no root node (damaged database)")
        root_id = int(root_row[0])
        wanted_parents = {s.parent_id or root_id for s in validated if s is not None}
        parents = await rows.nodes_by_id(db, wanted_parents)
        wanted_bases = {
            s.base_attempt_id for s in validated if s is not None and s.base_attempt_id is not None
        }
        bases = await _attempt_searches(db, wanted_bases)
        siblings = _Siblings(db)
        for index, spec in enumerate(validated):
            if spec is None:
                continue
            pid = spec.parent_id or root_id
            parent = parents.get(pid)
            if parent is None or parent.search_id != search_id:
                where = "does not exist" if parent is None else f"belongs to search {parent.search_id}"
                problems.append(
                    EditProblem(
                        index=index,
                        field="parent_id",
                        problem=f"parent node #{pid} {where}",
                        accepted=_ACCEPTED["parent_id"],
                    )
                )
                continue
            if parent.status == NodeStatus.pruned:
                problems.append(
                    EditProblem(
                        index=index,
                        field="parent_id",
                        problem=f"parent node #{pid} is pruned",
                        accepted=f"a parent that is not pruned, or reopen #{pid} first",
                    )
                )
                continue
            if parent.vetoed:
                problems.append(
                    EditProblem(
                        index=index,
                        field="parent_id",
                        problem=f"parent node #{pid} is vetoed: nothing grows under it",
                        accepted=f"another parent, or unveto #{pid} first",
                    )
                )
                continue
            if spec.base_attempt_id is not None and bases.get(spec.base_attempt_id) != search_id:
                owner = bases.get(spec.base_attempt_id)
                where = "does not exist" if owner is None else f"belongs to search {owner}"
                problems.append(
                    EditProblem(
                        index=index,
                        field="base_attempt_id",
                        problem=f"attempt #{spec.base_attempt_id} {where}",
                        accepted=_ACCEPTED["base_attempt_id"],
                    )
                )
                continue
            key = TitleKey.of(spec.title, spec.params)
            dup = await siblings.duplicate_of(pid, key)
            if dup is not None:
                problems.append(_duplicate_problem(index, None, spec.title, dup))
                continue
            (await siblings.under(pid))[f"item {index}"] = (key, spec.title, "new")
        if problems:
            raise EditRejected(sorted(problems, key=lambda p: p.index))
        new_ids: list[int] = []
        for spec in validated:
            assert spec is not None
            parent = parents[spec.parent_id or root_id]
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
            )
            payload = spec.model_dump(mode="json")
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


async def _attempt_searches(db: aiosqlite.Connection, ids: set[int]) -> dict[int, int]:
    ids = {i for i in ids if rows.storable_id(i)}  # larger ones cannot exist (nor be bound)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    found = await rows.fetchall(db, f"SELECT id, search_id FROM attempts WHERE id IN ({marks})", sorted(ids))
    return {int(a): int(s) for a, s in found}


# ---------------------------------------------------------------------- edits


class _Plan:
    """One validated edit, ready to write."""

    def __init__(self, spec: EditSpec, changes: dict[str, Any], payload: dict[str, Any], node_ids: list[int]):
        self.spec = spec
        self.changes = changes  # column → value, applied to every id in node_ids
        self.payload = payload
        self.node_ids = node_ids


async def apply_edits(
    store: Store,
    search_id: int,
    specs: Sequence[EditSpec | Mapping[str, Any]],
    author: str,
    round: int,
) -> list[Node]:
    """Apply edits to existing nodes, in order, as one all-or-nothing batch.

    Ops: `update` (priority, difficulty, expected_speedup, notes, rationale, title; the root takes only
    notes, rationale and title), `prune` (the node and its whole subtree), `reopen` (closed, failed or
    pruned → open; its parent must not be pruned), `pin` / `unpin` (a pinned open intent is selected
    first), `veto` / `unveto` (a vetoed node is never selected and nothing grows under it; vetoing
    unpins). A pruned node accepts only `reopen`. Later items see the effect of earlier ones.
    Returns each item's node after the whole batch, in request order.
    """
    _check_author(author)
    _check_round(round)
    validated, problems = _validate_items(EditSpec, specs)
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        given = [f for f in _UPDATE_FIELDS if getattr(spec, f) is not None]
        if spec.op == "update" and not given:
            problems.append(
                EditProblem(
                    index=index,
                    node_id=spec.node_id,
                    problem="update changes nothing",
                    accepted=f"at least one of {', '.join(_UPDATE_FIELDS)}",
                )
            )
            validated[index] = None
        elif spec.op != "update" and given:
            problems.append(
                EditProblem(
                    index=index,
                    node_id=spec.node_id,
                    field=given[0],
                    problem=f"op '{spec.op}' takes no field values (got {', '.join(given)})",
                    accepted=f"op '{spec.op}' with node_id and reason only; to change fields use op 'update'",
                )
            )
            validated[index] = None
    async with store.transaction() as db:
        await rows.search_row(db, search_id)
        state = await rows.nodes_by_id(db, {s.node_id for s in validated if s is not None})
        siblings = _Siblings(db)
        plans: list[_Plan] = []
        for index, spec in enumerate(validated):
            if spec is None:
                continue
            node = state.get(spec.node_id)
            if node is None or node.search_id != search_id:
                where = "does not exist" if node is None else f"belongs to search {node.search_id}"
                problems.append(
                    EditProblem(
                        index=index,
                        node_id=spec.node_id,
                        field="node_id",
                        problem=f"node #{spec.node_id} {where}",
                        accepted=_ACCEPTED["node_id"],
                    )
                )
                continue
            plan = await _check_edit(db, index, spec, node, state, siblings, round, problems)
            if plan is not None:
                plans.append(plan)
        if problems:
            raise EditRejected(sorted(problems, key=lambda p: p.index))
        for plan in plans:
            columns = ", ".join(f"{c} = ?" for c in plan.changes)
            for start in range(0, len(plan.node_ids), 500):
                chunk = plan.node_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                await db.execute(
                    f"UPDATE nodes SET {columns} WHERE id IN ({marks})", (*plan.changes.values(), *chunk)
                )
            await rows.log_edit(
                db,
                search_id=search_id,
                op=plan.spec.op,
                node_id=plan.spec.node_id,
                payload=plan.payload,
                author=author,
                round=round,
                reason=plan.spec.reason,
            )
        final = await rows.nodes_by_id(db, {p.spec.node_id for p in plans})
        return [final[p.spec.node_id] for p in plans]


async def _check_edit(
    db: aiosqlite.Connection,
    index: int,
    spec: EditSpec,
    node: Node,
    state: dict[int, Node],
    siblings: _Siblings,
    round: int,
    problems: list[EditProblem],
) -> _Plan | None:
    """Check one edit against the batch's current view of the tree; update that view when accepted."""
    nid = node.id

    def refuse(problem: str, accepted: str, field: str | None = None) -> None:
        problems.append(
            EditProblem(index=index, node_id=nid, field=field, problem=problem, accepted=accepted)
        )

    if node.status == NodeStatus.pruned and spec.op != "reopen":
        refuse(
            f"node #{nid} is pruned; op '{spec.op}' does not apply to a pruned branch",
            f"op 'reopen' on #{nid} first",
        )
        return None
    if node.kind == "root" and spec.op != "update":
        refuse(
            f"op '{spec.op}' does not apply to the root",
            "op 'update' of the root's notes, rationale or title",
        )
        return None

    changes: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    ids = [nid]
    if spec.op == "update":
        fields = {f: getattr(spec, f) for f in _UPDATE_FIELDS if getattr(spec, f) is not None}
        if node.kind == "root" and not set(fields) <= _ROOT_UPDATE_FIELDS:
            bad = sorted(set(fields) - _ROOT_UPDATE_FIELDS)
            refuse(f"the root has no {', '.join(bad)}", "notes, rationale or title for the root", bad[0])
            return None
        if "title" in fields:
            fields["title"] = fields["title"].strip()
            if node.parent_id is not None:
                key = TitleKey.of(fields["title"], node.params)
                dup = await siblings.duplicate_of(node.parent_id, key, exclude=nid)
                if dup is not None:
                    problems.append(_duplicate_problem(index, nid, fields["title"], dup))
                    return None
                under = await siblings.under(node.parent_id)
                under[nid] = (key, fields["title"], node.status.value)
        changes.update(fields)
        payload["changes"] = dict(fields)
        state[nid] = node.model_copy(update=fields)
    elif spec.op == "prune":
        ids = await rows.subtree_ids(db, nid)
        missing = [i for i in ids if i not in state]
        state.update(await rows.nodes_by_id(db, missing))
        for i in ids:
            state[i] = state[i].model_copy(update={"status": NodeStatus.pruned})
        changes["status"] = "pruned"
        payload["subtree"] = ids
    elif spec.op == "reopen":
        if node.status not in _REOPENABLE:
            refuse(f"node #{nid} is {node.status.value}", "reopen of a closed, failed or pruned node")
            return None
        assert node.parent_id is not None
        parent = state.get(node.parent_id) or await rows.node(db, node.parent_id)
        state[parent.id] = parent
        if parent.status == NodeStatus.pruned:
            refuse(f"its parent #{parent.id} is pruned", f"reopen #{parent.id} first, then #{nid}")
            return None
        changes["status"] = "open"
        payload["from"] = node.status.value
        state[nid] = node.model_copy(update={"status": NodeStatus.open})
    elif spec.op == "pin":
        if node.vetoed:
            refuse(
                f"node #{nid} is vetoed; a vetoed node is never selected", f"unveto #{nid} first, then pin it"
            )
            return None
        changes["pinned"] = 1
        state[nid] = node.model_copy(update={"pinned": True})
    elif spec.op == "unpin":
        changes["pinned"] = 0
        state[nid] = node.model_copy(update={"pinned": False})
    elif spec.op == "veto":
        changes.update(vetoed=1, pinned=0)
        payload["unpinned"] = node.pinned
        state[nid] = node.model_copy(update={"vetoed": True, "pinned": False})
    elif spec.op == "unveto":
        changes["vetoed"] = 0
        state[nid] = node.model_copy(update={"vetoed": False})
    changes["round_updated"] = round
    return _Plan(spec, changes, payload, ids)


# ---------------------------------------------------------------------- replay


async def replay_edits(store: Store, search_id: int) -> list[Node]:
    """Rebuild the tree from the edit log alone: structure and every field an edit can set.

    Lifecycle statuses other than pruned/open (active, closed, failed), visit counts and best attempts
    are the evaluator's, not edits, so replayed nodes carry status open (or pruned) and no results.
    Comparing this with the stored tree is an audit that no edit path wrote anything unlogged.
    """
    await store.get_search(search_id)
    nodes: dict[int, dict[str, Any]] = {}
    children: dict[int, list[int]] = {}
    for edit in await store.list_edits(search_id):
        nid = edit.node_id
        assert nid is not None
        p = edit.payload
        if edit.op == "insert":
            nodes[nid] = {
                "id": nid,
                "search_id": search_id,
                "parent_id": p.get("parent_id"),
                "kind": p.get("kind", "intent"),
                "title": p["title"],
                "rationale": p.get("rationale", ""),
                "priority": p.get("priority", 0.5),
                "difficulty": p.get("difficulty", 3),
                "expected_speedup": p.get("expected_speedup"),
                "notes": p.get("notes", ""),
                "author": edit.author,
                "status": "open",
                "round_created": edit.round,
                "round_updated": edit.round,
                "params": p.get("params", {}),
                "base_attempt_id": p.get("base_attempt_id"),
            }
            if p.get("parent_id") is not None:
                children.setdefault(p["parent_id"], []).append(nid)
            continue
        node = nodes[nid]
        node["round_updated"] = edit.round
        if edit.op == "update":
            node.update(p["changes"])
        elif edit.op == "prune":
            stack = [nid]
            while stack:
                cur = stack.pop()
                nodes[cur]["status"] = "pruned"
                nodes[cur]["round_updated"] = edit.round
                stack.extend(children.get(cur, []))
        elif edit.op == "reopen":
            node["status"] = "open"
        elif edit.op in ("pin", "unpin"):
            node["pinned"] = edit.op == "pin"
        elif edit.op == "veto":
            node.update(vetoed=True, pinned=False)
        elif edit.op == "unveto":
            node["vetoed"] = False
    return [Node.model_validate(nodes[i]) for i in sorted(nodes)]
