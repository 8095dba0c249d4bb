"""benchmark, called as a function on the real sandbox (the Triton interpreter without a GPU): the seed's
attempt on the root, the attempts of a refine phase with what the loop says next, a free-standing run, and
every refusal naming the bad argument before anything is stored or run."""

from __future__ import annotations

import pytest
from toolkit import NO_MODELNEW, NOT_PYTHON, ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import IntentSpec
from tests.fixtures import ROW_SUM

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


@pytest.mark.slow
async def test_the_seed_on_the_root_is_an_attempt_whose_cpu_timings_rank_nothing(ws: Workspace) -> None:
    # the built-in row_sum with a 9-row smoke workload (tests.fixtures.ROW_SUM): its seed evaluated in a second
    s = await create_search(ws, CreateSearchIn(task=ROW_SUM, name="rs", seed=3))
    root = await ws.store.root(s.id)
    out = await benchmark(
        ws,
        BenchmarkIn(
            search="rs", node_id=root.id, candidate=CandidateRef(seed=True), trials=1, author="tuner"
        ),
    )
    ev = out.evaluation
    assert ev.status == "ok" and out.attempt_id is not None and out.refine is None and out.next == ""
    assert [c.workload for c in ev.correctness] == ["smoke"]  # without a GPU: the smoke workload only
    [t] = ev.timings
    # the interpreter's time says nothing about a GPU: hundreds of times slower than eager PyTorch on the CPU
    assert (
        t.device == "cpu-interpreter"
        and t.eager_us is not None
        and t.median_us > 10 * t.eager_us
    )
    assert ev.cpu_interpreted and not ev.ranks
    # said once, by the record's own flag
    said = "timings are from the Triton CPU interpreter: functional only, never comparable with GPU timings"
    assert said in out.summary and out.summary.count("functional only") == 1, out.summary
    att = await ws.store.get_attempt(out.attempt_id)
    # whoever asked for it measured, the task's seed is credited to "seed", not to the asker
    assert (att.node_id, att.author, att.round, att.candidate_id) == (root.id, "seed", 0, out.candidate_id)
    assert att.evaluation == ev
    assert (await ws.store.get_candidate(out.candidate_id)).source == ROW_SUM_SEED
    # correct code becomes the root's best (the code intents build on); the search's best needs a GPU timing
    assert (await ws.store.root(s.id)).best_attempt_id == att.id
    assert (await ws.search(s.id)).best_attempt_id is None
    speedups = await ws.store.attempt_speedups(s.id)
    assert speedups == {att.id: None} and speedups.cpu_interpreted == {att.id}


@pytest.mark.slow
async def test_a_refine_phase_records_each_attempt_and_says_what_next(ws: Workspace, tiny_task: str) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny", stagnation=5))
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search="tiny", intents=[IntentSpec(title="one row per program")])
    )
    await select_action(ws, SelectActionIn(search="tiny"))

    def job(source: str) -> BenchmarkIn:
        return BenchmarkIn(
            search="tiny", node_id=intent.id, candidate=CandidateRef(source=source), trials=1, author="llm:m"
        )

    wrong = await benchmark(ws, job(WRONG_ROW_SUM))
    assert wrong.evaluation.status == "incorrect" and "INCORRECT on smoke" in wrong.summary
    assert wrong.refine is not None and (wrong.refine.attempts, wrong.refine.best_attempt_id) == (1, None)
    assert "fix the wrong values first" in wrong.next and f"node_id={intent.id}" in wrong.next

    good = await benchmark(ws, job(ROW_SUM_SEED))
    assert good.evaluation.status == "ok" and good.refine is not None
    assert (good.refine.attempts, good.refine.best_attempt_id, good.refine.stagnant) == (
        2,
        good.attempt_id,
        0,
    )
    assert "CPU-interpreter timings are never a gain" in good.next
    assert (await ws.store.get_node(intent.id)).best_attempt_id == good.attempt_id

    # a candidate that does not compile is still an attempt: it counts, and builds on the phase's best
    broken = await benchmark(ws, job(NO_MODELNEW))
    assert broken.evaluation.status == "compile_error" and broken.base_attempt_id == good.attempt_id
    assert "defines none of ModelNew" in broken.summary and "fix the compile error first" in broken.next
    # so is one that does not parse (it never reaches the sandbox): toward the cap, not the stagnation window
    unparsed = await benchmark(ws, job(NOT_PYTHON))
    assert unparsed.evaluation.status == "compile_error"
    assert (
        unparsed.evaluation.error is not None
        and "does not parse as Python: line 3" in unparsed.evaluation.error
    )
    assert unparsed.refine is not None and (unparsed.refine.attempts, unparsed.refine.stagnant) == (4, 1)

    atts = await ws.store.list_attempts(s.id, intent.id)
    assert [(a.id, a.round, a.author, a.evaluation.status if a.evaluation else None) for a in atts] == [
        (wrong.attempt_id, 1, "llm:m", "incorrect"),
        (good.attempt_id, 1, "llm:m", "ok"),
        (broken.attempt_id, 1, "llm:m", "compile_error"),
        (unparsed.attempt_id, 1, "llm:m", "compile_error"),
    ]
    assert (
        await ws.store.get_node(intent.id)
    ).best_attempt_id == good.attempt_id  # failures never replace it


