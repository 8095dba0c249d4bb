"""list_searches, called as a function: one row per search with its counts and best, and a dead run's
search shown as interrupted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.list_searches import SearchRow, list_searches
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.models import Evaluation

pytestmark = pytest.mark.anyio


async def test_an_empty_database_lists_nothing(bare_ws: Workspace) -> None:
    assert await list_searches(bare_ws) == []


async def test_each_search_is_a_row_with_its_attempts_and_best(bare_ws: Workspace, tiny_task: str) -> None:
    a = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="a", policy="openai", model="m"))
    b = await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="b"))
    store = bare_ws.store
    cand = await store.put_candidate("class ModelNew: pass\n", "triton")
    root = await store.root(b.id)
    await store.record_attempt(b.id, root.id, cand.id, Evaluation(status="incorrect"), author="human")
    await store.record_attempt(b.id, None, cand.id, Evaluation(status="compile_error"), author="human")
    rows = await list_searches(bare_ws)
    assert rows == [
        SearchRow(
            id=a.id,
            name="a",
            task="row_sum",
            status="new",
            round=0,
            policy="openai",
            attempts=0,
            best_attempt_id=None,
            best_speedup_vs_eager=None,
        ),
        SearchRow(
            id=b.id,
            name="b",
            task=b.task,
            status="new",
            round=0,
            policy="tuner",
            attempts=2,
            best_attempt_id=None,  # neither attempt is correct
            best_speedup_vs_eager=None,
        ),
    ]


async def test_a_running_search_whose_driver_died_reads_interrupted(bare_ws: Workspace) -> None:
    store = bare_ws.store
    hosted = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="hosted"))
    driven = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="driven"))
    for s in (hosted, driven):
        await store.set_search_status(s.id, "running")
    # a search a host advances has no run holder: it waits for the host's next call, no run is in progress
    await runs.claim(store, driven.id)  # this process runs it: alive
    assert [(r.name, r.status) for r in await list_searches(bare_ws)] == [
        ("hosted", "waiting"),
        ("driven", "running"),
    ]
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    async with store.transaction() as db:  # the driver's process has exited since it claimed the run
        await db.execute("UPDATE search_runs SET pid = ? WHERE search_id = ?", (int(gone.stdout), driven.id))
    assert [(r.name, r.status) for r in await list_searches(bare_ws)] == [
        ("hosted", "waiting"),
        ("driven", "interrupted"),
    ]
    assert (await bare_ws.search(driven.id)).status == "running"  # reading changes nothing
