"""One result: the final evaluation's first row, the search's best, get_tree and every face name the same
attempt, chosen by one rule (tools/final_eval.py RESULT_RULE): the search's best unless the final evaluation
measures another re-measured kernel faster beyond noise, or the best fails it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_gain_rule import timed

from ksearch.tools.final_eval import RESULT_RULE, beaten_in_final
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import Conflict
from ksearch.worldmodel.models import FinalOutcome, SearchConfig

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "one.db") as w:
        yield w


def passed(*ids: int) -> dict[int, FinalOutcome]:
    return {i: FinalOutcome(attempt_id=i, candidate_id=f"c{i:015x}", passed=True, status="ok") for i in ids}


def test_only_a_kernel_faster_beyond_noise_in_the_final_evaluation_beats_the_best() -> None:
    best, near, far = 18, 25, 30
    outcome = passed(best, near, far)
    # 1% faster: within noise, the best stays the result
    assert beaten_in_final(best, {best: timed(4.00, 0.01), near: timed(4.04, 0.01)}, outcome) == (None, "")
    # 10% faster, tightly measured: it is the result, and the reason is the comparison's own words
    got, why = beaten_in_final(
        best, {best: timed(4.0, 0.01), near: timed(4.04, 0.01), far: timed(4.4, 0.01)}, outcome
    )
    assert got == far and why.startswith(f"the final evaluation measured it faster than #{best}: speedup 1.1")
    assert "faster beyond noise" in why
    # a best that failed is not compared (the store gives its place to the fastest that passed)
    failed = outcome | {
        best: FinalOutcome(attempt_id=best, candidate_id="c" + "0" * 15, passed=False, status="incorrect")
    }
    assert beaten_in_final(best, {best: timed(4.0, 0.01), far: timed(4.4, 0.01)}, failed) == (None, "")
    # interpreter timings never rank
    gpu = timed(4.0, 0.01)
    cpu = gpu.model_copy(
        update={"timings": [gpu.timings[0].model_copy(update={"device": "cpu-interpreter"})]}
    )
    assert cpu.cpu_interpreted
    assert beaten_in_final(best, {best: cpu, far: timed(4.4, 0.01)}, outcome) == (None, "")
    assert "unless the final evaluation measures another re-measured kernel faster" in RESULT_RULE


async def test_the_store_moves_the_best_to_the_kernel_that_beat_it_and_says_why(ws: Workspace) -> None:
    s = await ws.store.create_search("r", "row_sum", SearchConfig())
    root = await ws.store.root(s.id)
    ids = []
    for i, sp in enumerate((4.2, 4.0)):
        cand = await ws.store.put_candidate(f"# {i}\n", "triton")
        ids.append((await ws.store.record_attempt(s.id, root.id, cand.id, timed(sp, 0.01))).id)
    best, other = ids
    assert (await ws.store.get_search("r")).best_attempt_id == best
    outcomes = [
        FinalOutcome(attempt_id=a.id, candidate_id=a.candidate_id, passed=a.id == best, status="ok")
        for a in await ws.store.list_attempts(s.id)
    ]
    with pytest.raises(Conflict, match=f"attempt #{other} cannot replace the best: it did not pass"):
        await ws.store.record_final(s.id, outcomes, [], beaten_by=other, beaten_because="x")
    assert (await ws.store.get_search("r")).best_attempt_id == best  # nothing written
    outcomes = [o.model_copy(update={"passed": True}) for o in outcomes]
    verdict = await ws.store.record_final(
        s.id, outcomes, [], beaten_by=other, beaten_because="measured faster"
    )
    assert (verdict.best_before, verdict.best_after) == (best, other)
    assert (await ws.store.get_search("r")).best_attempt_id == other
    assert verdict.note() == (
        f"final evaluation: attempt #{other} is now the search's best, in place of attempt #{best}: measured faster"
    )
    assert (await ws.store.final_verdict(s.id)) == verdict
