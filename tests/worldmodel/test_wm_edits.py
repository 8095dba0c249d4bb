"""Validated tree edits: every refusal, all-or-nothing batches, the integrity rule, replay."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from worldmodel.edits import RESULT_KEYS, EditRejected, apply_edits, apply_intents, replay_edits
from worldmodel.errors import NotFound
from worldmodel.models import EditSpec, Evaluation, IntentSpec, Node, Search
from worldmodel.store import Store

pytestmark = pytest.mark.anyio


async def rejected(coro: Any) -> EditRejected:
    with pytest.raises(EditRejected) as err:
        await coro
    return err.value


async def tree(store: Store, search: Search) -> dict[str, Node]:
    """root ─ a ─ a1 ─ a1x ; root ─ b ; root ─ c"""
    a, b, c = await apply_intents(
        store,
        search.id,
        [{"title": "tile over rows"}, {"title": "fuse exp and sum"}, {"title": "use tensor cores"}],
        "llm:m",
        1,
    )
    (a1,) = await apply_intents(
        store, search.id, [{"title": "vectorize loads", "parent_id": a.id}], "llm:m", 1
    )
    (a1x,) = await apply_intents(
        store, search.id, [{"title": "unroll by four", "parent_id": a1.id}], "llm:m", 1
    )
    return {"a": a, "b": b, "c": c, "a1": a1, "a1x": a1x, "root": await store.root(search.id)}


async def test_intents_are_inserted_and_logged(store: Store, search: Search) -> None:
    nodes = await apply_intents(
        store,
        search.id,
        [
            IntentSpec(
                title="  online softmax  ",
                priority=0.9,
                difficulty=2,
                rationale="one pass",
                notes="n",
                params={"BLOCK": 128},
            ),
            {"title": "warp per row", "expected_speedup": 1.5},
        ],
        "llm:claude",
        2,
        reason="initial ideas",
    )
    assert [n.title for n in nodes] == ["online softmax", "warp per row"]
    first = nodes[0]
    assert (first.priority, first.difficulty, first.params, first.author, first.round_created) == (
        0.9,
        2,
        {"BLOCK": 128},
        "llm:claude",
        2,
    )
    assert first.parent_id == (await store.root(search.id)).id and first.status == "open"
    log = (await store.list_edits(search.id))[1:]
    assert [(e.op, e.node_id, e.author, e.round, e.reason) for e in log] == [
        ("insert", nodes[0].id, "llm:claude", 2, "initial ideas"),
        ("insert", nodes[1].id, "llm:claude", 2, "initial ideas"),
    ]


async def test_intent_refusals_each_say_what_is_accepted(store: Store, search: Search) -> None:
    t = await tree(store, search)
    other = await store.create_search("other", "t")
    (foreign,) = await apply_intents(store, other.id, [{"title": "foreign idea"}], "human", 0)
    await apply_edits(
        store,
        search.id,
        [{"op": "prune", "node_id": t["c"].id}, {"op": "veto", "node_id": t["b"].id}],
        "human",
        1,
    )
    cand = await store.put_candidate("src", "triton")
    foreign_attempt = await store.record_attempt(other.id, None, cand.id, Evaluation(status="crash"))
    err = await rejected(
        apply_intents(
            store,
            search.id,
            [
                {"title": "new idea under nothing", "parent_id": 999},  # 0 unknown parent
                {"title": "new idea under other", "parent_id": foreign.id},  # 1 other search
                {"title": "new idea under pruned", "parent_id": t["c"].id},  # 2 pruned parent
                {"title": "new idea under vetoed", "parent_id": t["b"].id},  # 3 vetoed parent
                {"title": "priority too high", "priority": 1.5},  # 4
                {"title": "difficulty zero", "difficulty": 0},  # 5
                {"title": "negative expected", "expected_speedup": -1},  # 6
                {"title": "   "},  # 7 blank
                {"title": "Tile over rows!"},  # 8 near-duplicate of a
                "not an object",  # 9
                {"title": "base from elsewhere", "base_attempt_id": foreign_attempt.id},  # 10
                {"title": "nan priority", "priority": float("nan")},  # 11
                {"title": "odd params", "params": {"f": {1, 2}}},  # 12
            ],
            "llm:m",
            2,
        )
    )
    by_index = {p.index: p for p in err.details}
    assert sorted(by_index) == list(range(13))
    assert "does not exist" in by_index[0].problem and "node of this search" in by_index[0].accepted
    assert "belongs to search" in by_index[1].problem
    assert "pruned" in by_index[2].problem and "reopen" in by_index[2].accepted
    assert "vetoed" in by_index[3].problem and "unveto" in by_index[3].accepted
    assert by_index[4].field == "priority" and "0 (least) to 1" in by_index[4].accepted
    assert by_index[5].field == "difficulty" and "1 (a parameter change) to 5" in by_index[5].accepted
    assert by_index[6].field == "expected_speedup"
    assert by_index[7].field == "title"
    assert "near-duplicate of node #" in by_index[8].problem and "update" in by_index[8].accepted
    assert "expected an object" in by_index[9].problem
    assert by_index[10].field == "base_attempt_id"
    assert by_index[11].field == "priority"
    assert by_index[12].field == "params"
    assert len(await store.list_nodes(search.id)) == 6  # nothing was written


async def test_model_instances_built_unchecked_are_revalidated(store: Store, search: Search) -> None:
    sneaky = IntentSpec.model_construct(title="valid title", priority=7.0)
    err = await rejected(apply_intents(store, search.id, [sneaky], "human", 0))
    assert err.details[0].field == "priority"
    sneaky_edit = EditSpec.model_construct(
        op="update", node_id=(await store.root(search.id)).id, difficulty=9
    )
    err = await rejected(apply_edits(store, search.id, [sneaky_edit], "human", 0))
    assert err.details[0].field == "difficulty"


async def test_duplicates_within_a_batch_and_what_is_not_a_duplicate(store: Store, search: Search) -> None:
    err = await rejected(
        apply_intents(
            store,
            search.id,
            [{"title": "Keep Q in registers"}, {"title": "keep q in the registers."}],
            "h",
            0,
        )
    )
    assert [p.index for p in err.details] == [1] and "item 0 of this request" in err.details[0].problem
    nodes = await apply_intents(
        store,
        search.id,
        [
            {"title": "use BLOCK_M=64"},
            {"title": "use BLOCK_M=128"},  # differs in a number: another idea
            {"title": "tune block sizes", "params": {"BLOCK": 64}},
            {"title": "tune block sizes", "params": {"BLOCK": 128}},  # differs in params
            {"title": "split-K over the KV sequence"},
        ],
        "tuner",
        0,
    )
    (child,) = await apply_intents(
        store, search.id, [{"title": "use BLOCK_M=64", "parent_id": nodes[4].id}], "h", 0
    )
    assert child.parent_id == nodes[4].id  # the same title under another parent is fine
    err = await rejected(apply_intents(store, search.id, [{"title": "Split K over the KV sequence"}], "h", 0))
    assert f"#{nodes[4].id}" in err.details[0].problem


async def test_edit_refusals(store: Store, search: Search) -> None:
    t = await tree(store, search)
    other = await store.create_search("other", "t")
    (foreign,) = await apply_intents(store, other.id, [{"title": "foreign idea"}], "human", 0)
    await apply_edits(
        store,
        search.id,
        [{"op": "prune", "node_id": t["a1"].id}, {"op": "veto", "node_id": t["c"].id}],
        "h",
        1,
    )
    err = await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "update", "node_id": 999, "priority": 0.1},  # 0 unknown node
                {"op": "update", "node_id": foreign.id, "priority": 0.1},  # 1 other search
                {"op": "prune", "node_id": t["root"].id},  # 2 prune the root
                {"op": "update", "node_id": t["a1x"].id, "notes": "x"},  # 3 inside a pruned branch
                {"op": "pin", "node_id": t["a1"].id},  # 4 pruned
                {"op": "reopen", "node_id": t["b"].id},  # 5 open, not reopenable
                {"op": "reopen", "node_id": t["a1x"].id},  # 6 parent pruned
                {"op": "pin", "node_id": t["c"].id},  # 7 vetoed
                {"op": "update", "node_id": t["b"].id},  # 8 changes nothing
                {"op": "prune", "node_id": t["b"].id, "priority": 0.2},  # 9 fields on a non-update op
                {"op": "update", "node_id": t["root"].id, "priority": 0.2},  # 10 root has no priority
                {
                    "op": "update",
                    "node_id": t["b"].id,
                    "title": "Tile over rows",
                },  # 11 duplicate sibling title
                {"op": "explode", "node_id": t["b"].id},  # 12 unknown op
                {"op": "update", "node_id": t["b"].id, "priority": 2},  # 13 out of range
                {"op": "pin", "node_id": t["root"].id},  # 14 root
            ],
            "human",
            2,
        )
    )
    by_index = {p.index: p for p in err.details}
    assert sorted(by_index) == list(range(15))
    assert "does not exist" in by_index[0].problem
    assert "belongs to search" in by_index[1].problem
    assert "root" in by_index[2].problem
    assert "pruned" in by_index[3].problem and "reopen" in by_index[3].accepted
    assert "pruned" in by_index[4].problem
    assert "is open" in by_index[5].problem and "closed, failed or pruned" in by_index[5].accepted
    assert f"parent #{t['a1'].id} is pruned" in by_index[6].problem
    assert "vetoed" in by_index[7].problem and "unveto" in by_index[7].accepted
    assert "changes nothing" in by_index[8].problem
    assert "takes no field values" in by_index[9].problem
    assert "root has no priority" in by_index[10].problem
    assert "near-duplicate" in by_index[11].problem
    assert by_index[12].field == "op" and "update, prune, reopen" in by_index[12].accepted
    assert by_index[13].field == "priority"
    assert "root" in by_index[14].problem
    assert str(err).startswith("15 problem(s); nothing was changed")
    # `problems` are the same, one readable line each, for callers that pass them on as text.
    assert len(err.problems) == 15 and all(isinstance(p, str) and "; accepted: " in p for p in err.problems)
    assert err.to_dict()["problems"][0]["node_id"] == 999


async def test_unknown_search_and_bad_author(store: Store, search: Search) -> None:
    with pytest.raises(NotFound, match="existing searches"):
        await apply_intents(store, 999, [{"title": "anything"}], "human", 0)
    with pytest.raises(ValueError, match="bad author"):
        await apply_intents(store, search.id, [{"title": "anything"}], "", 0)
    with pytest.raises(ValueError, match="bad round"):
        await apply_edits(store, search.id, [], "human", -1)


async def test_batches_are_all_or_nothing_and_sequential(store: Store, search: Search) -> None:
    t = await tree(store, search)
    log_before = await store.list_edits(search.id)
    nodes_before = await store.list_nodes(search.id)
    await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "update", "node_id": t["b"].id, "priority": 0.99},
                {"op": "prune", "node_id": t["a"].id},
                {"op": "update", "node_id": t["a1"].id, "notes": "late"},
            ],
            "h",
            3,
        )
    )  # the third item edits a node the second one pruned
    assert await store.list_nodes(search.id) == nodes_before
    assert await store.list_edits(search.id) == log_before
    # Later items see earlier ones: prune, reopen, then update is valid.
    out = await apply_edits(
        store,
        search.id,
        [
            {"op": "prune", "node_id": t["a"].id},
            {"op": "reopen", "node_id": t["a"].id},
            {"op": "update", "node_id": t["a"].id, "notes": "back"},
        ],
        "h",
        3,
    )
    assert [(n.id, n.status, n.notes) for n in out] == [(t["a"].id, "open", "back")] * 3
    assert (await store.get_node(t["a1"].id)).status == "pruned"  # reopen revives the node, not its subtree


async def test_prune_takes_the_whole_subtree_and_reopen_needs_live_parent(
    store: Store, search: Search
) -> None:
    t = await tree(store, search)
    await apply_edits(
        store, search.id, [{"op": "prune", "node_id": t["a"].id, "reason": "dead end"}], "llm:m", 2
    )
    statuses = {n.id: n.status for n in await store.list_nodes(search.id)}
    assert [statuses[t[k].id] for k in ("a", "a1", "a1x", "b", "c")] == [
        "pruned",
        "pruned",
        "pruned",
        "open",
        "open",
    ]
    prune = (await store.list_edits(search.id))[-1]
    assert (prune.op, prune.reason, prune.payload["subtree"]) == (
        "prune",
        "dead end",
        [t["a"].id, t["a1"].id, t["a1x"].id],
    )
    await rejected(apply_edits(store, search.id, [{"op": "prune", "node_id": t["a"].id}], "h", 2))
    await rejected(apply_edits(store, search.id, [{"op": "reopen", "node_id": t["a1"].id}], "h", 2))
    await apply_edits(
        store,
        search.id,
        [{"op": "reopen", "node_id": t["a"].id}, {"op": "reopen", "node_id": t["a1"].id}],
        "h",
        2,
    )
    assert (await store.get_node(t["a1"].id)).status == "open"


async def test_pin_and_veto_flags(store: Store, search: Search) -> None:
    t = await tree(store, search)
    (b,) = await apply_edits(store, search.id, [{"op": "pin", "node_id": t["b"].id}], "human", 1)
    assert b.pinned and not b.vetoed
    (b,) = await apply_edits(store, search.id, [{"op": "veto", "node_id": t["b"].id}], "human", 1)
    assert b.vetoed and not b.pinned  # vetoing unpins
    _, b = await apply_edits(
        store,
        search.id,
        [{"op": "unveto", "node_id": t["b"].id}, {"op": "pin", "node_id": t["b"].id}],
        "human",
        1,
    )
    assert b.pinned and not b.vetoed
    (b,) = await apply_edits(store, search.id, [{"op": "unpin", "node_id": t["b"].id}], "human", 1)
    assert not b.pinned


async def test_root_analysis_is_editable(store: Store, search: Search) -> None:
    root = await store.root(search.id)
    (r,) = await apply_edits(
        store,
        search.id,
        [
            {
                "op": "update",
                "node_id": root.id,
                "rationale": "memory bound: 2 reads, 1 write",
                "notes": "H200",
            }
        ],
        "llm:m",
        0,
    )
    assert (r.rationale, r.notes) == ("memory bound: 2 reads, 1 write", "H200")


# ------------------------------------------------------------------ the integrity rule


@pytest.mark.parametrize("key", sorted(RESULT_KEYS))
async def test_no_intent_can_carry_a_result(store: Store, search: Search, key: str) -> None:
    err = await rejected(apply_intents(store, search.id, [{"title": "smuggler", key: 1}], "llm:m", 0))
    assert err.details[0].field == key
    assert "written only by the evaluator" in err.details[0].problem
    assert len(await store.list_nodes(search.id)) == 1


@pytest.mark.parametrize("op", ["update", "prune", "reopen", "pin", "unpin", "veto", "unveto"])
@pytest.mark.parametrize("key", ["best_attempt_id", "evaluation", "speedup", "status", "visits"])
async def test_no_edit_op_can_write_a_result(store: Store, search: Search, op: str, key: str) -> None:
    (n,) = await apply_intents(store, search.id, [{"title": "honest idea"}], "llm:m", 0)
    cand = await store.put_candidate("src", "triton")
    att = await store.record_attempt(search.id, n.id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.2))
    before = await store.get_node(n.id)
    spec: dict[str, Any] = {
        "op": op,
        "node_id": n.id,
        key: 99 if key != "evaluation" else {"status": "ok", "speedup_vs_eager": 100.0},
    }
    if op == "update":
        spec["notes"] = "looks innocent"
    err = await rejected(apply_edits(store, search.id, [spec], "llm:m", 0))
    assert err.details[0].field == key and "written only by the evaluator" in err.details[0].problem
    with pytest.raises(ValidationError):
        EditSpec.model_validate(spec)
    assert await store.get_node(n.id) == before
    assert (await store.get_search(search.id)).best_attempt_id == att.id
    assert [a.evaluation for a in await store.list_attempts(search.id)] == [att.evaluation]


async def test_valid_edits_never_touch_results(store: Store, search: Search) -> None:
    t = await tree(store, search)
    cand = await store.put_candidate("src", "triton")
    att = await store.record_attempt(
        search.id, t["a1"].id, cand.id, Evaluation(status="ok", speedup_vs_eager=2.5)
    )
    await apply_edits(
        store,
        search.id,
        [
            {"op": "update", "node_id": t["a1"].id, "priority": 0.1, "notes": "worse than hoped"},
            {"op": "pin", "node_id": t["a1"].id},
            {"op": "veto", "node_id": t["a1"].id},
            {"op": "prune", "node_id": t["a"].id},
            {"op": "reopen", "node_id": t["a"].id},
            {"op": "reopen", "node_id": t["a1"].id},
        ],
        "llm:m",
        3,
    )
    node = await store.get_node(t["a1"].id)
    assert (node.best_attempt_id, node.visits) == (att.id, 1)
    assert (await store.get_search(search.id)).best_attempt_id == att.id
    assert (await store.get_attempt(att.id)).evaluation == att.evaluation


# ------------------------------------------------------------------ replay


async def test_replay_rebuilds_the_editable_tree(store: Store, search: Search) -> None:
    t = await tree(store, search)
    await apply_edits(
        store,
        search.id,
        [
            {"op": "update", "node_id": t["root"].id, "rationale": "analysis"},
            {
                "op": "update",
                "node_id": t["b"].id,
                "priority": 0.75,
                "difficulty": 4,
                "expected_speedup": 1.3,
                "title": "fuse exp, max and sum",
            },
            {"op": "pin", "node_id": t["b"].id},
            {"op": "veto", "node_id": t["c"].id},
            {"op": "prune", "node_id": t["a"].id},
        ],
        "llm:m",
        4,
    )
    await apply_edits(
        store,
        search.id,
        [{"op": "reopen", "node_id": t["a"].id}, {"op": "update", "node_id": t["a"].id, "notes": "retry"}],
        "human",
        5,
    )
    await apply_intents(
        store, search.id, [{"title": "late idea", "parent_id": t["a"].id, "params": {"k": 2}}], "tuner", 6
    )
    editable = (
        "id parent_id kind title rationale priority difficulty expected_speedup notes author pinned vetoed "
        "round_created round_updated params base_attempt_id"
    ).split()
    stored = [
        n.model_dump(include=set(editable)) | {"pruned": n.status == "pruned"}
        for n in await store.list_nodes(search.id)
    ]
    replayed = [
        n.model_dump(include=set(editable)) | {"pruned": n.status == "pruned"}
        for n in await replay_edits(store, search.id)
    ]
    assert replayed == stored
