"""finish_intent, called as a function after real attempts on the sandbox: an intent with a correct attempt
is closed, one without is failed, the reflect prompt and the loop's next step come back; finishing an intent
that is not being refined is refused, writing nothing. The edits and new intents of a reflection sent with the
call are applied with it, all or nothing."""

from __future__ import annotations

import pytest
from toolkit import ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.loop.state import Applied
from ksearch.tools.prompting.phases import reflect_and_edit
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node

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


async def test_a_reason_given_alone_is_kept_with_the_intents_end(ws: Workspace, tiny_task: str) -> None:
    """A reflection with nothing to add but its why: the reason is logged with the finish itself (entry `finish`,
    the intent's new status), where a reason given with edits or new intents goes with those."""
    a, _ = await _claimed(ws, tiny_task)
    await _attempt(ws, a, WRONG_ROW_SUM)
    s = await ws.search("f")
    before = len(await ws.store.list_edits(s.id))
    out = await finish_intent(
        ws, FinishIntentIn(search="f", node_id=a.id, reason="the sum spills", author="llm:m")
    )
    assert out.node.status.value == "failed"
    new = (await ws.store.list_edits(s.id))[before:]
    assert [(e.op, e.node_id, e.payload, e.reason, e.author) for e in new] == [
        ("finish", a.id, {"status": "failed"}, "the sum spills", "llm:m")
    ]


async def test_edits_applied_after_the_finish_are_said_in_the_next_step(
    ws: Workspace, tiny_task: str
) -> None:
    """A host that reflects after finishing (edit_tree, propose_intents in the update phase) reads that its edits
    are in, not the same request to apply them again."""
    from ksearch.tools.loop.state import loop_state

    a, b = await _claimed(ws, tiny_task)
    await _attempt(ws, a, ROW_SUM_SEED)
    await finish_intent(ws, FinishIntentIn(search="f", node_id=a.id))
    s = await ws.search("f")
    asked = (await loop_state(ws, s.id)).next
    assert asked.startswith(f"Phase 3 (update) of round {s.round}: reflect on intent #{a.id}"), asked
    await edit_tree(ws, EditTreeIn(search="f", edits=[EditSpec(op="update", node_id=b.id, priority=0.2)]))
    await propose_intents(ws, ProposeIntentsIn(search="f", intents=[IntentSpec(title="split the row")]))
    said = (await loop_state(ws, s.id)).next
    assert said.startswith(
        f"Phase 3 (update) of round {s.round}: applied since intent #{a.id} ended: 1 edit(s), 1 new intent(s). "
        "Apply any more with edit_tree and propose_intents; then call"
    ), said
    await select_action(
        ws, SelectActionIn(search="f")
    )  # the next round: nothing of the last one is said again
    assert "applied since" not in (await loop_state(ws, s.id)).next


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


async def test_the_reflections_edits_and_new_intents_come_with_the_finish(
    ws: Workspace, tiny_task: str
) -> None:
    """Edits and new intents given with finish_intent are applied right after the intent is closed (an edit
    sees its new status), kept in the edit log with their author, round and reason, and reported; the reflect
    prompt and `next` say they are applied, and the loop moves on to the next round."""
    a, b = await _claimed(ws, tiny_task)
    out = await finish_intent(
        ws,
        FinishIntentIn(
            search="f",
            edits=[
                EditSpec(
                    op="update", node_id=b.id, priority=0.2, notes="less likely after #a", reason="why b"
                ),
                EditSpec(op="reopen", node_id=a.id, reason="not refuted: no attempt was made"),
            ],
            new_intents=[IntentSpec(title="rows in registers", parent_id=a.id, priority=0.7)],
            reason="the reflection",
            author="llm:test-model",
        ),
    )
    assert out.node.id == a.id and out.node.status.value == "open"  # failed (no attempt), then reopened
    assert out.refine.attempts == 0
    [new_id] = out.applied.new_intents if out.applied else []
    assert out.applied == Applied(edits=2, new_intents=[new_id])
    got_b, new = await ws.store.get_node(b.id), await ws.store.get_node(new_id)
    assert (got_b.priority, got_b.notes) == (0.2, "less likely after #a")
    assert (new.title, new.parent_id, new.status.value, new.priority) == (
        "rows in registers",
        a.id,
        "open",
        0.7,
    )
    edits = await ws.store.list_edits(out.loop.search_id)
    assert [(e.op, e.node_id, e.author, e.round, e.reason) for e in edits[-3:]] == [
        ("update", b.id, "llm:test-model", 1, "why b"),
        ("reopen", a.id, "llm:test-model", 1, "not refuted: no attempt was made"),
        ("insert", new_id, "llm:test-model", 1, "the reflection"),
    ]
    assert edits[-2].payload["from"] == "failed"  # the edit saw the status the refine phase ended with
    said = (
        f"Already applied with finish_intent: 2 edits and the new intent #{new_id}; do not send them again."
    )
    assert out.next.startswith(said) and "Phase 1 (select)" in out.next and out.loop.phase == "select"
    assert out.reflect_prompt == ""  # the reflection came with the call: no prompt unless asked for
    # the reflect prompt served later (MCP prompt reflect_and_edit) says what was applied, over the edited tree
    later = await reflect_and_edit(ws, "f")
    assert said in later and "Apply your answer over MCP" not in later
    assert "rows in registers" in later


