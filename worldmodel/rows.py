"""Row <-> model conversion and small SQL helpers that run on a connection the caller holds, among them
an intent's status changes (so that a change of status and tree edits can share one transaction).

Only `worldmodel` modules use these; everything else goes through `Store` methods. Helpers here
never take the store's lock, so they are safe to call inside `Store.transaction()`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import aiosqlite

from ksearch.worldmodel.errors import InvalidTransition, NotFound
from ksearch.worldmodel.models import Attempt, Candidate, Edit, LLMCall, Node, NodeStatus, Search

NODE_COLUMNS = (
    "id, search_id, parent_id, kind, title, rationale, priority, difficulty, expected_speedup, notes, "
    "author, status, pinned, vetoed, round_created, round_updated, visits, best_attempt_id, "
    "base_attempt_id, params, handle"
)
SEARCH_COLUMNS = "id, name, task, config, status, round, best_attempt_id, created_at, updated_at"
ATTEMPT_COLUMNS = (
    "id, search_id, node_id, candidate_id, base_attempt_id, round, author, evaluation, created_at"
)
EDIT_COLUMNS = "id, search_id, op, node_id, payload, author, round, reason, created_at"
LLM_COLUMNS = (
    "id, search_id, phase, provider, model, tokens_in, tokens_out, cost_usd, latency_s, request, "
    "response, error, created_at, priced, cache_read_tokens, cache_write_tokens, cache_read_usd, cache_write_usd"
)


# SQLite integers are signed 64-bit: a larger id cannot name a row (and cannot even be bound).
MAX_ID = 2**63 - 1


def storable_id(value: int) -> bool:
    """Whether `value` can be an id in the database (binding a larger int raises OverflowError)."""
    return -MAX_ID - 1 <= value <= MAX_ID


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def dumps(value: Any) -> str:
    """Compact JSON for a column; raises TypeError naming the problem for non-JSON values."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"value is not JSON-serializable ({exc}); accepted: JSON data") from exc


def node_from_row(row: sqlite3.Row | Sequence[Any]) -> Node:
    return Node.model_validate(
        {
            "id": row[0],
            "search_id": row[1],
            "parent_id": row[2],
            "kind": row[3],
            "title": row[4],
            "rationale": row[5],
            "priority": row[6],
            "difficulty": row[7],
            "expected_speedup": row[8],
            "notes": row[9],
            "author": row[10],
            "status": row[11],
            "pinned": bool(row[12]),
            "vetoed": bool(row[13]),
            "round_created": row[14],
            "round_updated": row[15],
            "visits": row[16],
            "best_attempt_id": row[17],
            "base_attempt_id": row[18],
            "params": json.loads(row[19]),
            "handle": row[20],
        }
    )


def search_from_row(row: Sequence[Any]) -> Search:
    return Search.model_validate(
        {
            "id": row[0],
            "name": row[1],
            "task": row[2],
            "config": json.loads(row[3]),
            "status": row[4],
            "round": row[5],
            "best_attempt_id": row[6],
            "created_at": row[7],
            "updated_at": row[8],
        }
    )


def attempt_from_row(row: Sequence[Any]) -> Attempt:
    return Attempt.model_validate(
        {
            "id": row[0],
            "search_id": row[1],
            "node_id": row[2],
            "candidate_id": row[3],
            "base_attempt_id": row[4],
            "round": row[5],
            "author": row[6],
            "evaluation": json.loads(row[7]) if row[7] is not None else None,
            "created_at": row[8],
        }
    )


def candidate_from_row(row: Sequence[Any]) -> Candidate:
    return Candidate.model_validate(
        {"id": row[0], "language": row[1], "source": row[2], "created_at": row[3]}
    )


def edit_from_row(row: Sequence[Any]) -> Edit:
    return Edit.model_validate(
        {
            "id": row[0],
            "search_id": row[1],
            "op": row[2],
            "node_id": row[3],
            "payload": json.loads(row[4]),
            "author": row[5],
            "round": row[6],
            "reason": row[7],
            "created_at": row[8],
        }
    )


def llm_call_from_row(row: Sequence[Any]) -> LLMCall:
    keys = [k.strip() for k in LLM_COLUMNS.split(",")]
    return LLMCall.model_validate(dict(zip(keys, row, strict=True)))


