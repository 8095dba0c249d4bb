"""Phase 1 of a round: pick the next open intent to refine.

score = priority
        − difficulty_penalty · max(0, difficulty − difficulty_cap)      (soft cap: a penalty, not a ban)
        + exploration · sqrt(ln(1 + N) / (1 + B))                      (UCB1 over the root's branches)

The cap applies once the search has a correct kernel: before that every intent writes one from scratch (a task
without a seed), so a rewrite is no harder than the rest and is not scored down.
N is the number of attempts in the whole search (the root's visits, in UCB terms) and B the number in
the intent's branch (the subtree of the root's child it descends from), so intents in rarely tried
branches get a bonus that fades as the branch is tried. Pinned intents come first (by score among
themselves); vetoed, pruned, closed, failed and active ones are never selected; equal scores go to
the lower id. `select_next` is the pure definition; `select_action` computes the same answer from
the database without loading the tree (only a few rows per branch leave SQLite).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

import aiosqlite
from pydantic import BaseModel

from ksearch.worldmodel import rows
from ksearch.worldmodel.models import NodeStatus
from ksearch.worldmodel.store import Store


class SelectWeights(BaseModel):
    difficulty_penalty: float = 0.15  # subtracted per difficulty level above the cap
    exploration: float = 0.1  # UCB exploration constant


DEFAULT_WEIGHTS = SelectWeights()


class ScoreBreakdown(BaseModel):
    node_id: int
    priority: float
    difficulty: int
    difficulty_cap: int
    difficulty_penalty: float
    branch_id: int
    branch_visits: int
    total_visits: int
    exploration: float
    pinned: bool
    score: float
    cap_waived: bool = False  # nothing correct yet: no intent is scored down for its difficulty


class Selection(BaseModel):
    """The chosen intent (None when nothing is open) and why."""

    node_id: int | None
    reason: str
    score: ScoreBreakdown | None = None
    considered: int = 0  # open, unvetoed intents that competed
    round: int = 0
    claimed: bool = False  # True when select_action also marked the node active


class NodeLike(Protocol):
    """What selection reads from a node (`ksearch.worldmodel.models.Node` fits)."""

    @property
    def id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def priority(self) -> float: ...
    @property
    def difficulty(self) -> int: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def vetoed(self) -> bool: ...
    @property
    def visits(self) -> int: ...


_Cand = tuple[int, float, int, bool, int]  # id, priority, difficulty, pinned, branch id


MAX_DIFFICULTY = 5  # a cap at the top difficulty scores nothing down


async def cap_now(db: aiosqlite.Connection, search_id: int, cap: int) -> int:
    """The difficulty cap selection applies now: the search's, once it has a correct attempt; none before."""
    found = await rows.fetchone(
        db, "SELECT 1 FROM attempts WHERE search_id = ? AND status = 'ok' LIMIT 1", (search_id,)
    )
    return cap if found is not None else MAX_DIFFICULTY


def _base(priority: float, difficulty: int, cap: int, w: SelectWeights) -> float:
    # Written exactly like the SQL in select_action so both give bit-identical floats.
    return priority - w.difficulty_penalty * max(0, difficulty - cap)


def _bonus(total: int, branch: int, w: SelectWeights) -> float:
    return w.exploration * math.sqrt(math.log(1 + total) / (1 + branch))


def _pick(
    cands: Iterable[_Cand],
    cap: int,
    total: int,
    branch_visits: dict[int, int],
    w: SelectWeights,
    waived: bool = False,
) -> ScoreBreakdown | None:
    best: tuple[bool, float, int] | None = None
    best_cand: _Cand | None = None
    search_cap, cap = cap, MAX_DIFFICULTY if waived else cap
    for cand in cands:
        nid, priority, difficulty, pinned, branch = cand
        score = _base(priority, difficulty, cap, w) + _bonus(total, branch_visits.get(branch, 0), w)
        key = (pinned, score, -nid)
        if best is None or key > best:
            best, best_cand = key, cand
    if best is None or best_cand is None:
        return None
    nid, priority, difficulty, pinned, branch = best_cand
    return ScoreBreakdown(
        node_id=nid,
        priority=priority,
        difficulty=difficulty,
        difficulty_cap=search_cap,
        difficulty_penalty=priority - _base(priority, difficulty, cap, w),
        branch_id=branch,
        branch_visits=branch_visits.get(branch, 0),
        total_visits=total,
        exploration=_bonus(total, branch_visits.get(branch, 0), w),
        pinned=pinned,
        score=best[1],
        cap_waived=waived,
    )


