"""The state every tool runs over: the world-model store and (lazily) the GPU sandbox.

The sandbox starts worker processes, so it is created on first use only: reading the tree never
starts a worker, and the process that hosts the tools never imports torch.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

from ksearch.gpu.sandbox.local import LocalSandbox, Sandbox, gpus_visible
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.kernelbench_rules import with_precision
from ksearch.tools.records import Records
from ksearch.worldmodel.errors import SchemaError
from ksearch.worldmodel.models import Search
from ksearch.worldmodel.store import Store

BANK_ENV = "KSEARCH_BANK"
"""A shared kernel bank (a ksearch database file) for every face, when `--bank` is not given."""


class StoreCache:
    """The sandbox's key-value cache (baselines, ceilings per environment), kept in the database."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self._store.cache_get(key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        await self._store.cache_put(key, value)


class Workspace:
    def __init__(
        self,
        store: Store,
        sandbox: Sandbox | None = None,
        *,
        n_workers: int | None = None,
        bank: Path | None = None,
        gpus: list[str] | None = None,
        ray: str | None = None,
    ) -> None:
        self.store = store  # the tools' own door: reads and writes
        self.records = Records(store)  # the faces' door: reads only (writes go through the tools' operations)
        self._sandbox = sandbox
        self._n_workers = n_workers
        self._gpus = (
            gpus  # the GPUs this workspace's sandbox may use (a suite's slot); None: every visible one
        )
        self._ray = ray  # a Ray cluster's address: the sandbox is its pool of actors (gpus: actor indices)
        self._lock = asyncio.Lock()
        self._tasks: dict[str, Task] = {}
        # the kernel bank: this database's own, or a shared file named by `bank` or KSEARCH_BANK (opened on use)
        named = (
            bank if bank is not None else (Path(os.environ[BANK_ENV]) if os.environ.get(BANK_ENV) else None)
        )
        self.bank_path: Path | None = named
        self._bank: Store | None = None

    @classmethod
    async def open(
        cls,
        db: Path,
        *,
        sandbox: Sandbox | None = None,
        n_workers: int | None = None,
        bank: Path | None = None,
        gpus: list[str] | None = None,
        ray: str | None = None,
    ) -> Workspace:
        return cls(await Store.open(db), sandbox, n_workers=n_workers, bank=bank, gpus=gpus, ray=ray)

    async def bank(self) -> Store:
        """The store the kernel bank lives in: this database, or the shared bank file (created if missing)."""
        if self.bank_path is None or self.bank_path.resolve() == self.store.path.resolve():
            return self.store
        async with self._lock:
            if self._bank is None:
                if self.bank_path.is_dir():
                    raise SchemaError(
                        f"the bank {self.bank_path} is a directory; name a file (created if missing)"
                    )
                try:
                    self._bank = await Store.open(self.bank_path)
                except sqlite3.DatabaseError as e:
                    raise SchemaError(
                        f"the bank {self.bank_path} is not a ksearch database ({e}); --bank names a ksearch database "
                        "file (created if missing); a JSON export goes in with `ksearch bank import FILE`"
                    ) from e
            return self._bank

    async def sandbox(self) -> Sandbox:
        async with self._lock:
            if self._sandbox is None and self._ray is not None:
                from ksearch.gpu.sandbox.ray import RaySandbox, shared_pool

                ray_sb = RaySandbox(
                    shared_pool(self._ray), [int(g) for g in self._gpus] if self._gpus else None
                )
                await ray_sb.start()  # joins the cluster and places the actors: errors say why here
                self._sandbox = ray_sb
            if self._sandbox is None:
                self._sandbox = LocalSandbox(
                    n_workers=self._n_workers, cache=StoreCache(self.store), only_gpus=self._gpus
                )
            return self._sandbox

    async def gpu_sandbox(self) -> Sandbox | None:
        """The sandbox where it runs on a GPU (started if need be); None on a machine without one, where nothing
        is started (background GPU work has nothing to do there)."""
        if self._sandbox is None and self._ray is None and not await asyncio.to_thread(gpus_visible):
            return None
        sb = await self.sandbox()
        return None if getattr(sb, "cpu_mode", True) else sb

    def task(self, ref: str) -> Task:
        """The task by built-in name or path, loaded once; a TaskError says why it cannot be."""
        if ref not in self._tasks:
            self._tasks[ref] = load_task(ref)
        return self._tasks[ref]

    def search_task(self, s: Search) -> Task:
        """The task a search runs: its task at the search's KernelBench precision, when it has one."""
        task = self.task(s.task)
        if s.config.precision is None:
            return task
        key = f"{s.task}\0precision:{s.config.precision}"
        if key not in self._tasks:
            self._tasks[key] = with_precision(task, s.config.precision)
        return self._tasks[key]

    async def search(self, ref: int | str) -> Search:
        """The search by id or name; NotFound names what exists."""
        return await self.store.get_search(ref)

    async def close(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()
        if self._bank is not None:
            await self._bank.close()
        await self.store.close()

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
