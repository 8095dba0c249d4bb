"""Run holders (schema v5): a search left `running` by a process that is gone reads as `interrupted`."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ksearch.worldmodel import runs
from ksearch.worldmodel.models import Search
from ksearch.worldmodel.schema import MIGRATIONS, SCHEMA_VERSION
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _set_holder(db: Path, search_id: int, **cols: object) -> None:
    raw = sqlite3.connect(db)
    try:
        sets = ", ".join(f"{k} = ?" for k in cols)
        raw.execute(f"UPDATE search_runs SET {sets} WHERE search_id = ?", (*cols.values(), search_id))
        raw.commit()
    finally:
        raw.close()


async def test_a_live_run_is_running_and_cannot_be_claimed_twice(store: Store, search: Search) -> None:
    h = await runs.claim(store, search.id)
    assert (h.pid, h.host) == (os.getpid(), runs.this_host()) and h.proc_start
    s = await store.set_search_status(search.id, "running")
    assert await runs.search_status(store, s) == "running"
    with pytest.raises(runs.RunInProgress, match=rf"pid {os.getpid()} on .*--new"):
        await runs.claim(store, search.id)
    assert await runs.heartbeat(store, search.id)
    await runs.release(store, search.id)
    assert await runs.holder(store, search.id) is None
    assert not await runs.heartbeat(store, search.id)  # no longer ours


async def test_a_dead_or_reused_pid_reads_as_interrupted(store: Store, search: Search, db_path: Path) -> None:
    await runs.claim(store, search.id)
    s = await store.set_search_status(search.id, "running")
    _set_holder(db_path, search.id, pid=_dead_pid())
    assert await runs.search_status(store, s) == "interrupted"
    # this very process, but a holder that started at another time: the pid was reused
    _set_holder(db_path, search.id, pid=os.getpid(), proc_start="another-boot:1")
    assert await runs.search_status(store, s) == "interrupted"
    # a dead holder does not block a new run, which takes its place
    h = await runs.claim(store, search.id)
    assert h.pid == os.getpid() and await runs.search_status(store, s) == "running"
    # `stopped` and `done` are what they say, whatever holder is left behind
    _set_holder(db_path, search.id, pid=_dead_pid())
    for status in ("stopped", "done"):
        assert await runs.search_status(store, await store.set_search_status(search.id, status)) == status


async def test_a_holder_on_another_host_is_judged_by_its_heartbeat(
    store: Store, search: Search, db_path: Path
) -> None:
    await runs.claim(store, search.id)
    s = await store.set_search_status(search.id, "running")
    now = datetime.now(UTC)
    _set_holder(db_path, search.id, host="gpu-box-7", heartbeat_at=now.isoformat())
    assert await runs.search_status(store, s) == "running"
    old = now - timedelta(seconds=runs.STALE_S + 5)
    _set_holder(db_path, search.id, heartbeat_at=old.isoformat())
    h = await runs.holder(store, search.id)
    assert h is not None and runs.shown_status(s.model_copy(update={"updated_at": old}), h) == "interrupted"
    assert "pid" in h.describe() and "gpu-box-7" in h.describe()


async def test_a_search_advanced_by_a_host_has_no_holder_and_reads_waiting(
    store: Store, search: Search
) -> None:
    s = await store.set_search_status(search.id, "running")  # as select_action does for an MCP host
    assert await runs.holder(store, search.id) is None
    assert await runs.search_status(store, s) == "waiting"  # no run is in progress: never shown `running`


async def test_v4_database_running_searches_get_a_holder_of_unknown_pid(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    raw = sqlite3.connect(path)
    for step in MIGRATIONS[:4]:
        for statement in step:
            raw.execute(statement)
    raw.execute("UPDATE schema_version SET version = 4")
    long_ago, just_now = "2026-01-01T00:00:00+00:00", datetime.now(UTC).isoformat()
    for sid, name, status, updated in (
        (1, "killed-long-ago", "running", long_ago),
        (2, "busy-now", "running", just_now),
        (3, "finished", "done", long_ago),
    ):
        raw.execute(
            "INSERT INTO searches (id, name, task, config, status, created_at, updated_at) "
            "VALUES (?, ?, 'softmax', '{}', ?, ?, ?)",
            (sid, name, status, long_ago, updated),
        )
    raw.commit()
    raw.close()
    async with await Store.open(path) as store:
        assert SCHEMA_VERSION >= 5
        found = {s.name: s for s in await store.list_searches()}
        holders = await runs.holders(store)
        assert sorted(holders) == [1, 2] and holders[1].pid is None
        shown = {n: runs.shown_status(s, holders.get(s.id)) for n, s in found.items()}
        assert shown == {"killed-long-ago": "interrupted", "busy-now": "running", "finished": "done"}
        assert "an earlier ksearch" in holders[1].describe()
