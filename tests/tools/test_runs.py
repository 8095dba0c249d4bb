"""tools.runs, called as functions over a real SQLite store: a driver run holds its search (claimed, beating,
released however it ends), a second run is refused while it lives, and a run that died reads as interrupted;
what a run writes around its rounds: the `running` status, the intents it left claimed, its summary."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from ksearch.tools.loop.runs import (
    check_run_free,
    hold_run,
    keep_run_result,
    mark_running,
    reopen_active_intents,
    run_result_key,
    run_status,
    run_statuses,
)
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.errors import Conflict, NotFound
from ksearch.worldmodel.models import IntentSpec, Search, SearchConfig

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "runs.db") as w:
        yield w


async def _search(ws: Workspace, name: str) -> Search:
    return await ws.store.create_search(name, "softmax", SearchConfig())


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _set_pid(db: Path, search_id: int, pid: int) -> None:
    raw = sqlite3.connect(db)
    try:
        raw.execute("UPDATE search_runs SET pid = ? WHERE search_id = ?", (pid, search_id))
        raw.commit()
    finally:
        raw.close()


async def test_a_search_nobody_runs_shows_its_stored_status_or_waiting(ws: Workspace) -> None:
    s = await _search(ws, "idle")
    st = await run_status(ws, s.name)
    assert (st.search_id, st.stored, st.status, st.holder) == (s.id, "new", "new", None)
    await ws.store.set_search_status(s.id, "running")  # advanced by a host or a person: no holder
    assert (await run_status(ws, s.id)).status == "waiting"  # no run in progress: never shown `running`
    await check_run_free(ws, await ws.search(s.id))


async def test_a_held_run_refuses_a_second_and_is_released_however_it_ends(ws: Workspace) -> None:
    s = await _search(ws, "held")
    async with hold_run(ws, s.id) as held:
        assert (held.pid, held.host) == (os.getpid(), runs.this_host())
        assert f"pid {os.getpid()}" in held.description
        running = await ws.store.set_search_status(s.id, "running")
        st = await run_status(ws, running)
        assert st.status == "running" and st.holder is not None and st.holder.pid == os.getpid()
        with pytest.raises(Conflict, match=r"is being run by pid .*--new"):
            await check_run_free(ws, running)
        with pytest.raises(Conflict, match=r"is being run by"):
            async with hold_run(ws, s.id):
                pytest.fail("a second run of a live one was let in")
    assert (await run_status(ws, s.id)).holder is None
    await check_run_free(ws, await ws.search(s.id))

    with pytest.raises(RuntimeError, match="boom"):
        async with hold_run(ws, s.id):
            raise RuntimeError("boom")
    assert (await run_status(ws, s.id)).holder is None  # released on the way out of a crash too


async def test_the_run_beats_while_held(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "HEARTBEAT_S", 0.05)
    s = await _search(ws, "beating")
    missed: list[str] = []
    async with hold_run(ws, s.id, on_missed_beat=missed.append) as held:
        await asyncio.sleep(0.6)
        now = await run_status(ws, s.id)
        assert now.holder is not None and now.holder.heartbeat_at > held.heartbeat_at
    assert missed == []


async def test_a_dead_run_reads_as_interrupted_and_does_not_block_the_next(
    ws: Workspace, tmp_path: Path
) -> None:
    dead, alive, idle = [await _search(ws, n) for n in ("dead", "alive", "idle")]
    # what a killed driver leaves: `running`, and a holder whose process is gone
    await runs.claim(ws.store, dead.id)
    await ws.store.set_search_status(dead.id, "running")
    _set_pid(tmp_path / "runs.db", dead.id, _dead_pid())
    async with hold_run(ws, alive.id):
        await ws.store.set_search_status(alive.id, "running")
        found = await run_statuses(ws, await ws.store.list_searches())
        assert {i: st.status for i, st in found.items()} == {
            dead.id: "interrupted",
            alive.id: "running",
            idle.id: "new",
        }
        assert found[dead.id].stored == "running" and found[dead.id].holder is not None
        assert found[idle.id].holder is None
    assert (await run_status(ws, dead.id)).status == "interrupted"
    await check_run_free(ws, await ws.search(dead.id))  # a dead holder does not block
    async with hold_run(ws, dead.id) as held:
        assert held.pid == os.getpid()
        assert (await run_status(ws, dead.id)).status == "running"


async def test_a_run_marks_its_search_running_and_a_dead_one_shows_interrupted(
    ws: Workspace, tmp_path: Path
) -> None:
    s = await _search(ws, "marked")
    async with hold_run(ws, s.id):
        marked = await mark_running(ws, s.id)
        assert (marked.id, marked.status) == (s.id, "running")
        assert (await ws.search(s.id)).status == "running"
        assert (await run_status(ws, s.id)).status == "running"
    # what a killed run leaves: the stored `running`, with its holder gone
    await runs.claim(ws.store, s.id)
    _set_pid(tmp_path / "runs.db", s.id, _dead_pid())
    assert (await run_status(ws, s.id)).status == "interrupted"
    with pytest.raises(NotFound, match="no search with id 99"):
        await mark_running(ws, 99)


async def test_the_intents_a_run_left_active_are_reopened_and_nothing_else(ws: Workspace) -> None:
    s, other = await _search(ws, "left"), await _search(ws, "elsewhere")
    claimed, waiting, given_up, also = await apply_intents(
        ws.store,
        s.id,
        [IntentSpec(title=t) for t in ("claimed", "waiting", "given up", "also claimed")],
        "human",
        0,
    )
    [theirs] = await apply_intents(ws.store, other.id, [IntentSpec(title="another search's")], "human", 0)
    for n in (claimed, also, theirs):
        await ws.store.set_node_status(n.id, "active")
    await ws.store.close_node(given_up.id, "failed")
    reopened = await reopen_active_intents(ws, s.id)
    assert [(n.id, n.status.value) for n in reopened] == [(claimed.id, "open"), (also.id, "open")]
    now = {n.id: n.status.value for n in await ws.records.list_nodes(s.id) if n.kind == "intent"}
    assert now == {claimed.id: "open", waiting.id: "open", given_up.id: "failed", also.id: "open"}
    assert (await ws.records.get_node(theirs.id)).status.value == "active"  # another search's claim stays
    assert await reopen_active_intents(ws, s.id) == []  # nothing left to reopen


class _Summary(BaseModel):
    stop_reason: str
    rounds_run: int
    best_speedup_vs_eager: float | None


async def test_a_runs_summary_is_kept_and_the_next_run_replaces_it(ws: Workspace) -> None:
    s, other = await _search(ws, "summed"), await _search(ws, "unsummed")
    await keep_run_result(
        ws, s.id, _Summary(stop_reason="round budget reached (2)", rounds_run=2, best_speedup_vs_eager=1.4)
    )
    assert await ws.store.cache_get(run_result_key(s.id)) == {
        "stop_reason": "round budget reached (2)",
        "rounds_run": 2,
        "best_speedup_vs_eager": 1.4,
    }
    await keep_run_result(ws, s.id, _Summary(stop_reason="done", rounds_run=5, best_speedup_vs_eager=None))
    assert await ws.store.cache_get(run_result_key(s.id)) == {
        "stop_reason": "done",
        "rounds_run": 5,
        "best_speedup_vs_eager": None,
    }
    assert await ws.store.cache_get(run_result_key(other.id)) is None
    assert run_result_key(s.id) == f"driver-result:{s.id}"  # where bench/driver_tuner.py reads it
