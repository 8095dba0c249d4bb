"""run_search, called as a function: it starts the built-in driver (`ksearch run --resume`) as a process of
its own, which runs the search on the CPU interpreter while the tool follows it; a driver that stops with an
error comes back as a ToolFailure with the end of its log; an unknown search starts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolkit import Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.run_search import RunSearchIn, run_search
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from tests.fixtures import ROW_SUM

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.slow, pytest.mark.timeout(300)]


async def test_the_driver_runs_a_round_and_the_final_evaluation(bare_ws: Workspace, tmp_path: Path) -> None:
    # the built-in row_sum with a 9-row smoke workload (tests.fixtures.ROW_SUM): its evaluations take a second
    s = await create_search(bare_ws, CreateSearchIn(task=ROW_SUM, name="run", rounds=1, stagnation=1))
    progress: list[str] = []

    async def said(msg: str, frac: float) -> None:
        assert 0.0 <= frac <= 1.0
        progress.append(msg)

    out = await run_search(bare_ws, RunSearchIn(search="run", wait_s=240), tmp_path / "k.db", said)
    assert not out.running and out.search_id == s.id
    # what the run did, and how its log ended
    assert out.message.startswith("driver finished: 1 round(s) and 2 attempt(s) in this run; policy: tuner")
    assert "; stopped: round budget reached (1 of 1 rounds started)" in out.message, out.message
    # the seed's attempt on the root, then one attempt of the tuner's first intent
    assert (out.round, out.attempts, out.best_speedup_vs_eager) == (1, 2, None)
    log = Path(out.log).read_text()
    assert out.log == str(tmp_path / "logs" / f"search-{s.id}.log")
    assert (
        "measuring the seed candidate" in log
        and "stopped: round budget reached (1 of 1 rounds started)" in log
    )
    after = await bare_ws.search(s.id)
    assert (after.status, after.round) == ("stopped", 1)
    assert await bare_ws.store.final_verdict(s.id) is not None  # the driver ran the final evaluation
    assert progress and progress[-1].startswith("round ")


async def test_a_driver_that_cannot_run_the_search_is_a_tool_failure_with_its_log(
    bare_ws: Workspace, tmp_path: Path, tiny_task: str
) -> None:
    await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="seedless"))
    with pytest.raises(ToolFailure) as e:
        await run_search(bare_ws, RunSearchIn(search="seedless", wait_s=240), tmp_path / "k.db")
    said = str(e.value)
    assert said.startswith("the driver exited with code 3; end of its log (")
    assert (
        "the offline tuner only tunes an existing kernel, and task 'tiny_rows' has no seed candidate" in said
    )
    assert (await bare_ws.search("seedless")).status == "stopped"


async def test_an_unknown_search_starts_no_driver(
    bare_ws: Workspace, tmp_path: Path, snapshot: Snapshot
) -> None:
    before = await snapshot()
    with pytest.raises(NotFound, match="no search named 'nope'"):
        await run_search(bare_ws, RunSearchIn(search="nope", wait_s=5), tmp_path / "k.db")
    assert not (tmp_path / "logs").exists() and await snapshot() == before
