"""Which process runs a search, and whether it is still alive.

A search's `status` says `running` from the moment a driver starts until it ends, so a driver killed
with SIGKILL (or a power cut) leaves it `running` for good. A run therefore records its holder in
`search_runs` (schema v5): pid, host, the process's start time (a pid is reused) and a heartbeat. A
reader asks `shown_status`: a `running` search whose holder is gone reads as `interrupted`.

Alive means: on this host, the process with that pid exists and started when the holder did; on another
host (no way to look at its processes), a heartbeat newer than `STALE_S`. A holder recorded before v5
has no pid: it is judged by its last sign of life (heartbeat or the search's last update).

Searches advanced by an MCP host or a person (`select_action`, `ksearch submit`) have no holder: no process
owns them between two calls, so a `running` one reads as `waiting` (for the next step of whoever advances it),
never as a run that is not there.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ksearch.worldmodel import rows
from ksearch.worldmodel.errors import Conflict
from ksearch.worldmodel.models import Search, SearchStatus
from ksearch.worldmodel.store import Store

HEARTBEAT_S = 10.0  # how often a run says it is alive
STALE_S = 60.0  # a holder not seen for this long (and not checkable on this host) is gone

# `interrupted`: left `running` by a run that died; `waiting`: `running` with no run holding it (a person or a host
# advances it between their calls)
ShownStatus = Literal[SearchStatus, "interrupted", "waiting"]

_COLUMNS = "search_id, pid, host, proc_start, started_at, heartbeat_at"


class RunHolder(BaseModel):
    """The process that claimed a search's run."""

    search_id: int
    pid: int | None  # None: recorded before runs were tracked (unknown)
    host: str
    proc_start: str | None  # boot id and start time of the process, so a reused pid is not taken for it
    started_at: datetime
    heartbeat_at: datetime

    def describe(self, now: datetime | None = None) -> str:
        age = ((now or datetime.now(UTC)) - self.heartbeat_at).total_seconds()
        who = f"pid {self.pid} on {self.host}" if self.pid is not None else "an earlier ksearch"
        return f"{who}, last seen {_ago(age)}"


class RunInProgress(Conflict):
    """Another live process is running this search."""


def _ago(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s ago"
    if s < 7200:
        return f"{s // 60} min ago"
    return f"{s // 3600} h ago"


@cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # not Linux: the start time alone
        return ""


def process_start(pid: int) -> str | None:
    """An identity of the process `pid` that a later process with the same pid does not share
    (Linux: boot id and start time in clock ticks); None when no such process exists.

    Where /proc is missing, "" for any existing process (the pid alone then decides)."""
    if not _has_proc():
        return _exists(pid)
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return None
    except OSError:  # hidden from us (e.g. hidepid): whether it exists is all we can tell
        return _exists(pid)
    fields = raw[raw.rfind(")") + 2 :].split()
    return f"{_boot_id()}:{fields[19]}" if len(fields) > 19 else ""


@cache
def _has_proc() -> bool:
    return Path(f"/proc/{os.getpid()}/stat").exists()


def _exists(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # it exists, owned by someone else
        return ""
    return ""


def this_host() -> str:
    return socket.gethostname()


def alive(holder: RunHolder, *, last_activity: datetime | None = None, now: datetime | None = None) -> bool:
    """Whether the holder's process still runs (see the module's docstring for how that is told)."""
    if holder.pid is not None and holder.host == this_host():
        start = process_start(holder.pid)
        if start is None:
            return False
        return holder.proc_start is None or start == "" or start == holder.proc_start
    newest = max(holder.heartbeat_at, last_activity) if last_activity else holder.heartbeat_at
    return (now or datetime.now(UTC)) - newest < timedelta(seconds=STALE_S)


def shown_status(search: Search, holder: RunHolder | None, now: datetime | None = None) -> ShownStatus:
    """The status to show a person: `interrupted` for a `running` search whose run died, `waiting` for one no run
    holds (a claim by `select_action` or `ksearch submit` stores `running` too), else the stored one."""
    if search.status == "running" and holder is None:
        return "waiting"
    if search.status == "running" and holder is not None:
        if not alive(holder, last_activity=search.updated_at, now=now):
            return "interrupted"
    return search.status


def _holder(row: tuple[object, ...]) -> RunHolder:
    return RunHolder.model_validate(dict(zip(_COLUMNS.split(", "), row, strict=True)))


async def holder(store: Store, search_id: int) -> RunHolder | None:
    async with store.reading() as db:
        row = await rows.fetchone(db, f"SELECT {_COLUMNS} FROM search_runs WHERE search_id = ?", (search_id,))
    return _holder(row) if row is not None else None


async def holders(store: Store) -> dict[int, RunHolder]:
    async with store.reading() as db:
        found = await rows.fetchall(db, f"SELECT {_COLUMNS} FROM search_runs")
    return {int(r[0]): _holder(r) for r in found}


async def search_status(store: Store, search: Search) -> ShownStatus:
    return shown_status(search, await holder(store, search.id))


def _refuse_live(search: Search, current: RunHolder | None) -> None:
    if current is not None and search.status == "running" and alive(current, last_activity=search.updated_at):
        raise RunInProgress(
            f"search {search.name!r} is being run by {current.describe()}; stop that run first "
            "(Ctrl-C in its terminal), or start a separate search with --new"
        )


async def check_free(store: Store, search: Search) -> None:
    """`RunInProgress` if a live process runs the search (`claim` checks again, atomically)."""
    _refuse_live(search, await holder(store, search.id))


async def claim(store: Store, search_id: int) -> RunHolder:
    """Record this process as the one running the search; `RunInProgress` if a live process holds it."""
    pid, host = os.getpid(), this_host()
    now = rows.now_iso()
    async with store.transaction() as db:
        search = await rows.search_row(db, search_id)
        row = await rows.fetchone(db, f"SELECT {_COLUMNS} FROM search_runs WHERE search_id = ?", (search_id,))
        _refuse_live(search, _holder(row) if row is not None else None)
        await db.execute(
            "INSERT INTO search_runs (search_id, pid, host, proc_start, started_at, heartbeat_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(search_id) DO UPDATE SET pid = excluded.pid, "
            "host = excluded.host, proc_start = excluded.proc_start, started_at = excluded.started_at, "
            "heartbeat_at = excluded.heartbeat_at",
            (search_id, pid, host, process_start(pid), now, now),
        )
        found = await rows.fetchone(
            db, f"SELECT {_COLUMNS} FROM search_runs WHERE search_id = ?", (search_id,)
        )
    return _holder(found)


async def heartbeat(store: Store, search_id: int) -> bool:
    """Say this process's run is alive; False when it no longer holds the search."""
    async with store.transaction() as db:
        cur = await db.execute(
            "UPDATE search_runs SET heartbeat_at = ? WHERE search_id = ? AND pid = ? AND host = ?",
            (rows.now_iso(), search_id, os.getpid(), this_host()),
        )
        return cur.rowcount > 0


async def release(store: Store, search_id: int) -> None:
    """The run of this process is over (ended, stopped or interrupted): forget its holder."""
    async with store.transaction() as db:
        await db.execute(
            "DELETE FROM search_runs WHERE search_id = ? AND pid = ? AND host = ?",
            (search_id, os.getpid(), this_host()),
        )
