"""Suites: many searches under one command, as records. A suite is its configuration (budgets, policy, parallel
slots) and its tasks in the order given; each task has its search once one is started, and a status:

    pending -> running -> done | failed        refused: the task could not be loaded (never run)

A task left `running` by a suite run that was stopped or killed is resumed by the next run (its search
continues). Each change is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from ksearch.worldmodel import rows
from ksearch.worldmodel.errors import Conflict, NotFound
from ksearch.worldmodel.models import Strict
from ksearch.worldmodel.store import Store

SuiteTaskStatus = Literal["pending", "running", "done", "failed", "refused"]


class SuiteTask(Strict):
    """One task of a suite."""

    idx: int
    """Its place in the suite (0-based)."""
    task: str
    """A built-in task name or a path."""
    search_id: int | None = None
    """Its search, once one is started."""
    status: SuiteTaskStatus = "pending"
    error: str = ""
    """Why it was refused or failed."""
    started_at: datetime | None = None
    ended_at: datetime | None = None


class Suite(Strict):
    """A suite and its tasks."""

    id: int
    name: str
    config: dict[str, Any]
    """Budgets per task and for the whole suite, the policy and its options, parallel slots."""
    created_at: datetime
    tasks: list[SuiteTask]


async def create_suite(
    store: Store, name: str, config: dict[str, Any], tasks: Sequence[tuple[str, str]]
) -> Suite:
    """A new suite with `tasks` as (task, refusal) pairs: "" for a task to run, else why it cannot be."""
    async with store.transaction() as db:
        if await rows.fetchone(db, "SELECT 1 FROM suites WHERE name = ?", (name,)):
            raise Conflict(
                f"a suite named {name!r} exists; resume it with `ksearch suite run --resume {name}`"
            )
        cur = await db.execute(
            "INSERT INTO suites (name, config, created_at) VALUES (?, ?, ?)",
            (name, json.dumps(config, sort_keys=True), rows.now_iso()),
        )
        suite_id = cur.lastrowid
        for i, (task, refusal) in enumerate(tasks):
            await db.execute(
                "INSERT INTO suite_tasks (suite_id, idx, task, status, error) VALUES (?, ?, ?, ?, ?)",
                (suite_id, i, task, "refused" if refusal else "pending", refusal),
            )
    return await get_suite(store, name)


async def get_suite(store: Store, ref: int | str) -> Suite:
    """The suite by id or name; NotFound names the suites there are."""
    async with store.reading() as db:
        where, arg = (
            ("id = ?", int(ref)) if isinstance(ref, int) or str(ref).isdecimal() else ("name = ?", ref)
        )
        row = await rows.fetchone(
            db, f"SELECT id, name, config, created_at FROM suites WHERE {where}", (arg,)
        )
        if row is None:
            names = [r[0] for r in await rows.fetchall(db, "SELECT name FROM suites ORDER BY id")]
            raise NotFound(
                f"no suite {ref!r}; suites: {', '.join(names) or 'none yet (`ksearch suite run` starts one)'}"
            )
        found = await rows.fetchall(
            db,
            "SELECT idx, task, search_id, status, error, started_at, ended_at FROM suite_tasks WHERE suite_id = ? "
            "ORDER BY idx",
            (row[0],),
        )
    tasks = [
        SuiteTask(idx=i, task=t, search_id=sid, status=st, error=e, started_at=a, ended_at=b)
        for i, t, sid, st, e, a, b in found
    ]
    return Suite(id=row[0], name=row[1], config=json.loads(row[2]), created_at=row[3], tasks=tasks)


async def list_suites(store: Store) -> list[Suite]:
    async with store.reading() as db:
        ids = [r[0] for r in await rows.fetchall(db, "SELECT id FROM suites ORDER BY id")]
    return [await get_suite(store, i) for i in ids]


async def set_task(
    store: Store,
    suite_id: int,
    idx: int,
    status: SuiteTaskStatus,
    *,
    search_id: int | None = None,
    error: str = "",
) -> None:
    """Move a task to `status` (its search once known, the reason of a failure); stamps start and end."""
    async with store.transaction() as db:
        sets = ["status = ?", "error = ?"]
        args: list[Any] = [status, error]
        if search_id is not None:
            sets.append("search_id = ?")
            args.append(search_id)
        if status == "running":
            sets += ["started_at = ?", "ended_at = NULL"]
            args.append(rows.now_iso())
        elif status in ("done", "failed"):
            sets.append("ended_at = ?")
            args.append(rows.now_iso())
        cur = await db.execute(
            f"UPDATE suite_tasks SET {', '.join(sets)} WHERE suite_id = ? AND idx = ?", (*args, suite_id, idx)
        )
        if cur.rowcount != 1:
            raise NotFound(f"suite {suite_id} has no task {idx}")
