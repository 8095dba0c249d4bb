"""select_action, called as a function: the rule's pick (claim=false changes nothing), a claim that starts a
round, and every refusal of the loop saying what to do instead, with nothing written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from toolkit import Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.state import loop_state
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node, Search
from tests.fixtures.evals import gpu_eval

pytestmark = pytest.mark.anyio


async def _two_intents(ws: Workspace, task: str, rounds: int = 10) -> tuple[Search, Node, Node]:
    s = await create_search(ws, CreateSearchIn(task=task, name="s", rounds=rounds))
    hi, lo = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="s",
            intents=[
                IntentSpec(title="two rows per program", priority=0.9),
                IntentSpec(title="wider blocks", priority=0.1),
            ],
        ),
    )
    return s, hi, lo


async def test_claim_false_names_the_rules_pick_and_changes_nothing(
    bare_ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    _, hi, _ = await _two_intents(bare_ws, tiny_task)
    before = await snapshot()
    out = await select_action(bare_ws, SelectActionIn(search="s", claim=False))
    assert out.node is not None and out.node.id == hi.id and not out.claimed and out.round == 0
    assert out.reason and out.loop is None and "Nothing was claimed (claim=false)" in out.next
    assert await snapshot() == before


async def test_a_claim_starts_a_round_and_the_refine_phase(bare_ws: Workspace, tiny_task: str) -> None:
    s, hi, lo = await _two_intents(bare_ws, tiny_task)
    out = await select_action(bare_ws, SelectActionIn(search="s"))
    assert out.node is not None and out.node.id == hi.id and out.claimed and out.round == 1
    assert (out.base_attempt_id, out.base_candidate_id) == (None, None)  # seedless: written from scratch
    assert (await bare_ws.store.get_node(hi.id)).status.value == "active"
    assert (await bare_ws.store.get_node(lo.id)).status.value == "open"
    after = await bare_ws.search(s.id)
    assert (after.round, after.status) == (1, "running")
    assert out.loop is not None and out.loop.phase == "refine"
    [r] = out.loop.refining
    assert (r.node_id, r.round, r.attempts, r.cap, r.over) == (hi.id, 1, 0, 8, False)
    assert out.next == out.loop.next and f"benchmark it with node_id={hi.id}" in out.next


async def test_a_named_intent_is_claimed_instead_of_the_rules_pick(
    bare_ws: Workspace, tiny_task: str
) -> None:
    _, hi, lo = await _two_intents(bare_ws, tiny_task)
    out = await select_action(bare_ws, SelectActionIn(search="s", node_id=lo.id))
    assert (
        out.node is not None and out.node.id == lo.id and out.claimed and out.reason == "chosen by the caller"
    )
    assert (await bare_ws.store.get_node(lo.id)).status.value == "active"
    assert (await bare_ws.store.get_node(hi.id)).status.value == "open"


async def test_claims_the_loop_does_not_allow_are_refused_writing_nothing(
    bare_ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    s, hi, lo = await _two_intents(bare_ws, tiny_task, rounds=1)
    other = await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="other"))
    [foreign] = await propose_intents(
        bare_ws, ProposeIntentsIn(search="other", intents=[IntentSpec(title="an idea")])
    )
    await edit_tree(bare_ws, EditTreeIn(search="s", edits=[EditSpec(op="veto", node_id=lo.id)]))
    root = await bare_ws.store.root(s.id)
    before = await snapshot()
    refusals: list[tuple[SelectActionIn, type[Exception], str]] = [
        (SelectActionIn(search="nope"), NotFound, "no search named 'nope'"),
        (SelectActionIn(search="s", node_id=999), NotFound, "999"),
        (
            SelectActionIn(search="s", node_id=foreign.id),
            ToolFailure,
            f"node {foreign.id} belongs to another search (id {other.id}), not 's'",
        ),
        (
            SelectActionIn(search="s", node_id=root.id),
            ToolFailure,
            f"node {root.id} is the root; only an open, unvetoed intent can be claimed",
        ),
        (
            SelectActionIn(search="s", node_id=lo.id),
            ToolFailure,
            f"node {lo.id} is vetoed; only an open, unvetoed intent can be claimed (edit_tree op=reopen / unveto first)",
        ),
    ]
    for inp, cls, said in refusals:
        with pytest.raises(cls) as e:
            await select_action(bare_ws, inp)
        assert said in str(e.value), (inp, str(e.value))
    assert await snapshot() == before

    await select_action(bare_ws, SelectActionIn(search="s", node_id=hi.id))
    before = await snapshot()
    with pytest.raises(
        ToolFailure,
        match=rf"intent #{hi.id} is still being refined \(round 1, 0 of at most 8 attempts\): finish it first with finish_intent",
    ):
        await select_action(bare_ws, SelectActionIn(search="s"))
    # two lanes (the driver on two GPUs) may refine two intents, but the one round of the budget is spent
    with pytest.raises(ToolFailure) as e:
        await select_action(bare_ws, SelectActionIn(search="s"), lanes=2)
    assert str(e.value) == (
        "The search's budget is spent (round budget reached (1 of 1 rounds started)): no new round starts. Call "
        "final_evaluation (search='s') to re-measure the best candidates on every workload, held-out ones "
        "included, or raise the budget with set_budgets to search further."
    )
    assert await snapshot() == before


async def test_a_look_past_the_budget_names_the_next_intent_and_starts_no_round(
    bare_ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    """With the budget spent, claim=false names the intent that would be next were the budget raised, says that
    no round starts, and gives the two ways forward in the claim refusal's own words (and the loop's)."""
    s, hi, lo = await _two_intents(bare_ws, tiny_task, rounds=1)
    await select_action(bare_ws, SelectActionIn(search="s"))
    # while an intent is being refined, a look says that a claim would be refused, and why
    look = await select_action(bare_ws, SelectActionIn(search="s", claim=False))
    assert look.node is not None and look.node.id == lo.id and not look.claimed
    assert look.next == (
        f"Nothing was claimed (claim=false), and a claim now would be refused: intent #{hi.id} is still being "
        f"refined (round 1, 0 of at most 8 attempts): finish it first with finish_intent (search='s', node_id={hi.id})"
    )
    await bare_ws.store.close_node(hi.id, "failed")  # round 1 of 1 is over, nothing is being refined
    before = await snapshot()
    with pytest.raises(ToolFailure) as refused:
        await select_action(bare_ws, SelectActionIn(search="s"))
    look = await select_action(bare_ws, SelectActionIn(search="s", claim=False))
    assert look.node is not None and look.node.id == lo.id and not look.claimed and look.round == 1
    assert look.next == (
        f"Nothing was claimed (claim=false). #{lo.id} would be next if the budget were raised. {refused.value}"
    )
    assert "no new round starts" in look.next and "Call final_evaluation (search='s')" in look.next
    assert "raise the budget with set_budgets" in look.next and "without claim=false" not in look.next
    state = await loop_state(bare_ws, s.id)
    assert state.phase == "final" and state.next == str(refused.value)
    assert await snapshot() == before  # neither the refusal nor the look wrote anything


async def test_a_spent_budget_says_what_the_final_evaluation_will_take(
    bare_ws: Workspace, tiny_task: str
) -> None:
    """The estimate comes from the search's own evaluations: distinct correct candidates (at most 3) x every
    workload but the smoke one x the mean seconds per candidate and workload."""
    s, hi, _ = await _two_intents(bare_ws, tiny_task, rounds=1)
    await select_action(bare_ws, SelectActionIn(search="s"))
    for i, secs in enumerate([4.0, 8.0]):  # two candidates, 1 workload each: a mean of 6 s
        cand = await bare_ws.store.put_candidate(f"src {i}", "triton")
        await bare_ws.store.record_attempt(s.id, hi.id, cand.id, gpu_eval(1.5, seconds=secs))
    await bare_ws.store.close_node(hi.id, "closed")
    state = await loop_state(bare_ws, s.id)
    wls = len([w for w in bare_ws.search_task(s).workloads if w.split != "smoke"])
    assert state.phase == "final"
    assert state.next.endswith(
        f"It will take about {2 * wls * 6} s: up to 2 candidate(s) x {wls} workload(s) at this search's mean of "
        "6.0 s per candidate and workload (an estimate; baselines not yet measured add to it)."
    ), state.next


async def test_phase_zero_comes_first(bare_ws: Workspace, tiny_task: str, snapshot: Snapshot) -> None:
    await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="empty"))
    seeded = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="seeded"))
    await propose_intents(bare_ws, ProposeIntentsIn(search="seeded", intents=[IntentSpec(title="an idea")]))
    before = await snapshot()
    with pytest.raises(
        ToolFailure,
        match=r"the tree has no intents yet \(phase 0, init\): read the prompt analyse_kernel, then call propose_intents",
    ):
        await select_action(bare_ws, SelectActionIn(search="empty"))
    root = await bare_ws.store.root(seeded.id)
    with pytest.raises(ToolFailure) as e:
        await select_action(bare_ws, SelectActionIn(search="seeded"))
    assert str(e.value) == (
        "the seed is not measured yet. Phase 0 (init): measure the task's seed first, the baseline every intent "
        f'starts from: benchmark (search=\'seeded\', node_id={root.id}, candidate={{"seed": true, "language": '
        '"triton"}).'
    )
    assert await snapshot() == before


async def test_with_nothing_open_nothing_is_selected(bare_ws: Workspace, tiny_task: str) -> None:
    s, hi, lo = await _two_intents(bare_ws, tiny_task)
    await edit_tree(
        bare_ws,
        EditTreeIn(
            search="s", edits=[EditSpec(op="prune", node_id=hi.id), EditSpec(op="prune", node_id=lo.id)]
        ),
    )
    out = await select_action(bare_ws, SelectActionIn(search="s"))
    assert out.node is None and not out.claimed and out.reason and out.round == 0
    assert (await bare_ws.search(s.id)).round == 0


def test_a_node_id_must_be_positive() -> None:
    for bad in (0, -3, True, "1st", "a b", "x" * 41):
        with pytest.raises(
            ValidationError, match=r"expected a node id \(a positive integer, or '#12'\) or a handle"
        ):
            SelectActionIn(search="s", node_id=bad)
    assert SelectActionIn(search="s", node_id="#12").node_id == "#12"


async def test_a_new_search_says_whether_its_task_has_a_seed_to_measure(
    bare_ws: Workspace, tiny_task: str
) -> None:
    await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="bare"))
    said = (await loop_state(bare_ws, "bare")).next
    assert "The task has no triton seed kernel: no seed step" in said, said
    await create_search(bare_ws, CreateSearchIn(task="softmax", name="seeded"))
    said = (await loop_state(bare_ws, "seeded")).next
    assert said.startswith("Phase 0 (init): measure the task's seed first") and "no triton seed" not in said