async def fetchone(db: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    async with db.execute(sql, params) as cur:
        return await cur.fetchone()


async def fetchall(db: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    async with db.execute(sql, params) as cur:
        return list(await cur.fetchall())


async def node(db: aiosqlite.Connection, node_id: int) -> Node:
    row = None
    if storable_id(node_id):
        row = await fetchone(db, f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ?", (node_id,))
    if row is None:
        raise NotFound(f"no node #{node_id}; node ids come from the tree (`ksearch tree SEARCH`)")
    return node_from_row(row)


async def set_node_status(db: aiosqlite.Connection, node_id: int, status: Literal["open", "active"]) -> Node:
    """Claim an open intent (open → active) or release a claim (active → open); see `Store.set_node_status`."""
    allowed = {("open", "active"), ("active", "open")}
    found = await node(db, node_id)
    if found.kind == "root":
        raise InvalidTransition("the root is not an intent and has no refinement status")
    if status == "active" and found.vetoed:
        raise InvalidTransition(f"node #{node_id} is vetoed and is never selected; unveto it first")
    if found.status == status == "open":
        return found
    if (found.status.value, status) not in allowed:
        raise InvalidTransition(
            f"node #{node_id} is {found.status.value}; set_node_status accepts open → active "
            "(claim) and active → open (release)"
        )
    await db.execute("UPDATE nodes SET status = ? WHERE id = ?", (status, node_id))
    return await node(db, node_id)


async def close_node(db: aiosqlite.Connection, node_id: int, status: Literal["closed", "failed"]) -> Node:
    """End an intent's refinement (`closed` with a correct attempt, else `failed`); see `Store.close_node`."""
    if status not in ("closed", "failed"):
        raise InvalidTransition(f"close_node status {status!r}; accepted: closed, failed")
    found = await node(db, node_id)
    if found.kind == "root":
        raise InvalidTransition("the root is not an intent and cannot be closed")
    if found.status.value == status or found.status == NodeStatus.pruned:
        return found  # repeated, or pruned meanwhile (e.g. by a human): it stays as it is
    if found.status not in (NodeStatus.open, NodeStatus.active):
        raise InvalidTransition(
            f"node #{node_id} is {found.status.value}; close_node accepts open or active nodes"
        )
    if status == "closed" and found.best_attempt_id is None:
        raise InvalidTransition(
            f"node #{node_id} has no correct attempt, so it cannot be closed; accepted: failed"
        )
    if status == "failed" and found.best_attempt_id is not None:
        raise InvalidTransition(
            f"node #{node_id} has a correct attempt (#{found.best_attempt_id}); accepted: closed"
        )
    await db.execute("UPDATE nodes SET status = ? WHERE id = ?", (status, node_id))
    return await node(db, node_id)


async def nodes_by_id(db: aiosqlite.Connection, ids: Iterable[int]) -> dict[int, Node]:
    """The nodes among `ids` that exist (missing ids are simply absent from the result)."""
    wanted = sorted(i for i in set(ids) if storable_id(i))
    out: dict[int, Node] = {}
    # SQLite limits bound parameters per statement; chunk to stay well below it.
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in await fetchall(db, f"SELECT {NODE_COLUMNS} FROM nodes WHERE id IN ({marks})", chunk):
            out[row[0]] = node_from_row(row)
    return out


async def search_row(db: aiosqlite.Connection, search_id: int) -> Search:
    row = None
    if storable_id(search_id):
        row = await fetchone(db, f"SELECT {SEARCH_COLUMNS} FROM searches WHERE id = ?", (search_id,))
    if row is None:
        raise NotFound(f"no search with id {search_id}; {await describe_searches(db)}")
    return search_from_row(row)


async def describe_searches(db: aiosqlite.Connection, limit: int = 20) -> str:
    """A short 'what exists' phrase for NotFound messages."""
    rows = await fetchall(db, "SELECT id, name FROM searches ORDER BY id LIMIT ?", (limit + 1,))
    if not rows:
        return "there are no searches yet (create one with create_search / `ksearch run`)"
    listed = ", ".join(f"{r[0]} '{r[1]}'" for r in rows[:limit])
    more = " and more" if len(rows) > limit else ""
    return f"existing searches (id 'name'): {listed}{more}"


async def attempt(db: aiosqlite.Connection, attempt_id: int) -> Attempt:
    row = None
    if storable_id(attempt_id):
        row = await fetchone(db, f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?", (attempt_id,))
    if row is None:
        raise NotFound(f"no attempt #{attempt_id}")
    return attempt_from_row(row)


async def subtree_ids(db: aiosqlite.Connection, node_id: int) -> list[int]:
    """`node_id` and all its descendants, in breadth-first order."""
    rows = await fetchall(
        db,
        """WITH RECURSIVE sub(id, depth) AS (
               SELECT ?, 0
               UNION ALL
               SELECT n.id, sub.depth + 1 FROM nodes AS n JOIN sub ON n.parent_id = sub.id
           )
           SELECT id FROM sub ORDER BY depth, id""",
        (node_id,),
    )
    return [r[0] for r in rows]


async def log_edit(
    db: aiosqlite.Connection,
    *,
    search_id: int,
    op: str,
    node_id: int | None,
    payload: dict[str, Any],
    author: str,
    round: int,
    reason: str,
) -> int:
    cur = await db.execute(
        "INSERT INTO edits (search_id, op, node_id, payload, author, round, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (search_id, op, node_id, dumps(payload), author, round, reason, now_iso()),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


async def insert_node(
    db: aiosqlite.Connection,
    *,
    search_id: int,
    parent: Node | None,
    title: str,
    rationale: str = "",
    priority: float = 0.5,
    difficulty: int = 3,
    expected_speedup: float | None = None,
    notes: str = "",
    author: str,
    round: int,
    params: dict[str, Any] | None = None,
    base_attempt_id: int | None = None,
    handle: str | None = None,
) -> int:
    """Insert a root (parent None) or an intent; it inherits its parent's branch. Returns the new id."""
    kind = "root" if parent is None else "intent"
    cur = await db.execute(
        "INSERT INTO nodes (search_id, parent_id, kind, title, rationale, priority, difficulty, "
        "expected_speedup, notes, author, status, round_created, round_updated, params, "
        "base_attempt_id, handle, branch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, "
        "(SELECT branch_id FROM nodes WHERE id = ?))",
        (
            search_id,
            parent.id if parent else None,
            kind,
            title,
            rationale,
            priority,
            difficulty,
            expected_speedup,
            notes,
            author,
            round,
            round,
            dumps(params or {}),
            base_attempt_id,
            handle,
            parent.id if parent else None,
        ),
    )
    new_id = cur.lastrowid
    assert new_id is not None
    if parent is not None and parent.kind == "root":
        # A child of the root starts its own branch.
        await db.execute("UPDATE nodes SET branch_id = id WHERE id = ?", (new_id,))
    return new_id