async def test_a_refused_edit_or_intent_changes_nothing_and_the_corrected_call_goes_through(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    """All or nothing: a refused edit (or new intent) leaves the intent being refined and writes nothing; the
    refusal names the bad item in edit_tree's (propose_intents') own words, with what is accepted."""
    a, b = await _claimed(ws, tiny_task)
    good = EditSpec(op="update", node_id=b.id, priority=0.3)
    bad = EditSpec(op="reopen", node_id=b.id)  # b is open: only a closed, failed or pruned node reopens
    before = await snapshot()
    with pytest.raises(ToolFailure) as e:
        await finish_intent(
            ws,
            FinishIntentIn(
                search="f", edits=[good, bad], new_intents=[IntentSpec(title="a new idea")], reason="r"
            ),
        )
    with pytest.raises(ToolFailure) as same:  # the same edits through edit_tree: the same problem lines
        await edit_tree(ws, EditTreeIn(search="f", edits=[good, bad]))
    assert (
        e.value.problems
        == same.value.problems
        == [
            f"item 1 (node #{b.id}): node #{b.id} is open; accepted: reopen of a closed, failed or pruned node"
        ]
    )
    assert str(e.value).startswith(
        f"`edits` refused: no edit was applied, and intent #{a.id} was not finished (it is still being refined; "
        "nothing was changed). Correct the edits and call finish_intent again"
    )
    dup = IntentSpec(title="Two rows!")  # a near-duplicate of b under the root
    with pytest.raises(ToolFailure) as e:
        await finish_intent(ws, FinishIntentIn(search="f", edits=[good], new_intents=[dup]))
    with pytest.raises(ToolFailure) as same:
        await propose_intents(ws, ProposeIntentsIn(search="f", intents=[dup]))
    assert e.value.problems == same.value.problems and "near-duplicate" in e.value.problems[0]
    assert str(e.value).startswith(
        f"`new_intents` refused: no intent was added, none of the edits was applied, and intent #{a.id} was not "
        "finished"
    )
    with pytest.raises(
        ToolFailure, match="finish_intent changed nothing: bad author 'bob'; accepted: 'human'"
    ):
        await finish_intent(ws, FinishIntentIn(search="f", edits=[good], author="bob"))
    # with edits only, the reflection is each reason-less edit's reason (an edit's own is kept)
    told = FinishIntentIn(search="f", edits=[good, good.model_copy(update={"reason": "own"})], reason="why")
    assert [e.reason for e in told.edits] == ["why", "own"]
    assert await snapshot() == before
    assert (await ws.store.get_node(a.id)).status.value == "active"
    out = await finish_intent(ws, FinishIntentIn(search="f", edits=[good]))  # corrected: all of it is applied
    assert out.node.status.value == "failed" and out.applied == Applied(edits=1, new_intents=[])
    assert (await ws.store.get_node(b.id)).priority == 0.3
