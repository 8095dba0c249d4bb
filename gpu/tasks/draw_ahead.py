"""A baseline worker's `draw` operation: an evaluation's inputs drawn ahead, into the draws store.

The first draw of each workload is made in the worker itself: a quick one says the workload needs nothing ahead
(quick draws are never kept), a slow one (or one the store or the worker already held) that its other draws are
worth making. Those go to child processes (gpu/tasks/draw_child.py) when the store is writable and more than one
may run, so that the workload's draws take about as long as its slowest one rather than their sum; as many
children as `parallel` allows and the host-memory limit leaves room for (each may hold a few copies of its
draw), else one after another in the worker.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from ksearch.gpu.tasks import draw_child
from ksearch.gpu.tasks.input_cache import InputCache

# host copies of its draw a child may hold at once (the generator's, the kept one, slack)
COPIES_PER_CHILD = 3


class DrawAhead:
    def __init__(self, worker: Any, cache: InputCache, parallel: int, memory_bytes: int) -> None:
        self.w = worker
        self.cache = cache
        self.parallel = max(1, parallel)
        self.memory_bytes = memory_bytes
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future[dict[str, Any]]] = []
        self.here = 0  # draws made in the worker
        self.quick: list[str] = []  # workloads whose draws are quick: nothing drawn ahead
        self.errors: list[str] = []
        self.children = 0
        self.t0 = time.perf_counter()
        store = cache.store
        self._saved0, self._loaded0 = (store.saved, store.loaded) if store is not None else (0, 0)
        if store is not None and store.writable:
            # the store keeps what is drawn here, and this process ends after drawing: its memory is left to the
            # children (the jail's host-memory limit covers them all)
            cache.budget = 0

    def run(self, pairs: list[tuple[str, int | None]]) -> None:
        by_wl: dict[str, list[int | None]] = {}
        for wl, seed in pairs:
            by_wl.setdefault(wl, []).append(seed)
        # first every workload's first draw, so that the children are sized for the largest draw
        rest: list[tuple[str, int | None]] = []
        for wl, seeds in by_wl.items():
            if self._first(wl, seeds[0]):
                rest += [(wl, s) for s in seeds[1:]]
            else:
                self.quick.append(wl)
        store = self.cache.store
        pool = self._pool_for(len(rest)) if rest and store is not None and store.writable else None
        if pool is None:
            for wl, seed in rest:
                self._draw_here(wl, seed)
            return
        self._futures = [pool.submit(draw_child.draw, wl, seed) for wl, seed in rest]
        for f in self._futures:
            try:
                f.result()
            except Exception as e:  # a child that failed or was killed: the candidate's worker draws it later
                self.errors.append(f"{type(e).__name__}: {str(e)[:300]}")

    def _first(self, wl: str, seed: int | None) -> bool:
        """Draw `wl`'s first pair here; whether the workload is slow to draw (or held already: only slow draws are
        kept)."""
        hits, took = self.cache.hits, self._draw_here(wl, seed)
        return took >= self.cache.min_draw_s or self.cache.hits > hits

    def _draw_here(self, wl: str, seed: int | None) -> float:
        w = self.w.task.workload(wl)
        t0 = time.perf_counter()
        data = (
            self.w.rt.task_inputs(w, self.w.device)
            if seed is None
            else self.w.rt.make_inputs(w, seed, self.w.device)
        )
        del data
        self.here += 1
        return time.perf_counter() - t0

    def _pool_for(self, jobs: int) -> ProcessPoolExecutor | None:
        if self._pool is None:
            n = min(self.parallel, jobs)
            if self.memory_bytes and self.cache.largest:
                n = min(n, self.memory_bytes // (COPIES_PER_CHILD * self.cache.largest) - 1)
            if n < 2:
                return None
            store = self.cache.store
            assert store is not None
            task = json.loads(self.w.task.model_dump_json())
            self._pool = ProcessPoolExecutor(
                max_workers=n,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=draw_child.start,
                initargs=(str(store.path), task),
            )
            self.children = n
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def summary(self) -> dict[str, Any]:
        store = self.cache.store
        done = [f.result() for f in self._futures if f.done() and not f.cancelled() and f.exception() is None]
        return {
            "drawn": self.here + len(done),
            "in_worker": self.here,
            "in_children": len(done),
            "children": self.children,
            "quick_workloads": self.quick,
            "stored": (store.saved - self._saved0 if store is not None else 0)
            + sum(d["stored"] for d in done),
            "from_store": store.loaded - self._loaded0 if store is not None else 0,
            "errors": self.errors[:5],
            "seconds": round(time.perf_counter() - self.t0, 3),
        }
