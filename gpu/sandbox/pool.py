"""Worker processes and the pool that hands them out (parent side; never imports torch).

One worker slot per visible GPU (one in CPU mode), each process pinned with CUDA_VISIBLE_DEVICES,
started with a scrubbed environment in its own scratch directory and process group, inside
ksearch.gpu.jail.launch where the machine allows it (own PID and network namespaces, a root showing only what
gpu/jail/view.py lists and the task's files, its own GPU's device node alone, limits on processes, host
memory and scratch disk). A call that does not answer within its timeout, a worker that dies (segfault,
abort, CUDA context lost), one that goes over a limit or one whose caller gave up is killed; the caller
gets a `WorkerError` saying which, and the slot gets a fresh process for the next caller. After each reply
of a jailed worker the jail is asked to measure at once, so a verdict over a limit is the call's that went
over it, never the next candidate's.

A jailed process sees only the task files it was started with: a slot asked to serve another task's
files (`ensure_view`) replaces its process (and its spare) with one that shows them.

A slot with `spare` keeps a second process started ahead, idle, that has never been handed out and so
never ran candidate code: when the slot's process is killed or replaced, the spare takes over at once
instead of the next caller waiting for a cold start (imports, CUDA context). The next spare starts when a
live process is given back to the pool, behind the reply, or, asked at the takeover (`restart(next_spare=True)`:
a caller that expects its checks to outlast a start, so back-to-back evaluations of new candidates each find one
ready), at once; a start competes for the host's CPU and the GPU's driver, so a call about to time waits for a
spare still starting (`settle`). Spares start in candidate mode only: a baseline process is always started afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.limits import Limits
from ksearch.gpu.jail.link import JailLink
from ksearch.gpu.jail.scrub import scrubbed_env
from ksearch.gpu.jail.zygote_client import zygote_for
from ksearch.gpu.sandbox.lease import GpuLease, LeaseTimeout
from ksearch.gpu.sandbox.process import Mode, Process, WorkerError

log = logging.getLogger("ksearch.sandbox")

SETTLE_S = 60.0  # the longest a timing waits for the slot's spare to start and its replaced processes to end


def compiler_cache_env(caches: Path) -> dict[str, str]:
    """Where Triton, inductor, torch extensions, CuPy and FlashInfer-Bench's builders keep their caches: all under
    `caches` (FlashInfer-Bench's default is under HOME, a worker's own scratch: every new worker process would
    build a CUDA solution again, a minute each)."""
    return {
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "TORCH_EXTENSIONS_DIR": str(caches / "torch_extensions"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "CUPY_CACHE_DIR": str(caches / "cupy"),
        "FIB_CACHE_PATH": str(caches / "flashinfer_bench"),
    }


class WorkerProcess:
    """One worker slot (a GPU, or the CPU): the process serving it now and, with `spare`, the one
    started ahead to take over (see the module's docstring)."""

    def __init__(
        self,
        slot: int,
        gpu: str | None,
        root: Path,
        *,
        shared: Path,
        cpu_mode: bool,
        gpu_mem_fraction: float,
        memory_limit_bytes: int,
        start_timeout_s: float = 180.0,
        extra_env: dict[str, str] | None = None,
        jailed: bool = False,
        spare: bool = False,
        fork: bool = False,
        limits: Limits | None = None,
        simulate: dict[str, Any] | None = None,
    ) -> None:
        self.slot = slot
        # a simulated GPU's slot (gpu/worker/simulated.py): its processes run on the CPU (cpu_mode) and say they are a GPU's
        self.simulate = simulate
        self.jailed = jailed  # run inside ksearch.gpu.jail.launch (see the module's docstring)
        # a jailed process's limits; its host memory is the pool's memory limit
        self.limits = replace(limits or Limits(), memory_bytes=memory_limit_bytes)
        self.readable: frozenset[str] = frozenset()  # task files its jail shows (see ensure_view)
        self.gpu = gpu
        self.root = root  # this sandbox's own directory: scratch dirs of its workers
        self.shared = shared  # compiler caches shared by every sandbox on the machine
        self.cpu_mode = cpu_mode
        self.gpu_mem_fraction = gpu_mem_fraction
        self.memory_limit_bytes = memory_limit_bytes
        self.start_timeout_s = start_timeout_s
        self.extra_env = dict(extra_env or {})
        self.inputs_s = 0.0  # host seconds its processes reported drawing inputs (every process of the slot)
        # seconds its processes reported building torch extensions (or waiting for another's build)
        self.build_s = 0.0
        self.reference_s = 0.0  # host seconds its processes reported running the reference for the checks
        # input fills its processes made on the GPU (gpu/tasks/draws/gpu_fills.py), by op
        self.gpu_fills: Counter[str] = Counter()
        self.spare = spare
        self.starts = 0  # processes that have served this slot
        self.start_s: float | None = None  # seconds the slot's last process start took (None before one)
        self.spares_taken = 0  # of those, the ones a spare supplied (no cold start waited for)
        # "candidate": runs candidates; "baseline": a fresh process that never ran candidate code, with
        # compiler caches of its own that no candidate can write (see LocalSandbox.clean_baselines)
        self.mode: Mode = "candidate"
        self.closed = False
        self._serial = itertools.count(1)
        self._cur: Process | None = None
        # the hello of the slot's last started process (see hello)
        self._last_hello: dict[str, Any] | None = None
        self._spare: Process | None = None
        self._chores: set[asyncio.Task[None]] = set()  # processes being discarded in the background
        # with `fork`: the zygote the slot's processes are forked from (gpu/jail/zygote.py; this process's one for the
        # slot's environment, started at its first use)
        self.zygote = zygote_for(self._env(root, "candidate"), start_timeout_s) if fork else None

    # ------------------------------------------------------------------ the process serving the slot
    @property
    def alive(self) -> bool:
        return self._cur is not None and self._cur.alive

    @property
    def hello(self) -> dict[str, Any] | None:
        """The machine's facts (device, versions, GPU) as the slot's process said them at its start; between one
        process and the next (a fresh one per candidate) the last one's: they are the same in every process, and
        a reader in that gap (another batch item's evaluation) read none and recorded an unknown device."""
        cur = self._cur.hello if self._cur is not None else None
        return cur if cur is not None else self._last_hello

    @property
    def ran_candidate(self) -> bool:
        return self._cur is not None and self._cur.ran_candidate

    @ran_candidate.setter
    def ran_candidate(self, value: bool) -> None:
        if self._cur is not None:
            self._cur.ran_candidate = value

    @property
    def stray_threads(self) -> bool:
        """Whether candidate code left threads running in the current process (they would run into the next
        candidate's evaluation: a thread left interpreting a Triton kernel broke the next one's, for one)."""
        return self._cur is not None and self._cur.stray_threads

    @property
    def candidate_id(self) -> str | None:
        """The candidate the current process last loaded (None in a process that has loaded none)."""
        return self._cur.candidate_id if self._cur is not None else None

    @candidate_id.setter
    def candidate_id(self, value: str | None) -> None:
        if self._cur is not None:
            self._cur.candidate_id = value

    @property
    def scratch(self) -> Path:
        return self._cur.scratch if self._cur is not None else self.root / f"w{self.slot}-001"

    def _caches(self, mode: Mode) -> Path:
        return self.shared if mode == "candidate" else self.shared.parent / "baseline-caches"

    @property
    def draws(self) -> Path:
        """The machine's store of slow input draws (gpu/tasks/draws/store.py): written by baseline-mode processes
        alone, read-only to a candidate's."""
        return self.shared.parent / "draws"

    def stderr_tail(self, n: int = 25) -> str:
        return self._cur.stderr_tail(n) if self._cur is not None else ""

    async def call(self, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request to the slot's process and wait for its reply (see `Process.call`)."""
        if self._cur is None:
            raise WorkerError("crash", "the worker is not running")
        reply = await self._cur.call(op, args, timeout_s)
        self.inputs_s += float(reply.get("inputs_s") or 0.0)
        self.build_s += float(reply.get("build_s") or 0.0)
        self.reference_s += float(reply.get("reference_s") or 0.0)
        self.gpu_fills.update(reply.get("gpu_fills") or {})
        return reply

    # ------------------------------------------------------------------ starting and replacing
    def gpu_view(self) -> tuple[list[str], str]:
        """(the device nodes its jail shows, CUDA_VISIBLE_DEVICES): a jailed GPU worker sees its own GPU's
        node alone and names it by UUID (CUDA numbers the GPUs it can open from 0, so an index could name
        none); unjailed, the index."""
        if self.cpu_mode or self.gpu is None:
            return [], ""
        if not self.jailed:
            return [], str(self.gpu)
        return jail_view.gpu_view(str(self.gpu))

    def _env(self, scratch: Path, mode: Mode) -> dict[str, str]:
        extra = {
            "CUDA_VISIBLE_DEVICES": self.gpu_view()[1],
            "TRITON_INTERPRET": "1" if self.cpu_mode else "0",
            **compiler_cache_env(self._caches(mode)),
            "KSEARCH_WORKER": json.dumps(
                {
                    "cpu_mode": self.cpu_mode,
                    "gpu_mem_fraction": self.gpu_mem_fraction,
                    "slot": self.slot,
                    "draws": {"dir": str(self.draws), "writable": mode == "baseline"},
                    "memory_bytes": self.memory_limit_bytes,
                    **({"simulate": self.simulate} if self.simulate else {}),
                }
            ),
            **self.extra_env,
        }
        return scrubbed_env(home=scratch, extra=extra)

    def _launch(self, mode: Mode, after: asyncio.Task[None] | None = None) -> Process:
        n = next(self._serial)
        # one directory per process, none a prefix of another's name (w0-001, w0-002, ..., w1-001)
        scratch = self.root / f"w{self.slot}-{n:03d}"
        p = Process(self.slot, scratch, mode, self.memory_limit_bytes, self.readable)
        caches = self._caches(mode)
        caches.mkdir(parents=True, exist_ok=True)
        self.draws.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "ksearch.gpu.worker.main"]
        if self.jailed:
            p.link = JailLink()
            writes_draws = mode == "baseline"
            cmd = jail.wrap(
                cmd,
                [scratch],
                caches=[caches],
                stores=[self.draws] if writes_draws else [],
                readable=sorted(self.readable | ({str(self.draws)} if not writes_draws else set())),
                devices=self.gpu_view()[0],
                limits=self.limits,
                control_fd=p.link.jail_fd,
            )
        p.launch(
            cmd,
            self._env(scratch, mode),
            self.start_timeout_s,
            jailed=self.jailed,
            after=after,
            zygote=self.zygote,
        )
        if after is None:  # a start of its own, not one queued behind an old process's end
            t0 = time.perf_counter()
            assert p.started is not None
            p.started.add_done_callback(lambda t: self._started_in(t, time.perf_counter() - t0))
        return p

    def _started_in(self, t: asyncio.Task[None], seconds: float) -> None:
        if not t.cancelled() and t.exception() is None:
            self.start_s = seconds

    def show(self, paths: Iterable[str]) -> set[str]:
        """Have the slot's processes started from now on show `paths` (a task's files); the ones that need
        it (files inside the ksearch package, a built-in task's, are shown anyway)."""
        wanted = {p for p in paths if not jail_view.in_package(p)} if self.jailed else set()
        self.readable = self.readable | wanted
        return wanted

    async def ensure_view(self, paths: Iterable[str]) -> None:
        """Make `paths` (a task's files: jail_view.task_paths) visible to the slot's process. A jail shows
        only what it was started with: a process without them is replaced, and the slot's later processes
        show them too. Nothing to do unjailed."""
        wanted = self.show(paths)
        cur = self._cur
        if cur is not None and cur.usable and wanted <= cur.readable:
            return
        if cur is None:
            return  # the first start shows them
        await self.restart(self.mode)

    def _discard_later(self, p: Process) -> asyncio.Task[None]:
        p.kill_now()  # killed now; reaped and its directory removed in the background
        task = asyncio.create_task(p.discard())
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)
        return task

    def _replace(self, mode: Mode, next_spare: bool = False) -> Process:
        """A new process for the slot in `mode`: the spare when it can serve, else a cold start once the
        old process is gone. The old one is discarded either way; `next_spare`: a spare that took over is
        followed by the next one at once rather than when the slot is given back."""
        self.mode = mode
        old, sp = self._cur, self._spare
        if old is not None and old.hello is not None:
            self._last_hello = old.hello
        if sp is not None and (not sp.usable or not self.readable <= sp.readable):
            # it died waiting, or does not show the task files the slot now needs: no use
            self._spare = None
            self._discard_later(sp)
            sp = None
        if sp is not None and sp.mode == mode:
            self._spare = None
            self._cur = sp
            self.spares_taken += 1
            if old is not None:
                self._discard_later(old)
            if next_spare:
                self.keep_spare()  # ready by the next takeover; a timing waits for its start (settle)
        else:
            self._cur = self._launch(mode, after=self._discard_later(old) if old is not None else None)
        self.starts += 1
        cur = self._cur
        assert cur.started is not None
        # the outcome is read by ensure_started; never leave it "unretrieved"
        cur.started.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return cur

    def released(self) -> None:
        """The slot was given back: start a spare in the background if it has none and its process lives
        (after a takeover the next one starts here, behind the reply, unless the takeover asked for it)."""
        if self.alive:
            self.keep_spare()

    def keep_spare(self) -> None:
        """Start a spare in the background if the slot keeps one and has none."""
        if not self.spare or self.closed or self._spare is not None:
            return
        p = self._spare = self._launch("candidate")
        assert p.started is not None
        p.started.add_done_callback(lambda t: self._spare_started(p, t))

    def _spare_started(self, p: Process, t: asyncio.Task[None]) -> None:
        failed = t.cancelled() or t.exception() is not None
        if failed and self._spare is p:
            # not retried at once (it would likely fail again); the slot's next cold start tries anew
            log.warning("worker %s: a spare process failed to start: %s", self.slot, p.stderr_tail(5))
            self._spare = None
            self._discard_later(p)

    def start_in_background(self) -> None:
        """Give the slot a process if it has none ready or starting (the spare when there is one)."""
        if self.closed:
            raise WorkerError("start", "the sandbox is closed")
        if self._cur is not None and self._cur.usable:
            return
        self._replace(self.mode)

    async def ensure_started(self) -> None:
        """Start the worker if it is not running (or join a start already under way)."""
        if self._cur is not None and self._cur.ready:
            return
        self.start_in_background()
        assert self._cur is not None and self._cur.started is not None
        await asyncio.shield(self._cur.started)

    async def restart(self, mode: Mode, next_spare: bool = False) -> None:
        """A fresh process in `mode`: whatever the old one ran (candidate code included) is gone; `next_spare`:
        see `_replace`."""
        if self.closed:
            raise WorkerError("start", "the sandbox is closed")
        p = self._replace(mode, next_spare)
        assert p.started is not None
        await asyncio.shield(p.started)

    async def wait_spare(self) -> int | None:
        """The pid of the slot's spare once it is ready; None when there is none (none is started before
        the slot is first handed to a caller) or it failed to start."""
        p = self._spare
        if p is None or p.started is None:
            return None
        with contextlib.suppress(WorkerError, asyncio.CancelledError):
            await asyncio.shield(p.started)
        return p.pid if p.ready else None

    @property
    def spare_ready(self) -> bool:
        """Whether a spare has started and waits, ready to take over."""
        return self._spare is not None and self._spare.ready

    async def settle(self) -> float:
        """Wait until no spare of the slot is starting and no replaced process of it is still ending (a start takes
        host CPU and the GPU's driver, an ending process's context is torn down on the GPU: either would move a
        timing of the process serving it); the seconds waited."""
        waits: list[asyncio.Task[Any]] = [t for t in self._chores if not t.done()]
        p = self._spare
        if p is not None and p.started is not None and not p.started.done():
            waits.append(p.started)
        if not waits:
            return 0.0
        t0 = time.perf_counter()
        # asyncio.wait, not the tasks themselves: a failed start is the spare's own (see _spare_started), not the
        # caller's; a killed process ends at once, so the bound only guards against one the kernel keeps
        await asyncio.wait(waits, timeout=SETTLE_S)
        return time.perf_counter() - t0

    async def stop(self) -> None:
        self.closed = True
        procs = [p for p in (self._cur, self._spare) if p is not None]
        self._spare = None
        await asyncio.gather(*(p.shutdown() for p in procs), *self._chores, return_exceptions=True)


