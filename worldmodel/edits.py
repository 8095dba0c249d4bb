"""Validated changes to the intent tree: inserting intents, editing and moving existing nodes.

Every call is all-or-nothing: all items are checked first, every problem is reported at once in an
`EditRejected` (what was wrong and what would be accepted), and only a fully valid batch is written,
in one transaction, each item appended to the edit log with its author, round and reason.

Integrity rule: nothing here can write a result. `IntentSpec` and `EditSpec` have no result fields
and forbid unknown keys, raw dicts are validated through them, and the SQL below only ever touches
non-result columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite

from ksearch.worldmodel import handles, rows
from ksearch.worldmodel.edit_checks import (
    _ACCEPTED,
    RESULT_KEYS,
    _check_author,
    _check_round,
    _duplicate_problem,
    _Siblings,
    _validate_items,
)
from ksearch.worldmodel.errors import EditProblem, EditRejected
from ksearch.worldmodel.intents import apply_intents
from ksearch.worldmodel.models import Attempt, EditSpec, Evaluation, Node, NodeStatus
from ksearch.worldmodel.similarity import TitleKey
from ksearch.worldmodel.store import Store

__all__ = ["RESULT_KEYS", "EditProblem", "EditRejected", "apply_edits", "apply_intents", "replay_edits"]

_UPDATE_FIELDS = (
    "priority",
    "difficulty",
    "expected_speedup",
    "notes",
    "rationale",
    "title",
    "params",
    "base_attempt_id",
)
_OP_FIELDS: dict[str, tuple[str, ...]] = {"update": _UPDATE_FIELDS, "move": ("parent_id",)}
_ROOT_UPDATE_FIELDS = frozenset({"notes", "rationale", "title"})
_REOPENABLE = (NodeStatus.closed, NodeStatus.failed, NodeStatus.pruned)


# ---------------------------------------------------------------------- edits


def _given(spec: EditSpec) -> list[str]:
    """The fields an edit sets. Null means "leave it as it is", except an explicit null
    `base_attempt_id` on `update`, which clears the intent's base."""
    out: list[str] = []
    for f in (*_UPDATE_FIELDS, "parent_id"):
        if getattr(spec, f) is not None or (
            f == "base_attempt_id" and spec.op == "update" and f in spec.model_fields_set
        ):
            out.append(f)
    return out


def _shape_problem(index: int, spec: EditSpec) -> EditProblem | None:
    """Whether the item's fields fit its op (checked before anything is read from the database)."""
    given = _given(spec)
    allowed = _OP_FIELDS.get(spec.op, ())
    extra = [f for f in given if f not in allowed]

    def problem(text: str, accepted: str, field: str | None = None) -> EditProblem:
        return EditProblem(
            index=index, node_id=handles.resolved(spec.node_id), field=field, problem=text, accepted=accepted
        )

    if spec.op == "update" and "parent_id" in extra:
        return problem(
            "op 'update' does not move a node (got parent_id)",
            "op 'move' with node_id and parent_id, as a separate item",
            "parent_id",
        )
    if spec.op == "move" and extra:
        return problem(
            f"op 'move' takes only parent_id (got {', '.join(extra)})",
            "op 'move' with node_id, parent_id and reason; to change fields add an op 'update' item",
            extra[0],
        )
    if extra:
        return problem(
            f"op '{spec.op}' takes no field values (got {', '.join(extra)})",
            f"op '{spec.op}' with node_id and reason only; to change fields use op 'update'",
            extra[0],
        )
    if spec.op == "update" and not given:
        return problem("update changes nothing", f"at least one of {', '.join(_UPDATE_FIELDS)}")
    if spec.op == "move" and not given:
        return problem("op 'move' needs parent_id", _ACCEPTED["edit.parent_id"], "parent_id")
    return None


class _Plan:
    """One validated edit, ready to write."""

    def __init__(
        self,
        spec: EditSpec,
        changes: dict[str, Any],
        payload: dict[str, Any],
        node_ids: list[int],
        regroup: tuple[Node, list[int]] | None = None,
    ):
        self.spec = spec
        self.node_id = handles.resolved(spec.node_id)
        self.changes = changes  # column → value, applied to every id in node_ids
        self.payload = payload
        self.node_ids = node_ids
        self.regroup = regroup  # a move: (new parent, moved subtree), whose branch follows the parent


