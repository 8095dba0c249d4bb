"""benchmark_batch, called as a function on the real sandbox (the Triton interpreter without a GPU): several
implementations of one intent evaluated together and recorded in order, as `benchmark` records each; an item refused
up front says why while the others go on; an item whose phase the items before it ended comes back evaluated, not
recorded; a batch of nothing valid is refused with every item's reason and nothing stored."""

from __future__ import annotations

import pytest
from toolkit import NOT_PYTHON, ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.benchmark_batch import BatchItem, BenchmarkBatchIn, benchmark_batch
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.state import loop_state
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


def _item(source: str, node: int | None) -> BatchItem:
    return BatchItem(candidate=CandidateRef(source=source), node_id=node)


async def _claimed(ws: Workspace, task: str, name: str, stagnation: int) -> int:
    await create_search(ws, CreateSearchIn(task=task, name=name, stagnation=stagnation))
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search=name, intents=[IntentSpec(title="one row per program")])
    )
    await select_action(ws, SelectActionIn(search=name))
    return intent.id


@pytest.mark.slow
async def test_a_batch_records_each_item_in_order_as_benchmark_would(ws: Workspace, tiny_task: str) -> None:
    node = await _claimed(ws, tiny_task, "batch", stagnation=5)
    said: list[str] = []

    async def progress(what: str, frac: float) -> None:
        said.append(what)

    out = await benchmark_batch(
        ws,
        BenchmarkBatchIn(
            search="batch",
            items=[_item(WRONG_ROW_SUM, node), _item(ROW_SUM_SEED, node), _item(NOT_PYTHON, node)],
            trials=1,
            author="llm:m",
        ),
        progress,
    )
    statuses = [r.result.evaluation.status if r.result else None for r in out.results]
    assert statuses == ["incorrect", "ok", "compile_error"], out.summary
    # each item ran in a fresh process: the machine each names is the one they ran on, never "unknown" (read
    # between one item's process and the next, the device was once unknown and the baselines keyed apart)
    ran = [r.result.evaluation for r in out.results[:2] if r.result]
    assert [e.env.device if e.env else None for e in ran] == ["cpu-interpreter"] * 2, [e.env for e in ran]
    assert all(r.recorded and not r.refused for r in out.results), out.summary
    ids = [r.result.attempt_id for r in out.results if r.result]
    assert ids == sorted(ids) and len(set(ids)) == 3  # recorded in the batch's order
    attempts = [await ws.store.get_attempt(i) for i in ids if i is not None]
    assert [(a.node_id, a.author) for a in attempts] == [(node, "llm:m")] * 3
    # each item saw the phase as the items before it left it: attempt 1, 2, 3 of the cap
    refines = [r.result.refine for r in out.results if r.result]
    assert [r.attempts for r in refines if r] == [1, 2, 3]
    assert (
        refines[1] is not None and refines[1].best_attempt_id == ids[1]
    )  # the correct one is the node's best
    assert "3 of 3 evaluated in" in out.summary and "per minute" in out.summary
    # each evaluated item's steps, named; the one that does not parse runs nothing
    assert {w.split("]")[0] for w in said} == {"[1/3", "[2/3"}, said
    assert f"node_id={node}" in out.next


@pytest.mark.slow
async def test_an_item_after_the_phase_ended_is_evaluated_not_recorded(ws: Workspace, tiny_task: str) -> None:
    # a stagnation window of 2: the first correct attempt is the node's best; interpreter timings are never a gain,
    # so the next two correct attempts fill the window and end the phase
    node = await _claimed(ws, tiny_task, "short", stagnation=2)
    good = [ROW_SUM_SEED + f"\n# variant {i}\n" for i in range(4)]
    out = await benchmark_batch(
        ws, BenchmarkBatchIn(search="short", items=[_item(g, node) for g in good], trials=1)
    )
    *kept, fourth = out.results
    assert all(r.recorded for r in kept), out.summary
    last = kept[-1].result
    assert last is not None and last.refine is not None and last.refine.over and last.refine.stagnant == 2
    assert not fourth.recorded and fourth.result is not None and fourth.result.attempt_id is None
    assert (
        fourth.result.evaluation.status == "ok"
    )  # its evaluation is not lost: returned with its candidate id
    assert fourth.refused.startswith("evaluated, not recorded:") and "refine phase" in fourth.refused
    assert len(await ws.store.list_attempts((await ws.search("short")).id, node)) == 3


@pytest.mark.slow
async def test_a_refused_item_says_why_and_the_others_go_on(ws: Workspace, tiny_task: str) -> None:
    node = await _claimed(ws, tiny_task, "mixed", stagnation=5)
    out = await benchmark_batch(
        ws,
        BenchmarkBatchIn(
            search="mixed",
            items=[_item(ROW_SUM_SEED, 9999), _item(ROW_SUM_SEED, node)],
            trials=1,
        ),
    )
    bad, good = out.results
    assert bad.result is None and not bad.recorded and bad.refused.startswith("not evaluated:")
    assert "9999" in bad.refused, bad.refused
    assert good.recorded and good.result is not None and good.result.evaluation.status == "ok"
    assert "item 0: not evaluated" in out.summary and "1 of 2 evaluated" in out.summary


async def test_a_batch_with_nothing_valid_is_refused_and_stores_nothing(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await create_search(ws, CreateSearchIn(task=tiny_task, name="none"))
    before = await snapshot()
    with pytest.raises(ToolFailure) as e:
        await benchmark_batch(
            ws,
            BenchmarkBatchIn(
                search="none",
                items=[
                    _item(ROW_SUM_SEED, 9999),
                    BatchItem(candidate=CandidateRef(candidate_id="c0123456789abcde")),
                ],
            ),
        )
    assert "item 0:" in str(e.value) and "item 1:" in str(e.value) and "c0123456789abcde" in str(e.value)
    assert await snapshot() == before


def test_a_batch_is_one_to_eight_items() -> None:
    with pytest.raises(ValueError):
        BenchmarkBatchIn(search="s", items=[])
    with pytest.raises(ValueError):
        BenchmarkBatchIn(search="s", items=[_item(ROW_SUM_SEED, None)] * 9)


async def test_without_a_gpu_the_next_step_says_how_many_attempts_a_phase_can_still_record(
    ws: Workspace, tiny_task: str
) -> None:
    """A batched host writes a phase's attempts before it reads any answer: without a GPU (no interpreter timing
    is a gain) the loop says how many more the phase records, once it has correct code."""
    node = await _claimed(ws, tiny_task, "counted", stagnation=3)
    out = await benchmark_batch(
        ws, BenchmarkBatchIn(search="counted", items=[_item(ROW_SUM_SEED, node)], trials=1)
    )
    assert out.results[0].recorded
    state = await loop_state(ws, (await ws.search("counted")).id)
    assert "Without a GPU no interpreter timing is ever a gain, so this phase ends after at most 3 more" in state.next
