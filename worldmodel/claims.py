"""The loop's decisions that several processes may race for, made in the database.

Several processes may advance one search at once (MCP servers, a driver, the CLI, the page), each with its own
connection to the file. A rule checked in Python and then written in a later transaction lets two of them pass the
check before either writes: two claims on a search with one lane, a round started past the round budget, an intent
finished twice. So each of these decisions is taken inside the one `BEGIN IMMEDIATE` transaction that writes it
(the write lock is held from the check to the commit), by a conditional write whose row count says whether it
happened (the claim: one UPDATE of the intent `WHERE status = 'open'` and a lane is free and a round is left; the
finish: `WHERE status = 'active'`):

- `claim_intent`: the claim of an intent (open → active) and the start of its round (the search's round + 1, its
  status `running`, the code its refine phase builds on) are one transaction, refused while `lanes` intents are
  being refined or the round budget is used up. The loser of a race gets the refusal a later caller gets.
- `release_active`: the claims a stopped or killed run left are given back; a round that recorded no attempt is
  not counted (the next claim starts it again), so a stop costs no round.
- `finish_refine` (finish.py): an intent's refine phase ends once; a second finish finds it no longer active and
  is refused, and `finish_record` says who finished it and when.

The records of a refine phase live in the key-value cache, in the same file: `refine:<node id>` (the round and
base of the claim, and its end) and `finished:<search id>` (the intent whose phase ended last).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import aiosqlite
from pydantic import BaseModel

from ksearch.worldmodel import rows
from ksearch.worldmodel.models import Node
from ksearch.worldmodel.select import DEFAULT_WEIGHTS, SelectWeights, select_in
from ksearch.worldmodel.store import Store

REFINE_KEY = "refine:{node_id}"
"""Where a claim records its round and the code its refine phase starts from (the base is fixed at the claim: the
node's own best changes while it is refined), and where the phase's end is recorded."""
FINISHED_KEY = "finished:{search_id}"
"""The intent whose refine phase ended last, and in which round: the update phase follows it."""


class ClaimRefused(BaseModel):
    """Why the database refused a claim (nothing was written)."""

    kind: Literal["lanes", "rounds", "not_open"]
    """lanes: as many intents as lanes are being refined; rounds: the round budget is used up; not_open: the intent
    named is no longer open"""
    active: list[int]
    """The intents being refined when the claim was refused"""
    rounds_used: int
    """The search's round then"""
    rounds: int | None
    """Its round budget"""

    def text(self) -> str:
        """The refusal in words, for a caller that cannot say more (the faces build theirs from the loop's state)."""
        if self.kind == "rounds":
            return f"round budget reached ({self.rounds_used} of {self.rounds} rounds started)"
        ids = ", ".join(f"#{i}" for i in self.active)
        if self.kind == "lanes":
            return f"intent(s) {ids} are being refined: finish one first with finish_intent"
        return "the intent is no longer open: another caller claimed or changed it"


class Claimed(BaseModel):
    """What `claim_intent` did: the intent claimed and the round it started, or nothing open, or a refusal."""

    node: Node | None
    """The intent now active (None: nothing was claimed)"""
    reason: str
    """Why this intent (its score, or 'chosen by the caller'), or why none"""
    round: int
    """The search's round after the call"""
    base_attempt_id: int | None = None
    """The attempt whose code the refine phase builds on (None: from scratch)"""
    refused: ClaimRefused | None = None
    """Set when the claim was refused (lanes full, round budget used up, the named intent taken)"""


class FinishRecord(BaseModel):
    """How an intent's last refine phase ended: recorded with the end, in the same transaction."""

    status: str
    """The status it ended with: closed, failed, or open (released)"""
    at: datetime
    """When"""
    by: str
    """Who asked (the finish's author)"""
    process: str
    """Which process wrote it: 'pid N on HOST'"""

    def describe(self) -> str:
        return f"{self.status} at {self.at:%Y-%m-%d %H:%M:%S} UTC by {self.by} ({self.process})"


def this_process() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


async def claim_intent(
    store: Store,
    search_id: int,
    *,
    node_id: int | None = None,
    skip: frozenset[int] = frozenset(),
    lanes: int | None = 1,
    keep_round_budget: bool = True,
    weights: SelectWeights = DEFAULT_WEIGHTS,
) -> Claimed:
    """Claim an intent and start its round, in one transaction: the intent named (`node_id`), else the selection
    rule's pick (passing over `skip`).

    Refused, writing nothing, while `lanes` intents of the search are being refined (None: no limit) or, with
    `keep_round_budget`, when the search has started as many rounds as its round budget allows. The round
    starts with the claim: the search's round + 1, its status `running`, the claim's round and base recorded
    under `REFINE_KEY`."""
    async with store.transaction() as db:
        search = await rows.search_row(db, search_id)
        budget = search.config.budgets.rounds if keep_round_budget else None
        if node_id is not None:
            chosen, reason = node_id, "chosen by the caller"
        else:
            sel = await select_in(
                db, search_id, search.config.difficulty_cap, search.round, weights=weights, skip=skip
            )
            if sel.node_id is None:
                return Claimed(node=None, reason=sel.reason, round=search.round)
            chosen, reason = sel.node_id, sel.reason
        # one statement decides: the intent is still open, a lane is free and a round is left
        cur = await db.execute(
            "UPDATE nodes SET status = 'active' WHERE id = ? AND search_id = ? AND kind = 'intent' "
            "AND status = 'open' AND vetoed = 0 "
            "AND (? IS NULL OR (SELECT count(*) FROM nodes WHERE search_id = ? AND kind = 'intent' "
            "AND status = 'active') < ?) "
            "AND (? IS NULL OR (SELECT round FROM searches WHERE id = ?) < ?)",
            (chosen, search_id, lanes, search_id, lanes, budget, search_id, budget),
        )
        if cur.rowcount != 1:
            return await _refused(db, search_id, search.round, lanes=lanes, budget=budget)
        await db.execute(
            "UPDATE searches SET round = round + 1, status = 'running', updated_at = ? WHERE id = ?",
            (rows.now_iso(), search_id),
        )
        node = await rows.node(db, chosen)
        base = await _base_attempt(db, node)
        await _put(
            db,
            REFINE_KEY.format(node_id=chosen),
            {
                "round": search.round + 1,
                "base_attempt_id": base,
                "claimed_at": rows.now_iso(),
                "claimed_by": this_process(),
            },
        )
        return Claimed(node=node, reason=reason, round=search.round + 1, base_attempt_id=base)


async def _refused(
    db: aiosqlite.Connection, search_id: int, round: int, *, lanes: int | None, budget: int | None
) -> Claimed:
    """Why the claim's conditional write changed no row (read in the same transaction: nothing was written)."""
    active = [
        int(r[0])
        for r in await rows.fetchall(
            db,
            "SELECT id FROM nodes WHERE search_id = ? AND kind = 'intent' AND status = 'active' ORDER BY id",
            (search_id,),
        )
    ]
    kind: Literal["lanes", "rounds", "not_open"] = (
        "lanes"
        if lanes is not None and len(active) >= lanes
        else "rounds"
        if budget is not None and round >= budget
        else "not_open"
    )
    refused = ClaimRefused(kind=kind, active=active, rounds_used=round, rounds=budget)
    return Claimed(node=None, reason=refused.text(), round=round, refused=refused)


async def _base_attempt(db: aiosqlite.Connection, node: Node) -> int | None:
    """The code an intent starts from: the attempt it names, else the best attempt on its path to the root."""
    if node.base_attempt_id is not None:
        return node.base_attempt_id
    cur: Node | None = node
    while cur is not None:
        if cur.best_attempt_id is not None:
            return cur.best_attempt_id
        cur = await rows.node(db, cur.parent_id) if cur.parent_id is not None else None
    return None


async def get(db: aiosqlite.Connection, key: str) -> dict[str, Any]:
    """The JSON object cached under `key` on a held connection ({} when none)."""
    row = await rows.fetchone(db, "SELECT value FROM cache WHERE key = ?", (key,))
    got = json.loads(row[0]) if row is not None else None
    return got if isinstance(got, dict) else {}


async def _put(db: aiosqlite.Connection, key: str, value: Mapping[str, Any]) -> None:
    await db.execute(
        "INSERT INTO cache (key, value, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
        (key, rows.dumps(dict(value)), rows.now_iso()),
    )


async def record_finish(
    db: aiosqlite.Connection,
    search: int,
    node_id: int,
    status: str,
    *,
    by: str,
    applied: Mapping[str, Any] | None,
    round: int,
) -> None:
    """Inside the finish's transaction: the end of the phase under `REFINE_KEY` (who, when) and the intent whose
    phase ended last under `FINISHED_KEY` (the round of its claim, `round` when it never was)."""
    key = REFINE_KEY.format(node_id=node_id)
    phase = await get(db, key)
    finish = FinishRecord(status=status, at=datetime.now(UTC), by=by, process=this_process())
    await _put(db, key, {**phase, "finished": finish.model_dump(mode="json")})
    await _put(
        db,
        FINISHED_KEY.format(search_id=search),
        {
            "round": phase.get("round", round),
            "node_id": node_id,
            "applied": dict(applied) if applied is not None else None,
        },
    )


async def finish_record(store: Store, node_id: int) -> FinishRecord | None:
    """How the intent's last refine phase ended, when it was recorded (None: never finished, or before records)."""
    async with store.reading() as db:
        got = (await get(db, REFINE_KEY.format(node_id=node_id))).get("finished")
    return FinishRecord.model_validate(got) if got else None


class Released(BaseModel):
    """An intent a run left claimed, now open again (`release_active`)."""

    node: Node
    """The intent, now open"""
    round: int | None
    """The round its claim started (None: no claim was recorded for it)"""
    given_back: bool
    """True when its round produced no attempt and was the last started: the round is not counted, and the next
    claim starts it again"""


async def release_active(store: Store, search_id: int) -> list[Released]:
    """Every intent of the search left `active` back to `open`, in one transaction (a claim finished meanwhile by
    another process is not touched). A claim whose round recorded no attempt is undone as a whole: an interrupted
    round is resumed, not counted again, so its round is given back too, the latest first (a round number is given
    back only while no later round was started, as `Store.unclaim` does)."""
    async with store.transaction() as db:
        found = await rows.fetchall(
            db,
            "UPDATE nodes SET status = 'open' WHERE search_id = ? AND kind = 'intent' AND status = 'active' "
            "RETURNING id",
            (search_id,),
        )
        ids = [int(r[0]) for r in found]
        started: dict[int, int | None] = {
            i: (await get(db, REFINE_KEY.format(node_id=i))).get("round") for i in ids
        }
        given: set[int] = set()
        for i in sorted(ids, key=lambda i: -(started[i] or 0)):
            rnd = started[i]
            if rnd is None:
                continue
            made = await rows.fetchone(
                db, "SELECT 1 FROM attempts WHERE node_id = ? AND round = ? LIMIT 1", (i, rnd)
            )
            if made is not None:
                continue
            cur = await db.execute(
                "UPDATE searches SET round = round - 1, updated_at = ? WHERE id = ? AND round = ?",
                (rows.now_iso(), search_id, rnd),
            )
            if cur.rowcount == 1:
                given.add(i)
        opened = await rows.nodes_by_id(db, ids)
    return [Released(node=opened[i], round=started[i], given_back=i in given) for i in sorted(opened)]


async def reopen_active(store: Store, search_id: int) -> list[Node]:
    """`release_active`'s intents, now open."""
    return [r.node for r in await release_active(store, search_id)]
