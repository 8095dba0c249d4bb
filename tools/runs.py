"""Who runs a search, and the status a person should read: the driver's claim on a search and every face's
shown status go through here (the records live in the store, ksearch.worldmodel.runs).

A driver run holds its search for as long as it runs (`hold_run`: claim, heartbeat, release), so a second
run is refused while it lives and a search it left `running` when killed reads as `interrupted`
(`run_status`). Searches advanced by an MCP host or a person have no holder and keep their stored status.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import TypeAlias

from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.errors import StoreBusy
from ksearch.worldmodel.models import Search, SearchStatus

ShownStatus: TypeAlias = runs.ShownStatus  # a search's status, or "interrupted"


class RunHolderOut(ToolModel):
    """The process recorded as running a search."""

    pid: int | None
    """Its process id; None for a run recorded before runs were tracked"""
    host: str
    """The machine it runs on"""
    started_at: datetime
    heartbeat_at: datetime
    """Its last sign of life"""
    description: str
    """In words, e.g. 'pid 4242 on gpu-box, last seen 3 s ago'"""

    @classmethod
    def of(cls, h: runs.RunHolder) -> RunHolderOut:
        return cls(
            pid=h.pid,
            host=h.host,
            started_at=h.started_at,
            heartbeat_at=h.heartbeat_at,
            description=h.describe(),
        )


class RunStatus(ToolModel):
    """How a search's run stands."""

    search_id: int
    stored: SearchStatus
    """The status the search's record holds"""
    status: ShownStatus
    """The status to show: the stored one, or `interrupted` for a `running` search whose run is gone"""
    holder: RunHolderOut | None = None
    """The process that last claimed the search's run (None: no driver run holds it)"""


def _status(s: Search, h: runs.RunHolder | None) -> RunStatus:
    return RunStatus(
        search_id=s.id,
        stored=s.status,
        status=runs.shown_status(s, h),
        holder=RunHolderOut.of(h) if h is not None else None,
    )


async def run_status(ws: Workspace, search: Search | int | str) -> RunStatus:
    """The search's run (by record, id or name): its holder and the status to show."""
    s = search if isinstance(search, Search) else await ws.search(search)
    return _status(s, await runs.holder(ws.store, s.id))


async def run_statuses(ws: Workspace, searches: list[Search]) -> dict[int, RunStatus]:
    """`run_status` of several searches at once (one read of the holders): search id -> its run."""
    holders = await runs.holders(ws.store)
    return {s.id: _status(s, holders.get(s.id)) for s in searches}


async def check_run_free(ws: Workspace, search: Search) -> None:
    """RunInProgress (a Conflict) when a live process runs the search; `hold_run` checks again, atomically."""
    await runs.check_free(ws.store, search)


@contextlib.asynccontextmanager
async def hold_run(
    ws: Workspace, search_id: int, on_missed_beat: Callable[[str], None] | None = None
) -> AsyncIterator[RunHolderOut]:
    """Hold the search's run for this process while the block runs: claimed on entry (RunInProgress while
    another live process holds it), a heartbeat every `runs.HEARTBEAT_S`, released on exit however the block
    ends. `on_missed_beat(why)` hears of a beat the busy database refused (the next one will do: a busy
    database is no sign of death)."""
    held = await runs.claim(ws.store, search_id)

    async def beat() -> None:
        while True:
            await asyncio.sleep(runs.HEARTBEAT_S)
            try:
                await runs.heartbeat(ws.store, search_id)
            except StoreBusy as e:
                if on_missed_beat is not None:
                    on_missed_beat(f"heartbeat skipped: {e}")

    task = asyncio.create_task(beat())
    try:
        yield RunHolderOut.of(held)
    finally:
        task.cancel()
        await asyncio.wait([task])
        await runs.release(ws.store, search_id)