class _View:
    """The tree as the batch has left it so far: later items are checked against earlier ones.

    Nodes are loaded on first use; the parent → children structure of the search only when a prune
    or a move needs a subtree (and then kept current through moves).
    """

    def __init__(self, db: aiosqlite.Connection, search_id: int, nodes: dict[int, Node]) -> None:
        self._db = db
        self._search_id = search_id
        self.nodes = nodes
        self._children: dict[int, list[int]] | None = None

    async def node(self, nid: int) -> Node | None:
        if nid not in self.nodes:
            found = await rows.nodes_by_id(self._db, [nid])
            if nid not in found:
                return None
            self.nodes[nid] = found[nid]
        return self.nodes[nid]

    async def _structure(self) -> dict[int, list[int]]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            for nid, pid in await rows.fetchall(
                self._db,
                "SELECT id, parent_id FROM nodes WHERE search_id = ? ORDER BY id",
                (self._search_id,),
            ):
                # earlier moves of this batch are in self.nodes, not yet in the database
                seen = self.nodes.get(nid)
                parent = seen.parent_id if seen is not None else pid
                if parent is not None:
                    children.setdefault(parent, []).append(nid)
            for kids in children.values():
                kids.sort()
            self._children = children
        return self._children

    async def subtree(self, nid: int) -> list[int]:
        """`nid` and its descendants, breadth-first, each level in id order."""
        children = await self._structure()
        out, level = [nid], [nid]
        while level:
            level = sorted(k for x in level for k in children.get(x, []))
            out.extend(level)
        missing = [i for i in out if i not in self.nodes]
        self.nodes.update(await rows.nodes_by_id(self._db, missing))
        return out

    async def inside(self, nid: int, top: int) -> bool:
        """Whether `nid` is `top` or one of its descendants (walks up from `nid`)."""
        x: int | None = nid
        while x is not None:
            if x == top:
                return True
            found = await self.node(x)
            x = found.parent_id if found is not None else None
        return False

    async def move(self, nid: int, parent_id: int) -> None:
        children = await self._structure()
        node = self.nodes[nid]
        assert node.parent_id is not None
        children[node.parent_id].remove(nid)
        children.setdefault(parent_id, []).append(nid)
        children[parent_id].sort()
        self.nodes[nid] = node.model_copy(update={"parent_id": parent_id})


async def apply_edits(
    store: Store,
    search_id: int,
    specs: Sequence[EditSpec | Mapping[str, Any]],
    author: str,
    round: int,
) -> list[Node]:
    """Apply edits to existing nodes, in order, as one all-or-nothing batch (see `apply_edits_in`)."""
    async with store.transaction() as db:
        return await apply_edits_in(db, search_id, specs, author=author, round=round)


async def apply_edits_in(
    db: aiosqlite.Connection,
    search_id: int,
    specs: Sequence[EditSpec | Mapping[str, Any]],
    *,
    author: str,
    round: int,
) -> list[Node]:
    """Apply edits to existing nodes, in order, as one all-or-nothing batch, inside the caller's transaction
    (`Store.transaction()`; a refusal raises, so the caller's rollback drops whatever else it wrote).

    Ops: `update` (priority, difficulty, expected_speedup, notes, rationale, title, params,
    base_attempt_id; the root takes only notes, rationale and title), `move` (the node and its subtree
    go under `parent_id`), `prune` (the node and its whole subtree), `reopen` (closed, failed or
    pruned → open; its parent must not be pruned), `pin` / `unpin` (a pinned open intent is selected
    first), `veto` / `unveto` (a vetoed node is never selected and nothing grows under it; vetoing
    unpins). A pruned node accepts only `reopen`. Later items see the effect of earlier ones.
    Returns each item's node after the whole batch, in request order.
    """
    _check_author(author)
    _check_round(round)
    validated, problems = _validate_items(EditSpec, specs)
    await handles.resolve_edits(db, search_id, validated, problems)
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        shape = _shape_problem(index, spec)
        if shape is not None:
            problems.append(shape)
            validated[index] = None
    await rows.search_row(db, search_id)
    wanted = {handles.resolved(s.node_id) for s in validated if s is not None}
    wanted |= {handles.resolved(s.parent_id) for s in validated if s is not None and s.parent_id is not None}
    view = _View(db, search_id, await rows.nodes_by_id(db, wanted))
    bases = await _attempts_by_id(
        db, {s.base_attempt_id for s in validated if s is not None and s.base_attempt_id is not None}
    )
    siblings = _Siblings(db)
    plans: list[_Plan] = []
    for index, spec in enumerate(validated):
        if spec is None:
            continue
        node = await view.node(handles.resolved(spec.node_id))
        if node is None or node.search_id != search_id:
            where = "does not exist" if node is None else f"belongs to search {node.search_id}"
            problems.append(
                EditProblem(
                    index=index,
                    node_id=handles.resolved(spec.node_id),
                    field="node_id",
                    problem=f"node #{handles.resolved(spec.node_id)} {where}",
                    accepted=_ACCEPTED["node_id"],
                )
            )
            continue
        plan = await _check_edit(index, spec, node, view, siblings, bases, round, problems)
        if plan is not None:
            plans.append(plan)
    if problems:
        raise EditRejected(sorted(problems, key=lambda p: p.index))
    for plan in plans:
        await _write(db, plan)
        await rows.log_edit(
            db,
            search_id=search_id,
            op=plan.spec.op,
            node_id=plan.node_id,
            payload=plan.payload,
            author=author,
            round=round,
            reason=plan.spec.reason,
        )
    final = await rows.nodes_by_id(db, {p.node_id for p in plans})
    return [final[p.node_id] for p in plans]


