"""Selection: pinned first, vetoed/pruned/closed never, soft difficulty cap, exploration, ties; SQL == pure."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import Evaluation, Node, Search
from ksearch.worldmodel.select import branch_ids, select_action, select_next
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


def mk(nid: int, parent: int | None = 1, **kw: Any) -> Node:
    kind = "root" if parent is None else "intent"
    return Node(id=nid, search_id=1, parent_id=parent, kind=kind, title=f"node {nid}", **kw)


ROOT = mk(1, None)


def test_pinned_first_even_with_low_priority() -> None:
    nodes = [ROOT, mk(2, priority=0.95), mk(3, priority=0.1, pinned=True), mk(4, priority=0.2, pinned=True)]
    sel = select_next(nodes, 4)
    assert sel.node_id == 4 and sel.score is not None and sel.score.pinned
    assert "pinned" in sel.reason


def test_vetoed_pruned_closed_failed_active_and_root_are_never_selected() -> None:
    nodes = [
        ROOT,
        mk(2, priority=1.0, vetoed=True),
        mk(3, priority=1.0, status="pruned"),
        mk(4, priority=1.0, status="closed"),
        mk(5, priority=1.0, status="failed"),
        mk(6, priority=1.0, status="active"),
        mk(7, priority=1.0, vetoed=True, pinned=False, status="open"),
        mk(8, priority=0.01),
    ]
    assert select_next(nodes, 4).node_id == 8
    nothing = select_next(nodes[:-1], 4, round=7)
    assert nothing.node_id is None and nothing.round == 7
    assert "no open intent" in nothing.reason and "2 open but vetoed" in nothing.reason
    assert "1 pruned" in nothing.reason


def test_difficulty_cap_is_a_penalty_not_a_ban() -> None:
    hard, easy = mk(2, priority=0.9, difficulty=5), mk(3, priority=0.7, difficulty=3)
    sel = select_next([ROOT, hard, easy], 3)
    assert sel.node_id == 3  # 0.9 - 2 * 0.15 = 0.6 < 0.7
    assert select_next([ROOT, hard, easy], 5).node_id == 2  # no penalty under a higher cap
    only_hard = select_next([ROOT, hard], 1)
    assert only_hard.node_id == 2 and only_hard.score is not None
    assert only_hard.score.difficulty_penalty == pytest.approx(0.6)
    assert "over the cap" in only_hard.reason
    very_good_hard = mk(4, priority=1.0, difficulty=5)
    assert select_next([ROOT, very_good_hard, mk(5, priority=0.5, difficulty=3)], 3).node_id == 4


def test_exploration_favours_rarely_visited_branches() -> None:
    # Two branches (2 and 3); branch 2 has had many attempts, branch 3 none.
    busy = [mk(2, status="closed", visits=12), mk(4, parent=2, priority=0.6)]
    quiet = [mk(3, status="closed", visits=0), mk(5, parent=3, priority=0.6)]
    sel = select_next([ROOT, *busy, *quiet], 4)
    assert sel.node_id == 5 and sel.score is not None
    assert (sel.score.branch_id, sel.score.branch_visits, sel.score.total_visits) == (3, 0, 12)
    # The bonus is bounded: a clearly better idea in the busy branch still wins.
    busy[1] = mk(4, parent=2, priority=0.95)
    assert select_next([ROOT, *busy, *quiet], 4).node_id == 4
    # No attempts anywhere: no exploration bonus at all.
    fresh = select_next([ROOT, mk(2, priority=0.5), mk(3, priority=0.5)], 4)
    assert fresh.score is not None and fresh.score.exploration == 0.0


def test_ties_go_to_the_lower_id_whatever_the_order() -> None:
    nodes = [ROOT, mk(9, priority=0.5), mk(4, priority=0.5), mk(7, priority=0.5)]
    assert select_next(nodes, 4).node_id == 4
    assert select_next(list(reversed(nodes)), 4).node_id == 4


def test_branch_ids() -> None:
    nodes = [ROOT, mk(2), mk(3), mk(4, parent=2), mk(5, parent=4), mk(6, parent=3)]
    assert branch_ids(nodes) == {1: None, 2: 2, 3: 3, 4: 2, 5: 2, 6: 3}


async def random_search(store: Store, seed: int) -> Search:
    """A random tree with every status, pins, vetoes and visits, built through the public API."""
    rng = random.Random(seed)
    search = await store.create_search(f"rand-{seed}", "t", {"difficulty_cap": rng.randint(1, 5)})
    ids = [(await store.root(search.id)).id]
    cand = await store.put_candidate(f"src {seed}", "triton")
    for i in range(40):
        (n,) = await apply_intents(
            store,
            search.id,
            [
                {
                    "title": f"idea number {i}",
                    "parent_id": rng.choice(ids),
                    "priority": rng.choice([0.1, 0.3, 0.5, 0.5, 0.7, 0.9]),
                    "difficulty": rng.randint(1, 5),
                }
            ],
            "tuner",
            0,
        )
        ids.append(n.id)
    for nid in rng.sample(ids[1:], 12):
        for _ in range(rng.randint(1, 3)):
            status = rng.choice(["ok", "incorrect"])
            await store.record_attempt(
                search.id, nid, cand.id, Evaluation(status=status, speedup_vs_eager=1.0)
            )
    edits: list[dict[str, Any]] = []
    for nid in rng.sample(ids[1:], 8):
        edits.append({"op": rng.choice(["pin", "veto", "pin", "veto", "prune"]), "node_id": nid})
    for edit in edits:  # one by one: a prune may make a later edit invalid, which is fine to skip
        node = await store.get_node(edit["node_id"])
        if node.status != "pruned" and not (edit["op"] == "pin" and node.vetoed):
            await apply_edits(store, search.id, [edit], "human", 0)
    for nid in rng.sample(ids[1:], 3):
        node = await store.get_node(nid)
        if node.status == "open" and not node.vetoed:
            await store.set_node_status(nid, "active")
    return search


@pytest.mark.parametrize("seed", range(12))
async def test_select_action_agrees_with_the_pure_definition(store: Store, seed: int) -> None:
    search = await random_search(store, seed)
    nodes = await store.list_nodes(search.id)
    pure = select_next(nodes, search.config.difficulty_cap)
    sql = await select_action(store, search.id)
    assert sql.node_id == pure.node_id
    assert sql.score == pure.score
    assert sql.considered == pure.considered
    # intents passed over this time (the driver's declined ones): the same answer both ways, down to none left
    skip: frozenset[int] = frozenset()
    while True:
        pure = select_next(nodes, search.config.difficulty_cap, skip=skip)
        sql = await select_action(store, search.id, skip=skip)
        assert (sql.node_id, sql.score, sql.considered) == (pure.node_id, pure.score, pure.considered)
        if sql.node_id is None:
            assert sql.reason == pure.reason and f"{len(skip)} open but passed over this time" in sql.reason
            break
        skip = skip | {sql.node_id}


async def test_select_action_claims_distinct_nodes(store: Store, search: Search) -> None:
    await apply_intents(
        store, search.id, [{"title": f"parallel idea {i}", "priority": 0.5} for i in range(5)], "human", 0
    )
    picks = await asyncio.gather(*(select_action(store, search.id, claim=True) for _ in range(4)))
    chosen = [p.node_id for p in picks]
    assert None not in chosen and len(set(chosen)) == 4 and all(p.claimed for p in picks)
    statuses = [n.status for n in await store.list_nodes(search.id)]
    assert statuses.count("active") == 4
    last = await select_action(store, search.id, claim=True)
    assert last.node_id is not None and last.node_id not in chosen
    none_left = await select_action(store, search.id, claim=True)
    assert none_left.node_id is None and "5 active" in none_left.reason


async def test_select_action_uses_search_cap_and_round(store: Store) -> None:
    search = await store.create_search("capped", "t", {"difficulty_cap": 2})
    await store.bump_round(search.id)
    await apply_intents(
        store,
        search.id,
        [
            {"title": "hard rewrite", "priority": 0.8, "difficulty": 5},
            {"title": "easy tweak", "priority": 0.6, "difficulty": 2},
        ],
        "human",
        0,
    )
    # nothing correct yet: every intent writes a kernel from scratch, so the rewrite is not scored down
    first = await select_action(store, search.id)
    assert first.score is not None and first.score.cap_waived and first.score.difficulty_penalty == 0
    assert (await store.get_node(first.node_id or 0)).title == "hard rewrite"
    assert "no cap before the search's first correct kernel" in first.reason
    nodes = await store.list_nodes(search.id)
    assert select_next(nodes, 2, nothing_correct=True).node_id == first.node_id
    cand = await store.put_candidate("src", "triton")
    await store.record_attempt(search.id, None, cand.id, Evaluation(status="incorrect"))
    assert (
        await select_action(store, search.id)
    ).node_id == first.node_id  # an incorrect one is nothing to build on
    await store.record_attempt(search.id, None, cand.id, Evaluation(status="ok", speedup_vs_eager=1.0))
    sel = await select_action(store, search.id)
    assert sel.round == 1 and sel.score is not None and sel.score.difficulty_cap == 2
    assert not sel.score.cap_waived and "difficulty 2 within the cap 2" in sel.reason
    assert (await store.get_node(sel.node_id or 0)).title == "easy tweak"
    assert select_next(nodes, 2).node_id == sel.node_id
