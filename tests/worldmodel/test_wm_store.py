"""Store basics: opening, searches, nodes, candidates, the result path, LLM accounting, cache."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import anyio
import pytest

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.errors import Conflict, InvalidTransition, NotFound
from ksearch.worldmodel.models import Attempt, Environment, Evaluation, Search, SearchConfig, WorkloadTiming
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


def ok(speedup: float | None) -> Evaluation:
    return Evaluation(status="ok", speedup_vs_eager=speedup)


async def test_open_creates_dirs_and_sets_pragmas(db_path: Path) -> None:
    assert not db_path.parent.exists()
    async with await Store.open(db_path) as store:
        assert await anyio.Path(db_path).exists()
        async with store.reading() as db:
            assert (await (await db.execute("PRAGMA journal_mode")).fetchone())[0] == "wal"
            assert (await (await db.execute("PRAGMA foreign_keys")).fetchone())[0] == 1
            assert (await (await db.execute("PRAGMA busy_timeout")).fetchone())[0] == 10_000
    # Reopening an existing file keeps its content.
    async with await Store.open(db_path) as store:
        await store.create_search("a", "t")
    async with await Store.open(db_path) as store:
        assert [s.name for s in await store.list_searches()] == ["a"]


async def test_create_search_makes_root_and_logs_it(store: Store) -> None:
    s = await store.create_search("  first  ", "softmax", SearchConfig(difficulty_cap=2))
    assert s.name == "first" and s.config.difficulty_cap == 2 and s.status == "new" and s.round == 0
    root = await store.root(s.id)
    assert (root.kind, root.title, root.parent_id) == ("root", "root", None)
    assert [n.id for n in await store.list_nodes(s.id)] == [root.id]
    edits = await store.list_edits(s.id)
    assert [(e.op, e.node_id) for e in edits] == [("insert", root.id)]


async def test_search_names_are_unique_and_not_numeric(store: Store) -> None:
    await store.create_search("dup", "t")
    with pytest.raises(Conflict, match="already exists"):
        await store.create_search("dup", "t")
    with pytest.raises(ValueError, match="not all digits"):
        await store.create_search("123", "t")
    with pytest.raises(ValueError, match="bad search name"):
        await store.create_search("", "t")
    with pytest.raises(ValueError, match="bad search config"):
        await store.create_search("x", "t", {"difficulty_cap": 3, "nonsense": 1})


async def test_get_search_by_id_or_name_and_not_found_lists(store: Store) -> None:
    a = await store.create_search("alpha", "t")
    b = await store.create_search("beta", "t")
    assert (await store.get_search(a.id)).name == "alpha"
    assert (await store.get_search(str(b.id))).name == "beta"
    assert (await store.get_search("beta")).id == b.id
    with pytest.raises(NotFound) as err:
        await store.get_search("gamma")
    assert "'alpha'" in str(err.value) and "'beta'" in str(err.value)
    with pytest.raises(NotFound, match="no search with id 99"):
        await store.get_search(99)


async def test_search_fields_status_and_round(store: Store, search: Search) -> None:
    assert await store.bump_round(search.id) == 1
    assert await store.bump_round(search.id) == 2
    s = await store.set_search_status(search.id, "running")
    assert (s.status, s.round) == ("running", 2)
    s = await store.set_search_fields(search.id, name="renamed", config={"difficulty_cap": 5})
    assert s.name == "renamed" and s.config.difficulty_cap == 5
    with pytest.raises(ValueError, match="accepted: new, running"):
        await store.set_search_status(search.id, "exploded")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.set_search_fields(search.id, best_attempt_id=1)  # type: ignore[call-arg]


async def test_candidates_are_content_addressed(store: Store) -> None:
    a = await store.put_candidate("class ModelNew: pass\n", "triton")
    b = await store.put_candidate("class ModelNew: pass\n", "triton")
    c = await store.put_candidate("class ModelNew: pass\n", "cuda")
    assert a.id == b.id != c.id
    assert (await store.get_candidate(a.id)).source == "class ModelNew: pass\n"
    with pytest.raises(ValueError, match="accepted: triton, cuda, cpp_ext"):
        await store.put_candidate("x", "rust")
    with pytest.raises(NotFound, match="put_candidate"):
        await store.get_candidate("cdeadbeef")


async def test_record_attempt_updates_best_visits_and_status(store: Store, search: Search) -> None:
    n1, n2 = await apply_intents(
        store, search.id, [{"title": "tile the loop"}, {"title": "fuse the epilogue"}], "human", 0
    )
    cand = await store.put_candidate("src", "triton")
    bad = await store.record_attempt(search.id, n1.id, cand.id, Evaluation(status="incorrect"))
    node = await store.get_node(n1.id)
    assert (node.visits, node.best_attempt_id, node.status) == (1, None, "open")
    assert (await store.get_search(search.id)).best_attempt_id is None
    assert bad.speedup is None

    first = await store.record_attempt(
        search.id, n1.id, cand.id, ok(1.5), base_attempt_id=bad.id, round=3, author="llm:m"
    )
    assert (first.round, first.author, first.base_attempt_id) == (3, "llm:m", bad.id)
    node = await store.get_node(n1.id)
    # recording leaves the status alone: the loop closes an intent when its refine phase ends
    assert (node.visits, node.best_attempt_id, node.status) == (2, first.id, "open")
    assert (await store.get_search(search.id)).best_attempt_id == first.id

    tie = await store.record_attempt(search.id, n2.id, cand.id, ok(1.5))
    assert (await store.get_node(n2.id)).best_attempt_id == tie.id  # first correct on its node
    assert (await store.get_search(search.id)).best_attempt_id == first.id  # a tie keeps the older

    slower = await store.record_attempt(search.id, n1.id, cand.id, ok(1.2))
    assert (await store.get_node(n1.id)).best_attempt_id == first.id
    faster = await store.record_attempt(search.id, n2.id, cand.id, ok(2.0))
    assert (await store.get_node(n2.id)).best_attempt_id == faster.id
    best = await store.best_attempt(search.id)
    assert best is not None and best.id == faster.id and best.speedup == 2.0
    assert [a.id for a in await store.list_attempts(search.id, n1.id)] == [bad.id, first.id, slower.id]
    assert len(await store.list_attempts(search.id)) == 5
    assert (await store.get_attempt(first.id)).evaluation == ok(1.5)
    assert (await store.attempt_speedups(search.id))[bad.id] is None


async def test_record_attempt_custom_better_and_no_node(store: Store, search: Search) -> None:
    cand = await store.put_candidate("src", "triton")

    def lower_wins(a: Attempt, b: Attempt) -> bool:  # an odd rule, to prove the caller's rule is used
        return (a.speedup or 0) < (b.speedup or 0)

    a = await store.record_attempt(search.id, None, cand.id, ok(2.0), better=lower_wins)
    b = await store.record_attempt(search.id, None, cand.id, ok(1.0), better=lower_wins)
    await store.record_attempt(search.id, None, cand.id, ok(3.0), better=lower_wins)
    assert a.node_id is None
    assert (await store.get_search(search.id)).best_attempt_id == b.id


async def test_record_attempt_validates_references(store: Store, search: Search) -> None:
    other = await store.create_search("other", "t")
    foreign = (await apply_intents(store, other.id, [{"title": "other idea"}], "human", 0))[0]
    cand = await store.put_candidate("src", "triton")
    with pytest.raises(NotFound, match="belongs to search"):
        await store.record_attempt(search.id, foreign.id, cand.id, ok(1.0))
    with pytest.raises(NotFound, match="put_candidate"):
        await store.record_attempt(search.id, None, "cnothere", ok(1.0))
    foreign_attempt = await store.record_attempt(other.id, None, cand.id, ok(1.0))
    with pytest.raises(NotFound, match="base attempt"):
        await store.record_attempt(search.id, None, cand.id, ok(1.0), base_attempt_id=foreign_attempt.id)
    with pytest.raises(ValueError):
        await store.record_attempt(search.id, None, cand.id, {"status": "ok", "best_attempt_id": 3})
    assert await store.list_attempts(search.id) == []


async def test_pruned_node_stays_pruned_when_a_result_arrives(store: Store, search: Search) -> None:
    (n,) = await apply_intents(store, search.id, [{"title": "in flight idea"}], "human", 0)
    await store.set_node_status(n.id, "active")
    await apply_edits(store, search.id, [{"op": "prune", "node_id": n.id}], "human", 0)
    cand = await store.put_candidate("src", "triton")
    att = await store.record_attempt(search.id, n.id, cand.id, ok(1.1))
    node = await store.get_node(n.id)
    assert (node.status, node.best_attempt_id) == ("pruned", att.id)
    assert (await store.close_node(n.id, "closed")).status == "pruned"  # the refine loop ending is harmless


async def test_node_status_lifecycle(store: Store, search: Search) -> None:
    a, b = await apply_intents(
        store, search.id, [{"title": "idea one"}, {"title": "another thing"}], "human", 0
    )
    assert (await store.set_node_status(a.id, "active")).status == "active"
    with pytest.raises(InvalidTransition, match="open → active"):
        await store.set_node_status(a.id, "active")  # a second claim must fail
    assert (await store.set_node_status(a.id, "open")).status == "open"
    with pytest.raises(InvalidTransition, match="no correct attempt"):
        await store.close_node(a.id, "closed")
    assert (await store.close_node(a.id, "failed")).status == "failed"
    assert (await store.close_node(a.id, "failed")).status == "failed"  # repeating is a no-op
    with pytest.raises(InvalidTransition):
        await store.set_node_status(a.id, "active")
    cand = await store.put_candidate("src", "triton")
    await store.set_node_status(b.id, "active")
    await store.record_attempt(search.id, b.id, cand.id, ok(1.3))
    assert (await store.get_node(b.id)).status == "active"  # recording never ends the refine phase
    assert (await store.close_node(b.id, "closed")).status == "closed"
    assert (await store.close_node(b.id, "closed")).status == "closed"  # repeating is a no-op
    with pytest.raises(InvalidTransition, match="is closed"):
        await store.close_node(b.id, "failed")
    await apply_edits(store, search.id, [{"op": "reopen", "node_id": b.id}], "human", 0)
    with pytest.raises(InvalidTransition, match="accepted: closed"):
        await store.close_node(b.id, "failed")  # reopened, but it still holds a correct attempt
    assert (await store.close_node(b.id, "closed")).status == "closed"
    root = await store.root(search.id)
    with pytest.raises(InvalidTransition, match="root"):
        await store.close_node(root.id, "failed")
    with pytest.raises(InvalidTransition, match="accepted: closed, failed"):
        await store.close_node(b.id, "pruned")  # type: ignore[arg-type]
    await apply_edits(
        store, search.id, [{"op": "veto", "node_id": b.id}, {"op": "reopen", "node_id": b.id}], "human", 0
    )
    with pytest.raises(InvalidTransition, match="vetoed"):
        await store.set_node_status(b.id, "active")
    assert [n.id for n in await store.children(root.id)] == [a.id, b.id]
    assert await store.node_counts(search.id) == {"failed": 1, "open": 1}


async def test_llm_calls_and_totals(store: Store, search: Search) -> None:
    await store.log_llm_call(
        search_id=search.id,
        phase="init",
        provider="anthropic",
        model="m",
        tokens_in=100,
        tokens_out=20,
        cost_usd=0.01,
    )
    await store.log_llm_call(
        search_id=search.id,
        phase="update",
        provider="anthropic",
        model="m",
        tokens_in=50,
        tokens_out=5,
        cost_usd=0.002,
        error="timeout",
    )
    await store.log_llm_call(search_id=None, phase="other", provider="openai", model="x", tokens_in=1)
    calls = await store.list_llm_calls(search.id)
    assert [c.phase for c in calls] == ["init", "update"] and calls[1].error == "timeout"
    t = await store.llm_totals(search.id)
    assert (t.calls, t.tokens_in, t.tokens_out) == (2, 150, 25) and t.usd == pytest.approx(0.012)
    assert (await store.llm_totals()).calls == 3
    with pytest.raises(ValueError, match="phase"):
        await store.log_llm_call(search_id=None, phase="dreaming", provider="p", model="m")  # type: ignore[arg-type]


async def test_cache_round_trip(store: Store) -> None:
    assert await store.cache_get("eager|H200|w1") is None
    assert await store.cache_get("missing", default=7) == 7
    await store.cache_put("eager|H200|w1", {"median_us": 12.5, "n": 50})
    await store.cache_put("eager|H200|w1", {"median_us": 11.0, "n": 60})
    assert await store.cache_get("eager|H200|w1") == {"median_us": 11.0, "n": 60}
    with pytest.raises(TypeError, match="JSON"):
        await store.cache_put("bad", {1, 2})


async def test_database_refuses_rewriting_history(store: Store, search: Search, db_path: Path) -> None:
    cand = await store.put_candidate("src", "triton")
    att = await store.record_attempt(search.id, None, cand.id, ok(1.0))
    raw = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("UPDATE edits SET reason = 'rewritten'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("DELETE FROM edits")
        with pytest.raises(sqlite3.IntegrityError, match="written once"):
            raw.execute("UPDATE attempts SET speedup = 99 WHERE id = ?", (att.id,))
        with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
            raw.execute("DELETE FROM attempts")
    finally:
        raw.close()


async def test_failed_transaction_leaves_nothing(store: Store, search: Search) -> None:
    before = await store.list_nodes(search.id)
    with pytest.raises(RuntimeError):
        async with store.transaction() as db:
            await db.execute(
                "INSERT INTO nodes (search_id, parent_id, kind, title, author) VALUES (?, ?, 'intent', 'x', 'h')",
                (search.id, before[0].id),
            )
            raise RuntimeError("boom")
    assert await store.list_nodes(search.id) == before


async def test_cancelled_writers_leave_the_store_usable(store: Store, search: Search) -> None:
    before = await store.list_nodes(search.id)
    inside = asyncio.Event()

    async def writer(wait_inside: bool) -> None:
        async with store.transaction() as db:
            await db.execute(
                "INSERT INTO nodes (search_id, parent_id, kind, title, author) VALUES (?, ?, 'intent', 'x', 'h')",
                (search.id, before[0].id),
            )
            if wait_inside:
                inside.set()
                await asyncio.sleep(30)

    mid = asyncio.create_task(writer(True))
    await inside.wait()
    mid.cancel()  # cancelled inside the transaction
    with pytest.raises(asyncio.CancelledError):
        await mid
    early = asyncio.create_task(writer(False))
    await asyncio.sleep(0)  # it takes the free lock and queues BEGIN; cancel it right there
    early.cancel()
    with pytest.raises(asyncio.CancelledError):
        await early
    assert await store.list_nodes(search.id) == before
    (n,) = await apply_intents(store, search.id, [{"title": "after the cancellations"}], "human", 0)
    assert (await store.get_node(n.id)).title == "after the cancellations"


# ------------------------------------------------------------------ CPU-interpreter timings rank nothing


def timed(speedup: float, device: str = "NVIDIA H200") -> Evaluation:
    """A correct evaluation timed on `device` ("cpu-interpreter": the Triton CPU interpreter)."""
    med = 100.0 / speedup
    timing = WorkloadTiming(
        workload="smoke",
        device=device,
        median_us=med,
        iqr_us=med * 0.01,
        ci_low_us=med * 0.99,
        ci_high_us=med * 1.01,
        n=50,
        eager_us=100.0,
        speedup_vs_eager=speedup,
    )
    cpu = device == "cpu-interpreter"
    return Evaluation(
        status="ok",
        timings=[timing],
        speedup_vs_eager=speedup,
        env=Environment(device=device, cpu_mode=cpu),
    )


async def test_cpu_interpreter_timings_never_rank(store: Store, search: Search) -> None:
    n1, n2 = await apply_intents(
        store, search.id, [{"title": "tile the loop"}, {"title": "fuse it"}], "human", 0
    )
    cand = await store.put_candidate("src", "triton")
    asked: list[tuple[int, int]] = []

    def always(a: Attempt, b: Attempt) -> bool:  # would let anything win: proves where it is not asked
        asked.append((a.id, b.id))
        return True

    async def record(node: int | None, ev: Evaluation) -> Attempt:
        return await store.record_attempt(search.id, node, cand.id, ev, better=always)

    async def bests() -> tuple[int | None, int | None, int | None]:
        return (
            (await store.get_node(n1.id)).best_attempt_id,
            (await store.get_node(n2.id)).best_attempt_id,
            (await store.get_search(search.id)).best_attempt_id,
        )

    # The first correct attempt on a node is its best (children need correct code), not the search's.
    cpu1 = await record(n1.id, timed(3.0, "cpu-interpreter"))
    assert await bests() == (cpu1.id, None, None)
    # A faster CPU timing displaces nothing, whatever `better` says (it is not even asked).
    cpu2 = await record(n1.id, timed(9.0, "cpu-interpreter"))
    await record(None, timed(9.0, "cpu-interpreter"))
    assert await bests() == (cpu1.id, None, None) and asked == []
    # A GPU-timed correct attempt takes over from the CPU one without a comparison; it is the search's best.
    gpu1 = await record(n1.id, timed(1.2))
    assert await bests() == (gpu1.id, None, gpu1.id) and asked == []
    # Later CPU attempts change no best; on a node without a correct attempt one is still its first best.
    cpu3 = await record(n1.id, timed(50.0, "cpu-interpreter"))
    cpu4 = await record(n2.id, timed(50.0, "cpu-interpreter"))
    assert await bests() == (gpu1.id, cpu4.id, gpu1.id) and asked == []
    # Between GPU timings the caller's rule decides, as before.
    gpu2 = await record(n1.id, timed(1.5))
    assert await bests() == (gpu2.id, cpu4.id, gpu2.id) and asked == [(gpu2.id, gpu1.id)] * 2

    speedups = await store.attempt_speedups(search.id)
    assert speedups.cpu_interpreted == {cpu1.id, cpu2.id, cpu3.id, cpu4.id, cpu2.id + 1}
    assert speedups[cpu1.id] is None and speedups[cpu3.id] is None
    assert (speedups[gpu1.id], speedups[gpu2.id]) == (1.2, 1.5)
    # The measurement itself is kept as it was taken.
    assert (await store.get_attempt(cpu2.id)).evaluation == timed(9.0, "cpu-interpreter")


async def test_cpu_only_search_has_no_best(store: Store, search: Search) -> None:
    (n,) = await apply_intents(store, search.id, [{"title": "tile the loop"}], "human", 0)
    cand = await store.put_candidate("src", "triton")
    # The default rule (higher speedup) and an interpreter run known only from its environment.
    interpreted_env = Evaluation(
        status="ok", speedup_vs_eager=4.0, env=Environment(device="cpu-interpreter", cpu_mode=True)
    )
    first = await store.record_attempt(search.id, n.id, cand.id, interpreted_env)
    await store.record_attempt(search.id, n.id, cand.id, timed(8.0, "cpu-interpreter"))
    assert (await store.get_node(n.id)).best_attempt_id == first.id
    assert await store.best_attempt(search.id) is None
    async with store.reading() as db:
        with pytest.raises(sqlite3.IntegrityError, match="written once"):
            await db.execute("UPDATE attempts SET cpu_interpreted = 0 WHERE id = ?", (first.id,))