async def _write(db: aiosqlite.Connection, plan: _Plan) -> None:
    changes = {k: rows.dumps(v) if k == "params" else v for k, v in plan.changes.items()}
    columns = ", ".join(f"{c} = ?" for c in changes)
    for start in range(0, len(plan.node_ids), 500):
        chunk = plan.node_ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        await db.execute(f"UPDATE nodes SET {columns} WHERE id IN ({marks})", (*changes.values(), *chunk))
    if plan.regroup is not None:
        # Selection sums visits per top-level branch: a moved subtree joins its new parent's branch
        # (a child of the root is a branch of its own).
        parent, subtree = plan.regroup
        if parent.kind == "root":
            branch = plan.node_id
        else:
            row = await rows.fetchone(db, "SELECT branch_id FROM nodes WHERE id = ?", (parent.id,))
            branch = row[0]
        for start in range(0, len(subtree), 500):
            chunk = subtree[start : start + 500]
            marks = ",".join("?" * len(chunk))
            await db.execute(f"UPDATE nodes SET branch_id = ? WHERE id IN ({marks})", (branch, *chunk))


async def _attempts_by_id(db: aiosqlite.Connection, ids: set[int]) -> dict[int, Attempt]:
    """The attempts among `ids` that exist, with their evaluations (to say why one is refused)."""
    wanted = sorted(i for i in ids if rows.storable_id(i))
    out: dict[int, Attempt] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {rows.ATTEMPT_COLUMNS} FROM attempts WHERE id IN ({marks})"
        for row in await rows.fetchall(db, sql, chunk):
            out[int(row[0])] = rows.attempt_from_row(row)
    return out