def _reason(s: ScoreBreakdown, considered: int) -> str:
    head = f"#{s.node_id}: pinned, " if s.pinned else f"#{s.node_id}: "
    over = s.difficulty - s.difficulty_cap
    diff = (
        f"difficulty {s.difficulty}, no cap before the search's first correct kernel (nothing to build on yet)"
        if s.cap_waived
        else f"difficulty {s.difficulty} is {over} over the cap {s.difficulty_cap} (-{s.difficulty_penalty:.3f})"
        if over > 0
        else f"difficulty {s.difficulty} within the cap {s.difficulty_cap}"
    )
    return (
        f"{head}score {s.score:.3f} = priority {s.priority:.2f}, {diff}, exploration +{s.exploration:.3f} "
        f"(branch #{s.branch_id} has {s.branch_visits} of {s.total_visits} attempts); "
        f"best of {considered} open intent(s)"
    )


def _nothing_open(counts: dict[str, int], vetoed_open: int, round: int) -> Selection:
    label = {"skipped": "open but passed over this time"}
    parts = [f"{n} {label.get(status, status)}" for status, n in sorted(counts.items()) if n]
    if vetoed_open:
        parts.append(f"{vetoed_open} open but vetoed")
    summary = ", ".join(parts) if parts else "no intents yet"
    return Selection(
        node_id=None,
        reason=f"no open intent to select ({summary}); propose intents or reopen one",
        round=round,
    )


def branch_ids(nodes: Iterable[NodeLike]) -> dict[int, int | None]:
    """node id → id of the root's child it descends from (its own id for a root child, None for the root)."""
    listed = list(nodes)
    parent = {n.id: n.parent_id for n in listed}
    roots = {n.id for n in listed if n.kind == "root"}
    branch: dict[int, int | None] = dict.fromkeys(roots)
    for n in listed:
        path: list[int] = []
        x = n.id
        while x not in branch:
            p = parent.get(x)
            if p is None or p in roots:  # a root child (or a node whose parent is not in the list)
                branch[x] = x
                break
            path.append(x)
            x = p
        b = branch[x]
        for y in path:
            branch[y] = b
    return branch


def select_next(
    nodes: Iterable[NodeLike],
    difficulty_cap: int,
    round: int = 0,
    *,
    weights: SelectWeights = DEFAULT_WEIGHTS,
    skip: frozenset[int] = frozenset(),
    nothing_correct: bool = False,
) -> Selection:
    """Pure selection over a search's nodes (all of them: visits of closed nodes count for exploration).

    `round` is recorded in the result; `nothing_correct`: the search has no correct attempt yet (no cap then).
    Deterministic: the same nodes give the same answer.
    """
    waived = nothing_correct and difficulty_cap < MAX_DIFFICULTY
    listed = list(nodes)
    branch = branch_ids(listed)
    total = 0
    branch_visits: dict[int, int] = {}
    for n in listed:
        total += n.visits
        b = branch[n.id]
        if b is not None:
            branch_visits[b] = branch_visits.get(b, 0) + n.visits
    cands: list[_Cand] = []
    counts: dict[str, int] = {}
    vetoed_open = 0
    for n in listed:
        if n.kind != "intent":
            continue
        status = str(n.status)
        if status == NodeStatus.open and not n.vetoed and n.id in skip:
            counts["skipped"] = counts.get("skipped", 0) + 1
        elif status == NodeStatus.open and not n.vetoed:
            b = branch[n.id]
            assert b is not None
            cands.append((n.id, n.priority, n.difficulty, n.pinned, b))
        elif status == NodeStatus.open:  # vetoed: said apart, as the store's selection says it
            vetoed_open += 1
        else:
            counts[status] = counts.get(status, 0) + 1
    chosen = _pick(cands, difficulty_cap, total, branch_visits, weights, waived)
    if chosen is None:
        return _nothing_open(counts, vetoed_open, round)
    return Selection(
        node_id=chosen.node_id,
        reason=_reason(chosen, len(cands)),
        score=chosen,
        considered=len(cands),
        round=round,
    )


_SELECTABLE = "search_id = ? AND status = 'open' AND vetoed = 0 AND kind = 'intent'"
_GROUP_TOPS = f"""
SELECT branch_id, pinned, difficulty, max(priority), count(*) FROM nodes
WHERE {_SELECTABLE}{{skip}} GROUP BY branch_id, pinned, difficulty
"""
_LOWEST_ID = f"""
SELECT min(id) FROM nodes
WHERE {_SELECTABLE}{{skip}} AND branch_id = ? AND pinned = ? AND difficulty = ? AND priority = ?
"""


