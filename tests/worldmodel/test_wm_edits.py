"""Validated tree edits: every refusal, all-or-nothing batches, the integrity rule, replay."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ksearch.worldmodel.edits import RESULT_KEYS, EditRejected, apply_edits, apply_intents, replay_edits
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import (
    CompileReport,
    Diagnostic,
    EditSpec,
    Evaluation,
    IntentSpec,
    Node,
    Search,
    WorkloadCorrectness,
)
from ksearch.worldmodel.store import Store

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
            "human",
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
        store, search.id, [{"title": "use BLOCK_M=64", "parent_id": nodes[4].id}], "human", 0
    )
    assert child.parent_id == nodes[4].id  # the same title under another parent is fine
    err = await rejected(
        apply_intents(store, search.id, [{"title": "Split K over the KV sequence"}], "human", 0)
    )
    assert f"#{nodes[4].id}" in err.details[0].problem


async def test_edit_refusals(store: Store, search: Search) -> None:
    t = await tree(store, search)
    other = await store.create_search("other", "t")
    (foreign,) = await apply_intents(store, other.id, [{"title": "foreign idea"}], "human", 0)
    await apply_edits(
        store,
        search.id,
        [{"op": "prune", "node_id": t["a1"].id}, {"op": "veto", "node_id": t["c"].id}],
        "human",
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
    assert by_index[12].field == "op" and "update, move, prune, reopen" in by_index[12].accepted
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
    # a word that names nobody ksearch knows is refused with the accepted forms; nothing is written
    for author in ("robot", "llm:", "llm: ", "seed", "Human"):
        with pytest.raises(ValueError, match=r"accepted: 'human', 'tuner' or 'llm:<model>'"):
            await apply_intents(store, search.id, [{"title": f"by {author}"}], author, 0)
    assert [n.title for n in await store.list_nodes(search.id)] == ["root"]
    for i, author in enumerate(("human", "tuner", "llm:claude-sonnet-4")):
        await apply_intents(store, search.id, [{"title": f"idea {i}"}], author, 0)
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
            "human",
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
        "human",
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
    await rejected(apply_edits(store, search.id, [{"op": "prune", "node_id": t["a"].id}], "human", 2))
    await rejected(apply_edits(store, search.id, [{"op": "reopen", "node_id": t["a1"].id}], "human", 2))
    await apply_edits(
        store,
        search.id,
        [{"op": "reopen", "node_id": t["a"].id}, {"op": "reopen", "node_id": t["a1"].id}],
        "human",
        2,
    )
    assert (await store.get_node(t["a1"].id)).status == "open"


async def test_a_vetoed_idea_is_refused_under_any_parent(store: Store, search: Search) -> None:
    t = await tree(store, search)
    await apply_edits(store, search.id, [{"op": "veto", "node_id": t["a1"].id}], "human", 1)
    for parent in (t["root"].id, t["b"].id, t["a"].id):  # not only beside it, under `a`
        with pytest.raises(EditRejected) as e:
            await apply_intents(
                store, search.id, [{"title": "Vectorize the loads", "parent_id": parent}], "human", 1
            )
        (p,) = e.value.details
        assert (
            p.field == "title"
            and f"near-duplicate of vetoed node #{t['a1'].id} 'vectorize loads'" in p.problem
        )
        assert p.accepted == f"a distinct idea, or unveto #{t['a1'].id} first"
    await apply_edits(store, search.id, [{"op": "unveto", "node_id": t["a1"].id}], "human", 1)
    (n,) = await apply_intents(
        store, search.id, [{"title": "vectorize loads", "parent_id": t["b"].id}], "human", 1
    )
    assert n.parent_id == t["b"].id  # once unvetoed, the idea may grow elsewhere


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


@pytest.mark.parametrize("op", ["update", "move", "prune", "reopen", "pin", "unpin", "veto", "unveto"])
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
        spec.update(notes="looks innocent", params={"BLOCK": 64}, base_attempt_id=att.id)
    if op == "move":
        spec["parent_id"] = (await store.root(search.id)).id
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
            {"op": "update", "node_id": t["a1"].id, "params": {"BLOCK": 32}, "base_attempt_id": att.id},
            {"op": "move", "node_id": t["a1"].id, "parent_id": t["b"].id},
            {"op": "move", "node_id": t["a1"].id, "parent_id": t["a"].id},
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
    cand = await store.put_candidate("src", "triton")
    att = await store.record_attempt(
        search.id, t["b"].id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.1)
    )
    await apply_edits(
        store,
        search.id,
        [
            {"op": "reopen", "node_id": t["a1"].id},
            {"op": "move", "node_id": t["a1"].id, "parent_id": t["b"].id},
            {"op": "update", "node_id": t["c"].id, "params": {"BLOCK": 64}, "base_attempt_id": att.id},
            {"op": "unveto", "node_id": t["c"].id},
            {"op": "move", "node_id": t["a"].id, "parent_id": t["c"].id},
            {"op": "update", "node_id": t["b"].id, "base_attempt_id": att.id},
            {"op": "update", "node_id": t["b"].id, "base_attempt_id": None},
        ],
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
    moved = {n.id: n for n in await store.list_nodes(search.id)}
    assert (moved[t["a1"].id].parent_id, moved[t["a"].id].parent_id) == (t["b"].id, t["c"].id)
    assert (moved[t["c"].id].base_attempt_id, moved[t["b"].id].base_attempt_id) == (att.id, None)


# ------------------------------------------------------------------ params, base attempts, moves


def _incorrect() -> Evaluation:
    return Evaluation(
        status="incorrect",
        correctness=[
            WorkloadCorrectness(workload="w1", passed=True, kind="ok", trials=3),
            WorkloadCorrectness(workload="w2", passed=False, kind="wrong_values", trials=3, max_abs_err=0.25),
        ],
    )


def _compile_error() -> Evaluation:
    diag = Diagnostic(severity="error", message="name 'BLOK' is not defined", line=12)
    return Evaluation(
        status="compile_error",
        compile=CompileReport(ok=False, language="triton", seconds=0.1, diagnostics=[diag]),
    )


async def _branches(store: Store, search: Search) -> dict[int, int | None]:
    async with store.reading() as db:
        found = await (
            await db.execute("SELECT id, branch_id FROM nodes WHERE search_id = ?", (search.id,))
        ).fetchall()
    return {int(i): b for i, b in found}


async def test_update_sets_params_and_base_attempt(store: Store, search: Search) -> None:
    t = await tree(store, search)
    cand = await store.put_candidate("src", "triton")
    good = await store.record_attempt(
        search.id, t["a"].id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.3)
    )
    (c,) = await apply_edits(
        store,
        search.id,
        [
            {
                "op": "update",
                "node_id": t["c"].id,
                "params": {"BLOCK": 128, "num_warps": 4},
                "base_attempt_id": good.id,
                "reason": "start from the tiled kernel",
            }
        ],
        "human",
        4,
    )
    assert (c.params, c.base_attempt_id, c.round_updated) == ({"BLOCK": 128, "num_warps": 4}, good.id, 4)
    assert await store.get_node(t["c"].id) == c
    last = (await store.list_edits(search.id))[-1]
    assert (last.op, last.node_id, last.author, last.round, last.reason) == (
        "update",
        t["c"].id,
        "human",
        4,
        "start from the tiled kernel",
    )
    assert last.payload["changes"] == {"params": {"BLOCK": 128, "num_warps": 4}, "base_attempt_id": good.id}

    # A field left out is not changed, from a dict or a model; an explicit null base clears it.
    await apply_edits(
        store,
        search.id,
        [
            {"op": "update", "node_id": t["c"].id, "notes": "from a dict"},
            EditSpec(op="update", node_id=t["c"].id, priority=0.7),
            {"op": "pin", "node_id": t["c"].id, "base_attempt_id": None, "parent_id": None},  # nulls: nothing
        ],
        "human",
        4,
    )
    kept = await store.get_node(t["c"].id)
    assert (kept.base_attempt_id, kept.params, kept.notes, kept.priority, kept.pinned) == (
        good.id,
        {"BLOCK": 128, "num_warps": 4},
        "from a dict",
        0.7,
        True,
    )
    (cleared,) = await apply_edits(
        store,
        search.id,
        [EditSpec(op="update", node_id=t["c"].id, base_attempt_id=None, params={})],
        "human",
        5,
    )
    assert (cleared.base_attempt_id, cleared.params) == (None, {})
    assert (await store.list_edits(search.id))[-1].payload["changes"] == {
        "params": {},
        "base_attempt_id": None,
    }
    # The base attempt is where code starts, not a result: the node's and the search's best are unchanged.
    assert (await store.get_node(t["c"].id)).best_attempt_id is None
    assert (await store.get_node(t["a"].id)).best_attempt_id == good.id


async def test_params_and_base_attempt_refusals(store: Store, search: Search) -> None:
    t = await tree(store, search)
    (tuned, other) = await apply_intents(
        store,
        search.id,
        [
            {"title": "tune block sizes", "params": {"BLOCK": 64}},
            {"title": "tune block sizes", "params": {"BLOCK": 128}},
        ],
        "tuner",
        1,
    )
    foreign_search = await store.create_search("other", "t")
    cand = await store.put_candidate("src", "triton")
    wrong = await store.record_attempt(search.id, t["a"].id, cand.id, _incorrect())
    broken = await store.record_attempt(search.id, t["a"].id, cand.id, _compile_error())
    cheat = await store.record_attempt(
        search.id, None, cand.id, Evaluation(status="flagged", flags=["output aliases an input"])
    )
    foreign = await store.record_attempt(foreign_search.id, None, cand.id, Evaluation(status="ok"))
    nodes_before = await store.list_nodes(search.id)
    log_before = await store.list_edits(search.id)
    err = await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": wrong.id},  # 0 incorrect
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": broken.id},  # 1 did not compile
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": cheat.id},  # 2 flagged
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": foreign.id},  # 3 other search
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": 999},  # 4 no such attempt
                {"op": "update", "node_id": t["b"].id, "base_attempt_id": 0},  # 5 not an id
                {"op": "update", "node_id": t["b"].id, "params": {"f": {1, 2}}},  # 6 not JSON
                {"op": "update", "node_id": t["b"].id, "params": [1, 2]},  # 7 not an object
                {"op": "update", "node_id": t["root"].id, "params": {"BLOCK": 1}},  # 8 the root
                {"op": "update", "node_id": t["root"].id, "base_attempt_id": None},  # 9 the root
                {"op": "update", "node_id": other.id, "params": {"BLOCK": 64}},  # 10 now a duplicate
                {"op": "prune", "node_id": t["b"].id, "params": {"BLOCK": 1}},  # 11 not an update
            ],
            "llm:m",
            2,
        )
    )
    by_index = {p.index: p for p in err.details}
    assert sorted(by_index) == list(range(12))
    for i in range(5):
        assert by_index[i].field == "base_attempt_id"
        assert "correct attempt (status ok) of this search, or null" in by_index[i].accepted
    assert f"attempt #{wrong.id} did not pass correctness" in by_index[0].problem
    assert "'w2': wrong_values, max abs err 0.25" in by_index[0].problem and "'w1'" not in by_index[0].problem
    assert "status compile_error: name 'BLOK' is not defined (line 12)" in by_index[1].problem
    assert "status flagged: output aliases an input" in by_index[2].problem
    assert f"belongs to search {foreign_search.id}" in by_index[3].problem
    assert "#999 does not exist" in by_index[4].problem
    assert by_index[5].field == "base_attempt_id" and "or null to clear it" in by_index[5].accepted
    assert by_index[6].field == "params" and "JSON" in by_index[6].problem
    assert by_index[7].field == "params" and "valid dictionary" in by_index[7].problem
    assert "root has no params" in by_index[8].problem
    assert "root has no base_attempt_id" in by_index[9].problem
    assert f"near-duplicate of node #{tuned.id}" in by_index[10].problem
    assert "takes no field values (got params)" in by_index[11].problem
    assert await store.list_nodes(search.id) == nodes_before
    assert await store.list_edits(search.id) == log_before
    # Other values are another idea: accepted.
    (moved,) = await apply_edits(
        store, search.id, [{"op": "update", "node_id": other.id, "params": {"BLOCK": 256}}], "tuner", 2
    )
    assert moved.params == {"BLOCK": 256}


async def test_move_takes_the_subtree_and_its_branch(store: Store, search: Search) -> None:
    t = await tree(store, search)
    (a1,) = await apply_edits(
        store,
        search.id,
        [{"op": "move", "node_id": t["a1"].id, "parent_id": t["b"].id, "reason": "builds on the fusion"}],
        "llm:m",
        3,
    )
    assert (a1.parent_id, a1.round_updated) == (t["b"].id, 3)
    assert (await store.get_node(t["a1x"].id)).parent_id == t["a1"].id  # the subtree comes along
    assert [n.id for n in await store.children(t["a"].id)] == []
    assert [n.id for n in await store.children(t["b"].id)] == [t["a1"].id]
    branches = await _branches(store, search)
    assert branches[t["a1"].id] == branches[t["a1x"].id] == t["b"].id
    assert branches[t["a"].id] == t["a"].id
    last = (await store.list_edits(search.id))[-1]
    assert (last.op, last.node_id, last.author, last.round, last.reason) == (
        "move",
        t["a1"].id,
        "llm:m",
        3,
        "builds on the fusion",
    )
    assert last.payload == {
        "parent_id": t["b"].id,
        "from_parent_id": t["a"].id,
        "subtree": [t["a1"].id, t["a1x"].id],
    }
    # Under the root, a node starts a branch of its own.
    await apply_edits(
        store, search.id, [{"op": "move", "node_id": t["a1"].id, "parent_id": t["root"].id}], "human", 3
    )
    branches = await _branches(store, search)
    assert branches[t["a1"].id] == branches[t["a1x"].id] == t["a1"].id


async def test_move_refusals(store: Store, search: Search) -> None:
    t = await tree(store, search)
    (dup, pruned, vetoed) = await apply_intents(
        store,
        search.id,
        [{"title": "Vectorize the loads"}, {"title": "dead idea"}, {"title": "forbidden idea"}],
        "human",
        1,
    )
    await apply_edits(
        store,
        search.id,
        [{"op": "prune", "node_id": pruned.id}, {"op": "veto", "node_id": vetoed.id}],
        "human",
        1,
    )
    other = await store.create_search("other", "t")
    (foreign,) = await apply_intents(store, other.id, [{"title": "foreign idea"}], "human", 0)
    nodes_before = await store.list_nodes(search.id)
    log_before = await store.list_edits(search.id)
    err = await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "move", "node_id": t["root"].id, "parent_id": t["a"].id},  # 0 the root
                {"op": "move", "node_id": t["a"].id, "parent_id": t["a1x"].id},  # 1 into its own subtree
                {"op": "move", "node_id": t["a"].id, "parent_id": t["a"].id},  # 2 under itself
                {"op": "move", "node_id": t["b"].id, "parent_id": pruned.id},  # 3 onto a pruned node
                {"op": "move", "node_id": t["b"].id, "parent_id": vetoed.id},  # 4 onto a vetoed node
                {"op": "move", "node_id": t["b"].id, "parent_id": foreign.id},  # 5 another search
                {"op": "move", "node_id": t["b"].id, "parent_id": 999},  # 6 no such node
                {"op": "move", "node_id": t["b"].id, "parent_id": t["root"].id},  # 7 already there
                {"op": "move", "node_id": t["b"].id},  # 8 no parent
                {
                    "op": "move",
                    "node_id": t["b"].id,
                    "parent_id": t["c"].id,
                    "priority": 0.2,
                },  # 9 extra field
                {"op": "update", "node_id": t["b"].id, "parent_id": t["c"].id},  # 10 update cannot move
                {"op": "move", "node_id": pruned.id, "parent_id": t["c"].id},  # 11 a pruned node
                {"op": "move", "node_id": dup.id, "parent_id": t["a"].id},  # 12 duplicate of a1 there
                {"op": "move", "node_id": t["b"].id, "parent_id": 0},  # 13 not an id
            ],
            "human",
            2,
        )
    )
    by_index = {p.index: p for p in err.details}
    assert sorted(by_index) == list(range(14))
    assert "does not apply to the root (the root has no parent to change)" in by_index[0].problem
    assert f"inside the subtree of #{t['a'].id}" in by_index[1].problem and "cycle" in by_index[1].problem
    assert "not inside the moved subtree" in by_index[1].accepted
    assert "is the node itself" in by_index[2].problem
    assert "pruned" in by_index[3].problem and f"reopen #{pruned.id}" in by_index[3].accepted
    assert "vetoed" in by_index[4].problem and f"unveto #{vetoed.id}" in by_index[4].accepted
    assert f"belongs to search {other.id}" in by_index[5].problem
    assert "#999 does not exist" in by_index[6].problem
    assert "already under" in by_index[7].problem
    assert "needs parent_id" in by_index[8].problem and by_index[8].field == "parent_id"
    assert (
        "takes only parent_id (got priority)" in by_index[9].problem and "op 'update'" in by_index[9].accepted
    )
    assert "does not move a node" in by_index[10].problem and "op 'move'" in by_index[10].accepted
    assert "pruned" in by_index[11].problem and "reopen" in by_index[11].accepted
    assert (
        f"near-duplicate of #{t['a1'].id}" in by_index[12].problem
        and "another parent" in by_index[12].accepted
    )
    assert by_index[13].field == "parent_id" and "not pruned, not vetoed" in by_index[13].accepted
    assert all(p.field in ("parent_id", None, "priority") for p in err.details)
    assert await store.list_nodes(search.id) == nodes_before
    assert await store.list_edits(search.id) == log_before


async def test_moves_in_a_batch_see_earlier_items(store: Store, search: Search) -> None:
    t = await tree(store, search)
    (d,) = await apply_intents(store, search.id, [{"title": "vectorize the loads"}], "human", 1)
    nodes_before = await store.list_nodes(search.id)
    # b goes under a1x, so a would be moving into its own subtree.
    err = await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "move", "node_id": t["b"].id, "parent_id": t["a1x"].id},
                {"op": "move", "node_id": t["a"].id, "parent_id": t["b"].id},
            ],
            "human",
            2,
        )
    )
    assert [p.index for p in err.details] == [1] and "cycle" in err.details[0].problem
    # a1 arrives under c first, so d, a near-duplicate of it, cannot join it there.
    err = await rejected(
        apply_edits(
            store,
            search.id,
            [
                {"op": "move", "node_id": t["a1"].id, "parent_id": t["c"].id},
                {"op": "move", "node_id": d.id, "parent_id": t["c"].id},
            ],
            "human",
            2,
        )
    )
    assert [p.index for p in err.details] == [1] and f"#{t['a1'].id}" in err.details[0].problem
    assert await store.list_nodes(search.id) == nodes_before
    # A prune after a move takes what was moved in; a move out first spares it.
    await apply_edits(
        store,
        search.id,
        [
            {"op": "move", "node_id": t["a1"].id, "parent_id": t["c"].id},
            {"op": "move", "node_id": t["a1x"].id, "parent_id": t["b"].id},
            {"op": "prune", "node_id": t["c"].id},
        ],
        "human",
        2,
    )
    status = {n.id: n.status for n in await store.list_nodes(search.id)}
    assert (status[t["c"].id], status[t["a1"].id], status[t["a1x"].id]) == ("pruned", "pruned", "open")
    assert (await store.list_edits(search.id))[-1].payload["subtree"] == [t["c"].id, t["a1"].id]
    branches = await _branches(store, search)
    assert (branches[t["a1"].id], branches[t["a1x"].id]) == (t["c"].id, t["b"].id)


def test_every_edit_field_is_described_for_clients() -> None:
    props = EditSpec.model_json_schema()["properties"]
    assert {"params", "base_attempt_id", "parent_id"} <= set(props)
    assert [k for k, v in props.items() if not v.get("description")] == []
    assert "move" in props["op"]["enum"] and "null clears it" in props["base_attempt_id"]["description"]