def _not_correct(ev: Evaluation | None) -> str | None:
    """Why an attempt's code is no starting point (it did not pass correctness), or None."""
    if ev is None:
        return "it was never evaluated"
    if ev.status == "ok":
        return None
    detail = ev.error or ""
    if ev.status == "compile_error" and ev.compile is not None:
        errors = [d for d in ev.compile.diagnostics if d.severity == "error"]
        if errors:
            where = f" (line {errors[0].line})" if errors[0].line is not None else ""
            detail = f"{errors[0].message}{where}"
    elif ev.status == "incorrect":
        failed = [c for c in ev.correctness if not c.passed]
        detail = (
            "; ".join(
                f"workload {c.workload!r}: {c.kind}"
                + (f", max abs err {c.max_abs_err:.3g}" if c.max_abs_err is not None else "")
                for c in failed[:2]
            )
            or detail
        )
    elif ev.status == "flagged" and ev.flags:
        detail = "; ".join(ev.flags[:2])
    detail = _one_line(detail)
    if len(detail) > 200:
        detail = detail[:197] + "..."
    return f"status {ev.status}" + (f": {detail}" if detail else "")


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def _check_edit(
    index: int,
    spec: EditSpec,
    node: Node,
    view: _View,
    siblings: _Siblings,
    bases: dict[int, Attempt],
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
        what = "the root has no parent to change" if spec.op == "move" else "it is not an intent"
        refuse(
            f"op '{spec.op}' does not apply to the root ({what})",
            "op 'update' of the root's notes, rationale or title",
        )
        return None

    changes: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    ids = [nid]
    regroup: tuple[Node, list[int]] | None = None
    if spec.op == "update":
        fields = {f: getattr(spec, f) for f in _given(spec)}
        if node.kind == "root" and not set(fields) <= _ROOT_UPDATE_FIELDS:
            bad = sorted(set(fields) - _ROOT_UPDATE_FIELDS)
            refuse(f"the root has no {', '.join(bad)}", "notes, rationale or title for the root", bad[0])
            return None
        base_id = fields.get("base_attempt_id")
        if base_id is not None:
            base = bases.get(base_id)
            why = None
            if base is None or base.search_id != node.search_id:
                why = "does not exist" if base is None else f"belongs to search {base.search_id}"
            else:
                failed = _not_correct(base.evaluation)
                why = None if failed is None else f"did not pass correctness ({failed})"
            if why is not None:
                refuse(f"attempt #{base_id} {why}", _ACCEPTED["edit.base_attempt_id"], "base_attempt_id")
                return None
        if "title" in fields:
            fields["title"] = fields["title"].strip()
        if ("title" in fields or "params" in fields) and node.parent_id is not None:
            # params are part of an intent's identity: "tune blocks" with other values is another idea
            title = fields.get("title", node.title)
            key = TitleKey.of(title, fields.get("params", node.params))
            dup = await siblings.duplicate_of(node.parent_id, key, exclude=nid)
            if dup is not None:
                problems.append(_duplicate_problem(index, nid, title, dup))
                return None
            (await siblings.under(node.parent_id))[nid] = (key, title, node.status.value)
        changes.update(fields)
        payload["changes"] = dict(fields)
        view.nodes[nid] = node.model_copy(update=fields)
    elif spec.op == "move":
        assert spec.parent_id is not None and node.parent_id is not None
        pid = handles.resolved(spec.parent_id)
        accepted = _ACCEPTED["edit.parent_id"]
        parent = await view.node(pid)
        if parent is None or parent.search_id != node.search_id:
            where = "does not exist" if parent is None else f"belongs to search {parent.search_id}"
            refuse(f"new parent node #{pid} {where}", accepted, "parent_id")
            return None
        if pid == node.parent_id:
            refuse(f"node #{nid} is already under #{pid}", "a parent other than its current one", "parent_id")
            return None
        if await view.inside(pid, nid):
            where = "the node itself" if pid == nid else f"inside the subtree of #{nid}"
            refuse(f"new parent #{pid} is {where}: the tree would have a cycle", accepted, "parent_id")
            return None
        if parent.status == NodeStatus.pruned:
            refuse(
                f"new parent #{pid} is pruned",
                f"a parent that is not pruned, or reopen #{pid} first",
                "parent_id",
            )
            return None
        if parent.vetoed:
            refuse(
                f"new parent #{pid} is vetoed: nothing grows under it",
                f"another parent, or unveto #{pid} first",
                "parent_id",
            )
            return None
        key = TitleKey.of(node.title, node.params)
        dup = await siblings.duplicate_of(pid, key, exclude=nid)
        if dup is not None:
            other, other_title, status = dup
            refuse(
                f"title {node.title!r} is a near-duplicate of #{other} {other_title!r} ({status}) under the new parent #{pid}",
                f"another parent, or update the title first (in an earlier item), or prune #{other}",
                "parent_id",
            )
            return None
        subtree = await view.subtree(nid)
        (await siblings.under(node.parent_id)).pop(nid, None)
        (await siblings.under(pid))[nid] = (key, node.title, node.status.value)
        await view.move(nid, pid)
        changes["parent_id"] = pid
        payload.update(parent_id=pid, from_parent_id=node.parent_id, subtree=subtree)
        regroup = (parent, subtree)
    elif spec.op == "prune":
        ids = await view.subtree(nid)
        for i in ids:
            view.nodes[i] = view.nodes[i].model_copy(update={"status": NodeStatus.pruned})
        changes["status"] = "pruned"
        payload["subtree"] = ids
    elif spec.op == "reopen":
        if node.status not in _REOPENABLE:
            refuse(f"node #{nid} is {node.status.value}", "reopen of a closed, failed or pruned node")
            return None
        assert node.parent_id is not None
        parent = await view.node(node.parent_id)
        assert parent is not None  # a foreign key: the parent row exists
        if parent.status == NodeStatus.pruned:
            refuse(f"its parent #{parent.id} is pruned", f"reopen #{parent.id} first, then #{nid}")
            return None
        changes["status"] = "open"
        payload["from"] = node.status.value
        view.nodes[nid] = node.model_copy(update={"status": NodeStatus.open})
    elif spec.op == "pin":
        if node.vetoed:
            refuse(
                f"node #{nid} is vetoed; a vetoed node is never selected", f"unveto #{nid} first, then pin it"
            )
            return None
        changes["pinned"] = 1
        view.nodes[nid] = node.model_copy(update={"pinned": True})
    elif spec.op == "unpin":
        changes["pinned"] = 0
        view.nodes[nid] = node.model_copy(update={"pinned": False})
    elif spec.op == "veto":
        changes.update(vetoed=1, pinned=0)
        payload["unpinned"] = node.pinned
        view.nodes[nid] = node.model_copy(update={"vetoed": True, "pinned": False})
    elif spec.op == "unveto":
        changes["vetoed"] = 0
        view.nodes[nid] = node.model_copy(update={"vetoed": False})
    changes["round_updated"] = round
    return _Plan(spec, changes, payload, ids, regroup)


# ---------------------------------------------------------------------- replay


async def replay_edits(store: Store, search_id: int) -> list[Node]:
    """Rebuild the tree from the edit log alone: structure (inserts, moves) and every field an edit can set.

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
        if (
            edit.op == "finish"
        ):  # a refine phase's end: a lifecycle status with its reason, not a field an edit sets
            continue
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
        elif edit.op == "move":
            children[node["parent_id"]].remove(nid)
            children.setdefault(p["parent_id"], []).append(nid)
            node["parent_id"] = p["parent_id"]
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