class WorkerBusy(WorkerError):
    """No worker came free within the caller's bound: the message names what held each one and for how long."""

    def __init__(self, message: str) -> None:
        super().__init__("busy", message)


ACQUIRE_TIMEOUT_S = (
    900.0  # the longest a call waits for a worker (a TriMul final evaluation holds one minutes)
)


class WorkerPool:
    """Hands out workers one caller at a time; a dead worker is replaced at once (by its spare) or in
    the background. A wait for a worker is bounded, and a caller that gives up is told who held them."""

    def __init__(self, workers: list[WorkerProcess], *, acquire_timeout_s: float = ACQUIRE_TIMEOUT_S) -> None:
        if not workers:
            raise ValueError("a pool needs at least one worker")
        self.workers = workers
        self.acquire_timeout_s = acquire_timeout_s
        self._free: asyncio.Queue[WorkerProcess] | None = None
        # what each held slot is doing and since when (monotonic): named when a waiter gives up
        self.holders: dict[int, tuple[str, float]] = {}

    def _queue(self) -> asyncio.Queue[WorkerProcess]:
        if self._free is None:
            self._free = asyncio.Queue()
            for w in self.workers:
                self._free.put_nowait(w)
        return self._free

    async def start(self) -> None:
        await asyncio.gather(*(w.ensure_started() for w in self.workers))

    def show(self, files: Iterable[str]) -> None:
        """Every slot's processes started from now on show `files` (a task's: see WorkerProcess.show)."""
        files = list(files)
        for w in self.workers:
            w.show(files)

    def held_by(self) -> str:
        """What holds the pool's workers now, in words ("" when none is held)."""
        now = time.monotonic()
        return "; ".join(
            f"worker {slot}: {what} (for {now - since:.0f} s)"
            for slot, (what, since) in sorted(self.holders.items())
        )

    @contextlib.asynccontextmanager
    async def acquire(
        self, files: Iterable[str] = (), *, purpose: str = "a call", timeout_s: float | None = None
    ) -> AsyncIterator[WorkerProcess]:
        """A worker for one caller at a time; `files`: a task's files its jail must show (ensure_view); `purpose`:
        what the caller does with it, named to a caller that waits in vain. Waits at most `timeout_s` (the pool's
        bound by default), then raises WorkerBusy naming the holders."""
        q = self._queue()
        bound = self.acquire_timeout_s if timeout_s is None else timeout_s
        t0 = time.monotonic()
        try:
            # asyncio.timeout, not wait_for: a wait_for cancelled as its get completes loses the worker (Python 3.11)
            async with asyncio.timeout(bound):
                w = await q.get()
        except TimeoutError:
            raise WorkerBusy(
                f"no sandbox worker came free within {bound:.0f} s for {purpose}; "
                f"{self.held_by() or 'none was held (the pool is closing)'}"
            ) from None
        # a GPU's slot also takes the machine's lease on its GPU: another ksearch process's work never runs beside it
        lease = GpuLease(w.shared.parent, str(w.gpu)) if w.gpu is not None else None
        try:
            if lease is not None:
                self.holders[w.slot] = (
                    f"{purpose}, waiting for its GPU (another ksearch process uses it)",
                    t0,
                )
                await lease.take(purpose, max(0.0, bound - (time.monotonic() - t0)))
        except LeaseTimeout as e:
            self.holders.pop(w.slot, None)
            q.put_nowait(w)
            raise WorkerBusy(f"no GPU came free for {purpose}: {e}") from None
        except BaseException:
            self.holders.pop(w.slot, None)
            q.put_nowait(w)
            raise
        self.holders[w.slot] = (purpose, time.monotonic())
        try:
            await w.ensure_view(files)
            await w.ensure_started()
            yield w
        finally:
            self.holders.pop(w.slot, None)
            if lease is not None:
                lease.give_back()
            if not w.alive and not w.closed:
                w.start_in_background()  # its spare takes over here, when it has one
            else:
                w.released()
            q.put_nowait(w)

    async def close(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
