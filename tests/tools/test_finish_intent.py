"""finish_intent, called as a function after real attempts on the sandbox: an intent with a correct attempt
is closed, one without is failed, the reflect prompt and the loop's next step come back; finishing an intent
that is not being refined is refused, writing nothing."""

from __future__ import annotations

import pytest
from toolkit import ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import IntentSpec, Node

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


async def _claimed(ws: Workspace, task: str) -> tuple[Node, Node]:
    await create_search(ws, CreateSearchIn(task=task, name="f"))
    a, b = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="f",
            intents=[IntentSpec(title="one row per program", priority=0.9), IntentSpec(title="two rows")],
        ),
    )
    await select_action(ws, SelectActionIn(search="f"))
    return a, b


async def _attempt(ws: Workspace, node: Node, source: str) -> None:
    await benchmark(
        ws, BenchmarkIn(search="f", node_id=node.id, candidate=CandidateRef(source=source), trials=1)
    )


@pytest.mark.slow
async def test_an_intent_with_a_correct_attempt_is_closed(ws: Workspace, tiny_task: str) -> None:
    a, _ = await _claimed(ws, tiny_task)
    await _attempt(ws, a, WRONG_ROW_SUM)
    await _attempt(ws, a, ROW_SUM_SEED)
    out = await finish_intent(ws, FinishIntentIn(search="f"))  # the one active intent
    assert out.node.id == a.id and out.node.status.value == "closed"
    assert (await ws.store.get_node(a.id)).status.value == "closed"
    assert (out.refine.node_id, out.refine.attempts, out.refine.round) == (a.id, 2, 1)
    assert out.refine.best_attempt_id == out.node.best_attempt_id is not None
    assert out.loop.phase == "update" and out.loop.refining == [] and out.next == out.loop.next
    assert f"Phase 3 (update) of round 1: reflect on intent #{a.id}" in out.next
    assert f"#{a.id}" in out.reflect_prompt and "one row per program" in out.reflect_prompt


async def test_an_intent_without_a_correct_attempt_is_failed(ws: Workspace, tiny_task: str) -> None:
    a, b = await _claimed(ws, tiny_task)
    await _attempt(ws, a, WRONG_ROW_SUM)
    out = await finish_intent(ws, FinishIntentIn(search="f", node_id=a.id))
    assert out.node.status.value == "failed" and out.node.best_attempt_id is None
    assert (out.refine.attempts, out.refine.best_attempt_id) == (1, None)
    assert (await ws.store.get_node(b.id)).status.value == "open"  # the other intent is untouched


async def test_finishing_what_is_not_being_refined_is_refused(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await create_search(ws, CreateSearchIn(task=tiny_task, name="g"))
    [foreign] = await propose_intents(
        ws, ProposeIntentsIn(search="g", intents=[IntentSpec(title="elsewhere")])
    )
    a, b = await _claimed(ws, tiny_task)
    before = await snapshot()
    refusals: list[tuple[FinishIntentIn, type[Exception], str]] = [
        (FinishIntentIn(search="ff"), NotFound, "no search named 'ff'"),
        (FinishIntentIn(search="f", node_id=999), NotFound, "999"),
        (
            FinishIntentIn(search="f", node_id=foreign.id),
            ToolFailure,
            f"node {foreign.id} belongs to another search",
        ),
        (
            FinishIntentIn(search="f", node_id=b.id),
            ToolFailure,
            f"intent #{b.id} is open, not being refined: only a claimed (active) intent can be finished",
        ),
        (FinishIntentIn(search="g"), ToolFailure, "no intent is being refined; claim one with select_action"),
    ]
    for inp, cls, said in refusals:
        with pytest.raises(cls) as e:
            await finish_intent(ws, inp)
        assert said in str(e.value), (inp, str(e.value))
    assert await snapshot() == before
    assert (await ws.store.get_node(a.id)).status.value == "active"
