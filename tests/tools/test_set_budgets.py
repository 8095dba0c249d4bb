"""set_budgets, called as a function: a spent search goes on once its budget is raised (rounds in all or beyond
those started, lifted budgets), a finished one is running again and owes a new final evaluation; each change is
kept with its author; every refusal says what is accepted and writes nothing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from toolkit import Snapshot

from ksearch.tools.budgets import SetBudgetsIn, set_budgets
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.state import budget_state, loop_state
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import EditSpec, IntentSpec

pytestmark = pytest.mark.anyio


async def _spent(ws: Workspace, task: str) -> int:
    """A search of one round whose round is started: its budget is spent, one intent is left open."""
    s = await create_search(ws, CreateSearchIn(task=task, name="s", rounds=1))
    await propose_intents(
        ws,
        ProposeIntentsIn(
            search="s",
            intents=[
                IntentSpec(title="two rows per program", priority=0.9),
                IntentSpec(title="wider blocks"),
            ],
        ),
    )
    await select_action(ws, SelectActionIn(search="s"))
    with pytest.raises(
        ToolFailure, match=r"round budget reached \(1 of 1 rounds started\).*or raise the budget"
    ):
        await select_action(ws, SelectActionIn(search="s"), lanes=2)
    return s.id


async def test_more_rounds_let_a_spent_search_go_on_and_the_change_is_kept(
    bare_ws: Workspace, tiny_task: str
) -> None:
    sid = await _spent(bare_ws, tiny_task)
    out = await set_budgets(bare_ws, SetBudgetsIn(search="s", more_rounds=2, attempts=30, author="llm:m"))
    assert (out.before.rounds, out.after.rounds, out.after.attempts, out.exhausted) == (1, 3, 30, None)
    assert (await bare_ws.search(sid)).config.budgets.rounds == 3
    sel = await select_action(bare_ws, SelectActionIn(search="s"), lanes=2)
    assert sel.claimed and sel.round == 2
    state = await budget_state(bare_ws, await bare_ws.search(sid))
    assert (state.rounds_used, state.rounds, state.exhausted) == (2, 3, None)
    [change] = await bare_ws.store.cache_get(f"budget_changes:{sid}")
    assert (change["author"], change["round"], change["before"]["rounds"], change["after"]["rounds"]) == (
        "llm:m",
        1,
        1,
        3,
    )
    lifted = await set_budgets(bare_ws, SetBudgetsIn(search="s", lift=["rounds", "attempts"]))
    assert (lifted.after.rounds, lifted.after.attempts) == (None, None)
    low = await set_budgets(bare_ws, SetBudgetsIn(search="s", rounds=1))  # lowering is allowed, and said
    assert low.exhausted == "round budget reached (2 of 1 rounds started)" and "Still spent" in low.next


async def test_a_finished_search_runs_again_and_owes_a_new_final_evaluation(
    bare_ws: Workspace, tiny_task: str
) -> None:
    sid = await _spent(bare_ws, tiny_task)
    await bare_ws.store.record_final(sid, [], [])
    await bare_ws.store.set_search_status(sid, "done")
    assert (await loop_state(bare_ws, sid)).phase == "done"
    out = await set_budgets(bare_ws, SetBudgetsIn(search="s", rounds=2))
    assert (await bare_ws.search(sid)).status == "running"
    assert "intent #" in out.next  # the intent still being refined comes first, as in any running search
    await bare_ws.store.bump_round(sid)  # a round started after the final evaluation...
    state = await loop_state(bare_ws, sid)
    assert state.phase != "done"  # ...so the recorded one no longer speaks for the search


async def test_refusals_say_what_is_accepted_and_write_nothing(
    bare_ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await _spent(bare_ws, tiny_task)
    before = await snapshot()
    bad = [
        ({"search": "s"}, "nothing to change; give rounds or more_rounds"),
        ({"search": "s", "rounds": 3, "more_rounds": 1}, "give rounds (in all) or more_rounds"),
        ({"search": "s", "rounds": 3, "lift": ["rounds"]}, "rounds: both set and lifted"),
        ({"search": "s", "rounds": 0}, "greater than or equal to 1"),
        (
            {"search": "s", "lift": ["speed"]},
            "'rounds', 'attempts', 'wall_s', 'tokens', 'usd' or 'target_speedup'",
        ),
    ]
    for args, said in bad:
        with pytest.raises(ValidationError) as e:
            SetBudgetsIn(**args)
        assert said in str(e.value), (args, str(e.value))
    with pytest.raises(ToolFailure, match=r"the budgets of 's' already are rounds=1: nothing was changed"):
        await set_budgets(bare_ws, SetBudgetsIn(search="s", rounds=1))
    with pytest.raises(NotFound):
        await set_budgets(bare_ws, SetBudgetsIn(search="nope", rounds=4))
    assert await snapshot() == before


async def test_an_intent_reopened_after_the_end_lets_the_search_go_on(
    bare_ws: Workspace, tiny_task: str
) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="s", rounds=5))
    [a] = await propose_intents(
        bare_ws, ProposeIntentsIn(search="s", intents=[IntentSpec(title="wider blocks")])
    )
    await select_action(bare_ws, SelectActionIn(search="s"))
    await bare_ws.store.close_node(a.id, "failed")
    await bare_ws.store.record_final(s.id, [], [])
    await bare_ws.store.set_search_status(s.id, "done")
    assert (await loop_state(bare_ws, s.id)).phase == "done"
    await edit_tree(bare_ws, EditTreeIn(search="s", edits=[EditSpec(op="reopen", node_id=a.id)]))
    state = await loop_state(bare_ws, s.id)
    assert state.phase == "select" and f"with intents open (#{a.id}) and budget left" in state.next
    assert "a new final_evaluation is due at its end" in state.next
    sel = await select_action(bare_ws, SelectActionIn(search="s"))
    assert sel.claimed and sel.node is not None and sel.node.id == a.id
    assert (await bare_ws.search(s.id)).status == "running"
