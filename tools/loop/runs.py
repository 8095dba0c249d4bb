"""Who runs a search, and the status a person should read: the driver's claim on a search and every face's
shown status go through here (the records live in the store, ksearch.worldmodel.runs).

A driver run holds its search for as long as it runs (`hold_run`: claim, heartbeat, release), so a second
run is refused while it lives and a search it left `running` when killed reads as `interrupted`
(`run_status`). Searches advanced by an MCP host or a person have no holder: a `running` one reads as `waiting`.

What a run writes around its rounds is here too: the `running` status it shows (`mark_running`), the intents a
run that ended mid-phase left claimed (`reopen_active_intents`) and its summary (`keep_run_result`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, TypeAlias

from pydantic import BaseModel

from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import claims, runs
from ksearch.worldmodel.errors import StoreBusy
from ksearch.worldmodel.models import Node, Search, SearchStatus

ShownStatus: TypeAlias = runs.ShownStatus  # a search's status, or "interrupted"
Released: TypeAlias = claims.Released  # a claim a run left, given back (`release_claims`)


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
    """The status to show: the stored one; `interrupted` for a `running` search whose run is gone; `waiting` for a
    `running` one no run holds (a person or a host advances it between their calls)"""
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


async def mark_running(ws: Workspace, search_id: int) -> Search:
    """Store the search as `running`, for the run that holds it (`hold_run`). A run that dies leaves it so, and
    `run_status` shows it `interrupted` once its holder is gone."""
    return await ws.store.set_search_status(search_id, "running")


async def reopen_active_intents(ws: Workspace, search_id: int) -> list[Node]:
    """Put every intent of the search left `active` back to `open`, and return them (now open): a run that
    ended mid-phase (killed, crashed, its policy gave up) loses only its attempt in flight, and the intent can
    be claimed again. Call it while holding the run: any claim on the search is then a leftover."""
    return await claims.reopen_active(ws.store, search_id)


async def release_claims(ws: Workspace, search_id: int) -> list[Released]:
    """`reopen_active_intents`, saying of each intent whether its round was given back: a round interrupted before
    its intent recorded an attempt is not counted, and the run's next claim starts it again (so a stop or a kill
    costs no round). Call it while holding the run, or from the run's own cleanup."""
    return await claims.release_active(ws.store, search_id)


def run_result_key(search_id: int) -> str:
    """Where `keep_run_result` keeps a search's last run summary (the benchmarks read it there)."""
    return f"driver-result:{search_id}"


async def keep_run_result(ws: Workspace, search_id: int, result: BaseModel) -> None:
    """Keep the summary of the search's last driver run (why it stopped, rounds, best, spend), as JSON; it
    replaces the previous run's."""
    await ws.store.cache_put(run_result_key(search_id), result.model_dump(mode="json"))


async def keep_run_options(ws: Workspace, search_id: int, changes: dict[str, Any]) -> Search:
    """A run's options (policy, model, endpoint, replay and record files, loop settings) as the search's own,
    so that its next resume runs the same way."""
    s = await ws.search(search_id)
    if not changes:
        return s
    return await ws.store.set_search_fields(s.id, config=s.config.model_copy(update=changes))
