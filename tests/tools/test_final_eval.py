"""final_evaluation, called as a function on the real sandbox: without a GPU it re-checks each intent's latest
correct attempt on the smoke workload, says which workloads it skipped, records its verdict and ends the
search; an unknown search is refused, writing nothing."""

from __future__ import annotations

import pytest
from toolkit import ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.final_eval import FinalEvalIn, final_evaluation
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.loop.state import loop_state
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import IntentSpec

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


@pytest.mark.slow
async def test_on_the_cpu_each_intents_best_is_rechecked_on_the_smoke_workload(
    ws: Workspace, tiny_task: str
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="fin"))
    [a] = await propose_intents(
        ws, ProposeIntentsIn(search="fin", intents=[IntentSpec(title="one row per program")])
    )
    await select_action(ws, SelectActionIn(search="fin"))
    ids = []
    for src in (WRONG_ROW_SUM, ROW_SUM_SEED):
        out = await benchmark(
            ws, BenchmarkIn(search="fin", node_id=a.id, candidate=CandidateRef(source=src), trials=1)
        )
        ids.append(out.attempt_id)
    await finish_intent(ws, FinishIntentIn(search="fin"))

    said: list[tuple[str, float]] = []

    async def progress(message: str, fraction: float) -> None:
        said.append((message, fraction))

    out = await final_evaluation(ws, FinalEvalIn(search="fin"), progress)
    [row] = out.rows  # the wrong attempt is never re-measured
    assert (row.attempt_id, row.node_id, row.status, row.device) == (ids[1], a.id, "ok", "cpu-interpreter")
    # the interpreter's time is no speed: no speedup is stated (its record keeps the timing, unranked)
    assert row.speedup_vs_eager is None and row.speedup_vs_compile is None
    # a long re-measurement says where it is, and where its seconds went
    assert said and all(m.startswith(f"candidate 1 of 1 (attempt #{ids[1]}): ") for m, _ in said)
    assert any("correctness: smoke" in m for m, _ in said) and said[-1] == (said[-1][0], 1.0)
    assert [f for _, f in said] == sorted(f for _, f in said)
    assert row.seconds and row.seconds_by_step.get("correctness", 0.0) > 0.0
    assert row.workloads == out.workloads == ["smoke"] and not row.pure_pytorch
    assert out.skipped == ["wide", "tall", "heldout"]
    assert "CPU-interpreter timings never rank candidates" in out.chosen_by
    assert (
        "Without a GPU this checked correctness on the smoke workload only (3 workloads skipped)" in out.next
    )
    assert "export_kernel (search='fin', format=" in out.next and f"attempt={ids[1]})" in out.next, out.next
    # nothing is left open: the search is done; interpreter timings never make a best
    assert out.next.startswith("The search is done.")
    after = await ws.search(s.id)
    assert (after.status, after.best_attempt_id, out.best_attempt_id, out.best_lost) == (
        "done",
        None,
        None,
        "",
    )
    verdict = await ws.store.final_verdict(s.id)
    assert verdict is not None and [(o.attempt_id, o.passed, o.status) for o in verdict.outcomes] == [
        (ids[1], True, "ok")
    ]
    # what the loop says next points at no best kernel, as there is none (nothing was timed on a GPU)
    state = await loop_state(ws, s.id)
    assert "ended without a result" in state.next and "Read the best kernel" not in state.next, state.next
    # but the attempts correct on the interpreter can still be taken out, and it says how (a live host missed it)
    assert f"on the CPU interpreter (#{ids[1]}) can be taken out with export_kernel" in state.next, state.next
    assert f"attempt={ids[1]})" in state.next, state.next


async def test_a_search_without_a_correct_attempt_ends_without_a_result(
    ws: Workspace, tiny_task: str
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="none"))
    await propose_intents(
        ws, ProposeIntentsIn(search="none", intents=[IntentSpec(title="an idea left open")])
    )
    out = await final_evaluation(ws, FinalEvalIn(search=s.id))
    assert out.rows == [] and out.best_attempt_id is None
    assert out.next == "No correct candidate to re-evaluate: the search ends without a result."
    assert (await ws.search(s.id)).status == "stopped"  # an open intent is left: more budget would go on


async def test_an_unknown_search_is_refused_writing_nothing(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await create_search(ws, CreateSearchIn(task=tiny_task, name="fin"))
    before = await snapshot()
    with pytest.raises(NotFound, match=r"no search named 'fni'; existing searches \(id 'name'\): 1 'fin'"):
        await final_evaluation(ws, FinalEvalIn(search="fni"))
    assert await snapshot() == before


@pytest.mark.slow
async def test_without_a_gpu_each_intents_latest_correct_attempt_is_rechecked(
    ws: Workspace, tiny_task: str
) -> None:
    """A live host's first correct softmax passed the rule loosely (16% off, within its absolute tolerance) and the
    final evaluation re-checked it rather than the fixed one the intent ended with."""
    await create_search(ws, CreateSearchIn(task=tiny_task, name="late"))
    [a] = await propose_intents(
        ws, ProposeIntentsIn(search="late", intents=[IntentSpec(title="one row each")])
    )
    await select_action(ws, SelectActionIn(search="late"))
    ids = []
    for src in (ROW_SUM_SEED, ROW_SUM_SEED + "\n# refined\n"):
        out = await benchmark(
            ws, BenchmarkIn(search="late", node_id=a.id, candidate=CandidateRef(source=src), trials=1)
        )
        assert out.evaluation.status == "ok", out.evaluation.error
        ids.append(out.attempt_id)
    await finish_intent(ws, FinishIntentIn(search="late"))
    out = await final_evaluation(ws, FinalEvalIn(search="late"))
    assert [r.attempt_id for r in out.rows] == [ids[1]], out.rows
    assert "each intent's latest correct attempt" in out.chosen_by


async def test_a_search_timed_on_a_gpu_is_not_rejudged_by_the_interpreter(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    """A CPU final evaluation on a copy of a GPU search dropped its GPU-verified best (the interpreter computes bf16
    tl.dot wrongly): such a search's final evaluation is refused on a machine without a GPU, recording nothing."""
    from ksearch.worldmodel.models import Environment, Evaluation, WorkloadTiming

    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="gpu"))
    root = await ws.store.root(s.id)
    timing = WorkloadTiming(
        workload="wide",
        device="NVIDIA H200",
        median_us=10.0,
        iqr_us=0.1,
        ci_low_us=9.9,
        ci_high_us=10.1,
        n=50,
    )
    ev = Evaluation(status="ok", timings=[timing], env=Environment(device="NVIDIA H200", cpu_mode=False))
    cand = await ws.store.put_candidate(ROW_SUM_SEED, "triton")
    att = await ws.store.record_attempt(s.id, root.id, cand.id, ev, author="human")
    assert (await ws.search("gpu")).best_attempt_id == att.id
    before = await snapshot()
    with pytest.raises(ToolFailure, match=r"was timed on a GPU \(NVIDIA H200\).*nothing was run or recorded"):
        await final_evaluation(ws, FinalEvalIn(search="gpu"))
    assert await snapshot() == before
    assert (await ws.search("gpu")).best_attempt_id == att.id