def _skipping(skip: frozenset[int]) -> str:
    """The condition that passes over `skip` (placeholders; its ids follow the search id, sorted)."""
    return f" AND id NOT IN ({', '.join('?' * len(skip))})" if skip else ""


async def select_action(
    store: Store,
    search_id: int,
    *,
    claim: bool = False,
    weights: SelectWeights = DEFAULT_WEIGHTS,
    skip: frozenset[int] = frozenset(),
) -> Selection:
    """Select the next intent of a search, using its difficulty cap and round. Same answer as `select_next`.

    With `claim=True` the chosen node is also marked active in the same transaction, so several
    workers selecting at once (even from several processes) never get the same intent. (The loop's claim,
    which also keeps the lanes and the round budget, is `ksearch.worldmodel.claims.claim_intent`.)
    """
    ctx = store.transaction() if claim else store.reading()
    async with ctx as db:
        search = await rows.search_row(db, search_id)
        sel = await select_in(
            db, search.id, search.config.difficulty_cap, search.round, weights=weights, skip=skip
        )
        if claim and sel.node_id is not None:
            await db.execute(
                "UPDATE nodes SET status = 'active' WHERE id = ? AND status = 'open'", (sel.node_id,)
            )
            sel.claimed = True
    return sel


async def select_in(
    db: aiosqlite.Connection,
    search_id: int,
    cap: int,
    round: int,
    *,
    weights: SelectWeights = DEFAULT_WEIGHTS,
    skip: frozenset[int] = frozenset(),
) -> Selection:
    """`select_action`'s choice, read on a connection the caller holds (inside its transaction); changes nothing.

    The score depends only on (priority, difficulty, pinned, branch), so SQLite returns the highest
    priority of each (branch, pinned, difficulty) group from a partial index of open intents, Python
    scores those few groups, and one more indexed read finds the lowest id among the winners. `cap` applies once
    the search has a correct attempt (`cap_now`).
    """
    waived = await cap_now(db, search_id, cap) > cap
    applied = MAX_DIFFICULTY if waived else cap
    visits = await rows.fetchall(
        db,
        "SELECT branch_id, sum(visits) FROM nodes WHERE search_id = ? GROUP BY branch_id",
        (search_id,),
    )
    branch_visits = {int(b): int(v) for b, v in visits if b is not None}
    total = sum(int(v) for _, v in visits)
    passed = _skipping(skip)
    groups = await rows.fetchall(db, _GROUP_TOPS.replace("{skip}", passed), (search_id, *sorted(skip)))
    considered = sum(int(g[4]) for g in groups)
    best_key: tuple[bool, float] | None = None
    tied: list[tuple[int, bool, int, float]] = []
    for branch, pinned, difficulty, priority, _ in groups:
        score = _base(priority, difficulty, applied, weights) + _bonus(
            total, branch_visits.get(branch, 0), weights
        )
        key = (bool(pinned), score)
        if best_key is None or key > best_key:
            best_key, tied = key, []
        if key == best_key:
            tied.append((branch, bool(pinned), difficulty, priority))
    if not tied:
        counted = await rows.fetchall(
            db,
            "SELECT status, vetoed, count(*) FROM nodes WHERE search_id = ? AND kind = 'intent' "
            "GROUP BY status, vetoed",
            (search_id,),
        )
        counts: dict[str, int] = {}
        vetoed_open = 0
        if skip:
            found = await rows.fetchone(
                db,
                f"SELECT count(*) FROM nodes WHERE {_SELECTABLE}{passed.replace('NOT IN', 'IN')}",
                (search_id, *sorted(skip)),
            )
            counts["skipped"] = int(found[0])
        for status, vetoed, n in counted:
            if status == "open" and vetoed:
                vetoed_open += n
            else:
                counts[status] = counts.get(status, 0) + n
        if skip:  # counted as open above: said apart, as select_next says them
            counts["open"] = counts.get("open", 0) - counts["skipped"]
        return _nothing_open(counts, vetoed_open, round)
    cands: list[_Cand] = []
    for branch, pinned, difficulty, priority in tied:
        row = await rows.fetchone(
            db,
            _LOWEST_ID.replace("{skip}", passed),
            (search_id, *sorted(skip), branch, int(pinned), difficulty, priority),
        )
        cands.append((int(row[0]), priority, difficulty, pinned, branch))
    chosen = _pick(cands, cap, total, branch_visits, weights, waived)
    assert chosen is not None
    return Selection(
        node_id=chosen.node_id,
        reason=_reason(chosen, considered),
        score=chosen,
        considered=considered,
        round=round,
    )
