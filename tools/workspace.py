"""The state every tool runs over: the world-model store and (lazily) the GPU sandbox.

The sandbox starts worker processes, so it is created on first use only: reading the tree never
starts a worker, and the process that hosts the tools never imports torch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ksearch.gpu.sandbox import LocalSandbox, Sandbox, gpus_visible
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.kernelbench_rules import with_precision
from ksearch.tools.records import Records
from ksearch.worldmodel.models import Search
from ksearch.worldmodel.store import Store


class StoreCache:
    """The sandbox's key-value cache (baselines, ceilings per environment), kept in the database."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self._store.cache_get(key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        await self._store.cache_put(key, value)


class Workspace:
    def __init__(self, store: Store, sandbox: Sandbox | None = None, *, n_workers: int | None = None) -> None:
        self.store = store  # the tools' own door: reads and writes
        self.records = Records(store)  # the faces' door: reads only (writes go through the tools' operations)
        self._sandbox = sandbox
        self._n_workers = n_workers
        self._lock = asyncio.Lock()
        self._tasks: dict[str, Task] = {}

    @classmethod
    async def open(
        cls, db: Path, *, sandbox: Sandbox | None = None, n_workers: int | None = None
    ) -> Workspace:
        return cls(await Store.open(db), sandbox, n_workers=n_workers)

    async def sandbox(self) -> Sandbox:
        async with self._lock:
            if self._sandbox is None:
                self._sandbox = LocalSandbox(n_workers=self._n_workers, cache=StoreCache(self.store))
            return self._sandbox

    async def gpu_sandbox(self) -> Sandbox | None:
        """The sandbox where it runs on a GPU (started if need be); None on a machine without one, where nothing
        is started (background GPU work has nothing to do there)."""
        if self._sandbox is None and not await asyncio.to_thread(gpus_visible):
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
        await self.store.close()

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
