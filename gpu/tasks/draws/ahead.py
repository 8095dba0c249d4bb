"""A baseline worker's `draw` operation: an evaluation's inputs drawn ahead, into the draws store.

The first draw of each workload is made in the worker itself: a quick one says the workload needs nothing ahead
(quick draws are never kept), a slow one (or one the store or the worker already held) that its other draws are
worth making. Those go to child processes (gpu/tasks/draws/child.py) when the store is writable and more than one
may run, so that the workload's draws take about as long as its slowest one rather than their sum; as many
children as `parallel` allows and the host-memory limit leaves room for (each may hold a few copies of its
draw), else one after another in the worker.

Where the sizes of the workloads' inputs are known beforehand (the task's facts, probed under fake tensors), the
worker draws the largest workload's first pair: a quick one says the task's draws are quick (nothing is drawn
ahead). Otherwise the other large workloads skip that first draw in the worker: every one of their draws goes to the
children at once, the largest first, so that drawing them takes about the longest draw rather than the sum of each
workload's first one (TriMul's final evaluation, drawn on the CPU: 143 s of first draws one after another). A large
workload whose first draw turns out quick (a GPU generator) has its other draws called off.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from typing import Any

from ksearch.gpu.tasks.draws import child as draw_child
from ksearch.gpu.tasks.draws.input_cache import InputCache

# host copies of its draw a child may hold at once (the generator's, the kept one, slack)
COPIES_PER_CHILD = 3
# inputs from this size up are drawn by children from the start when their sizes are known (smaller ones draw in
# well under a second even on a CPU generator: the worker draws them itself)
LARGE_BYTES = 64 << 20


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

    def run(self, pairs: list[tuple[str, int | None]], sizes: dict[str, int] | None = None) -> None:
        """Draw `pairs`; `sizes`: bytes of each workload's inputs where known (its large workloads then go to the
        children from the start)."""
        by_wl: dict[str, list[int | None]] = {}
        for wl, seed in pairs:
            by_wl.setdefault(wl, []).append(seed)
        store = self.cache.store
        sizes = sizes or {}
        large = sorted(
            (wl for wl in by_wl if sizes.get(wl, 0) >= LARGE_BYTES), key=lambda wl: sizes[wl], reverse=True
        )
        if large and store is not None and store.writable and self.parallel > 1:
            # the largest's first draw here says whether the task's draws are slow at all: children cost seconds
            # to start, and a fill kept on the GPU (gpu/tasks/draws/lazy_fills.py) draws TriMul's largest in ~0.01 s
            first, seeds = large[0], by_wl[large[0]]
            if self._first(first, seeds[0]):
                by_wl[first] = seeds[1:]
                self._submit_large(large, by_wl, sizes[first])
                by_wl = {wl: seeds for wl, seeds in by_wl.items() if wl not in large}
            else:
                self.quick.append(first)
                by_wl.pop(first)
        # each other workload's first draw here, so that the children are sized for the largest draw
        rest: list[tuple[str, int | None]] = []
        for wl, seeds in by_wl.items():
            if self._first(wl, seeds[0]):
                rest += [(wl, s) for s in seeds[1:]]
            else:
                self.quick.append(wl)
        pool = self._pool_for(len(rest)) if rest and store is not None and store.writable else None
        if pool is None:
            for wl, seed in rest:
                self._draw_here(wl, seed)
        else:
            self._futures += [pool.submit(draw_child.draw, wl, seed) for wl, seed in rest]
        for f in list(self._futures):
            if f.cancelled():
                continue
            try:
                f.result()
            except CancelledError:
                continue
            except Exception as e:  # a child that failed or was killed: the candidate's worker draws it later
                self.errors.append(f"{type(e).__name__}: {str(e)[:300]}")

    def _submit_large(self, large: list[str], by_wl: dict[str, list[int | None]], largest: int) -> None:
        """Every draw of the large workloads to the children: first draws first, each kind largest first. A
        workload whose first draw was quick (and so not kept) has its draws not yet started called off."""
        pool = self._pool_for(sum(len(by_wl[wl]) for wl in large), largest)
        if pool is None:  # no room for two children: the usual way, in the worker
            return
        later: dict[str, list[Future[dict[str, Any]]]] = {}

        def on_first(wl: str) -> Callable[[Future[dict[str, Any]]], None]:
            def done(f: Future[dict[str, Any]]) -> None:
                if f.cancelled() or f.exception() is not None:
                    return
                r = f.result()
                if not r["stored"] and r["seconds"] < self.cache.min_draw_s:
                    self.quick.append(wl)
                    for g in later.get(wl, []):
                        g.cancel()

            return done

        large = [wl for wl in large if by_wl[wl]]
        firsts = []
        for wl in large:
            f = pool.submit(draw_child.draw, wl, by_wl[wl][0])
            firsts.append((wl, f))
            self._futures.append(f)
        for wl in large:
            later[wl] = [pool.submit(draw_child.draw, wl, s) for s in by_wl[wl][1:]]
            self._futures += later[wl]
        for wl, f in firsts:
            f.add_done_callback(on_first(wl))

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

    def _pool_for(self, jobs: int, largest: int = 0) -> ProcessPoolExecutor | None:
        """The children (made once, sized for the largest draw known by now: `largest` bytes or the largest the
        worker drew); None where fewer than two fit."""
        if self._pool is None:
            n = min(self.parallel, jobs)
            largest = max(largest, self.cache.largest)
            if self.memory_bytes and largest:
                n = min(n, self.memory_bytes // (COPIES_PER_CHILD * largest) - 1)
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
        called_off = sum(f.cancelled() for f in self._futures)
        return {
            "drawn": self.here + len(done),
            "in_worker": self.here,
            "in_children": len(done),
            "children": self.children,
            "quick_workloads": self.quick,
            "called_off": called_off,
            "stored": (store.saved - self._saved0 if store is not None else 0)
            + sum(d["stored"] for d in done),
            "from_store": store.loaded - self._loaded0 if store is not None else 0,
            "errors": self.errors[:5],
            "seconds": round(time.perf_counter() - self.t0, 3),
        }
