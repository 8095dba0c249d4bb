"""run_correctness, called as a function on the real sandbox: a check per workload with no timing and no
attempt recorded, wrong values located, and bad arguments refused before anything is stored or run."""

from __future__ import annotations

import pytest
from toolkit import NO_MODELNEW, ROW_SUM_SEED, WRONG_ROW_SUM, Snapshot

from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.run_correctness import RunCorrectnessIn, run_correctness
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]


@pytest.mark.slow
async def test_a_correct_candidate_passes_each_workload_untimed(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    before = await snapshot()
    out = await run_correctness(
        ws,
        RunCorrectnessIn(
            search="tiny", candidate=CandidateRef(source=ROW_SUM_SEED), workloads=["wide", "tall"], trials=2
        ),
    )
    ev = out.evaluation
    assert ev.status == "ok" and ev.timings == [] and out.attempt_id is None
    assert [(c.workload, c.passed, c.trials) for c in ev.correctness] == [
        ("wide", True, 2),
        ("tall", True, 2),
    ]
    assert "correct on wide (2 trials" in out.summary and "median" not in out.summary
    after = await snapshot()
    # the candidate is stored (its id can be sent instead of the source); nothing else is written
    assert [r[0] for r in after["candidates"]] == [out.candidate_id]
    assert {k: v for k, v in after.items() if k != "candidates"} == {
        k: v for k, v in before.items() if k != "candidates"
    }
    again = await run_correctness(
        ws, RunCorrectnessIn(task=tiny_task, candidate=CandidateRef(candidate_id=out.candidate_id), trials=1)
    )
    assert again.candidate_id == out.candidate_id and [c.workload for c in again.evaluation.correctness] == [
        "smoke"
    ]


async def test_wrong_values_are_located(ws: Workspace, tiny_task: str) -> None:
    out = await run_correctness(
        ws, RunCorrectnessIn(task=tiny_task, candidate=CandidateRef(source=WRONG_ROW_SUM), trials=1)
    )
    assert out.evaluation.status == "incorrect"
    [c] = out.evaluation.correctness
    assert not c.passed and c.workload == "smoke" and c.first_mismatch_index is not None
    assert c.expected_at_first is not None and c.got_at_first == pytest.approx(
        2 * c.expected_at_first, rel=1e-4
    )
    assert "INCORRECT on smoke" in out.summary and "first mismatch at" in out.summary


async def test_a_candidate_without_its_entry_point_does_not_compile(ws: Workspace, tiny_task: str) -> None:
    out = await run_correctness(
        ws, RunCorrectnessIn(task=tiny_task, candidate=CandidateRef(source=NO_MODELNEW))
    )
    ev = out.evaluation
    assert (
        ev.status == "compile_error" and ev.correctness == [] and ev.compile is not None and not ev.compile.ok
    )
    assert any(
        d.severity == "error" and "defines none of ModelNew" in d.message for d in ev.compile.diagnostics
    )


async def test_bad_arguments_are_refused_writing_nothing(
    ws: Workspace, tiny_task: str, snapshot: Snapshot
) -> None:
    await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    src = CandidateRef(source=ROW_SUM_SEED)
    before = await snapshot()
    refusals: list[tuple[RunCorrectnessIn, type[Exception], str]] = [
        (
            RunCorrectnessIn(search=5, candidate=src),
            NotFound,
            "no search with id 5; existing searches (id 'name'): 1 'tiny'",
        ),
        (
            RunCorrectnessIn(candidate=src),
            ToolFailure,
            "give exactly one of `search` (an id or name) or `task`",
        ),
        (
            RunCorrectnessIn(task=tiny_task, candidate=src, workloads=["Smoke"]),
            ToolFailure,
            "workloads: unknown workload(s) 'Smoke' for task 'tiny_rows'; it has: wide, tall, heldout, smoke",
        ),
        (
            RunCorrectnessIn(search="tiny", candidate=CandidateRef(seed=True)),
            ToolFailure,
            "has no triton seed",
        ),
    ]
    for inp, cls, said in refusals:
        with pytest.raises(cls) as e:
            await run_correctness(ws, inp)
        assert said in str(e.value), (inp, str(e.value))
    assert await snapshot() == before