async def test_a_free_standing_run_on_named_workloads_records_nothing(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    out = await benchmark(
        ws,
        BenchmarkIn(
            task=tiny_task, candidate=CandidateRef(source=ROW_SUM_SEED), workloads=["tall", "smoke"], trials=1
        ),
    )
    assert out.evaluation.status == "ok" and out.attempt_id is None and out.refine is None
    assert [t.workload for t in out.evaluation.timings] == ["tall", "smoke"]
    assert all(t.device == "cpu-interpreter" for t in out.evaluation.timings)
    assert (await snapshot())["attempts"] == []


async def test_bad_arguments_are_refused_before_anything_is_stored_or_run(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    other = await create_search(ws, CreateSearchIn(task=tiny_task, name="other"))
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search="tiny", intents=[IntentSpec(title="an idea")])
    )
    foreign = await ws.store.root(other.id)
    src = CandidateRef(source=ROW_SUM_SEED)
    before = await snapshot()
    refusals: list[tuple[BenchmarkIn, type[Exception], str]] = [
        (BenchmarkIn(search="nope", candidate=src), NotFound, "no search named 'nope'; existing searches"),
        (BenchmarkIn(search="tiny", node_id=999, candidate=src), NotFound, "999"),
        (
            BenchmarkIn(search="tiny", node_id=foreign.id, candidate=src),
            ToolFailure,
            f"node {foreign.id} belongs to another search (id {other.id}), not 'tiny'",
        ),
        (
            BenchmarkIn(task=tiny_task, node_id=intent.id, candidate=src),
            ToolFailure,
            "`node_id` needs `search`: an attempt is recorded on a node of a search",
        ),
        (
            BenchmarkIn(search="tiny", candidate=src, workloads=["smoke", "huge"]),
            ToolFailure,
            "workloads: unknown workload(s) 'huge' for task 'tiny_rows'; it has: wide, tall, heldout, smoke",
        ),
        (
            BenchmarkIn(search="tiny", candidate=src, base_attempt_id=42),
            ToolFailure,
            "base_attempt_id: no attempt",
        ),
        (
            BenchmarkIn(search="tiny", candidate=CandidateRef(candidate_id="c0123456789abcde")),
            ToolFailure,
            "no candidate 'c0123456789abcde' in this database: send the kernel's `source` instead (compile_kernel,",
        ),
        (
            BenchmarkIn(search="tiny", candidate=CandidateRef(seed=True)),
            ToolFailure,
            "task 'tiny_rows' has no triton seed: it starts from the reference (write a kernel instead)",
        ),
        (
            BenchmarkIn(search="tiny", node_id=intent.id, candidate=src),
            ToolFailure,
            f"intent #{intent.id} is open, not being refined: claim it first with select_action (search='tiny', "
            f"node_id={intent.id})",
        ),
        (
            BenchmarkIn(search="tiny", candidate=CandidateRef(source=NOT_PYTHON)),
            ToolFailure,
            "the candidate source does not parse as Python: line 3, column ",
        ),
        (
            BenchmarkIn(search="tiny", task=tiny_task, candidate=src),
            ToolFailure,
            "give exactly one of `search` (an id or name) or `task` (a built-in name or a path)",
        ),
    ]
    for inp, cls, said in refusals:
        with pytest.raises(cls) as e:
            await benchmark(ws, inp)
        assert said in str(e.value), (inp, str(e.value))
    assert await snapshot() == before
    assert s.id != other.id
