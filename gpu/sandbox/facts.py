"""The machine's facts a sandbox reports: the first worker's hello (device, versions), the environment every
evaluation records, and the GPU's measured ceilings (copy bandwidth, matmul rates), cached per environment.

`MachineFacts` is a base class of `ksearch.gpu.sandbox.local.LocalSandbox`, which sets the attributes it declares. No lock
is held while a worker is waited for: the ceilings' measurement is one shared job, and a caller holding a worker
measures on it rather than wait for the pool (see `ceilings`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ksearch.gpu.build.compiler import StaticCompiler
from ksearch.gpu.sandbox.api import HardwareFacts, SandboxError
from ksearch.gpu.sandbox.kvcache import KVCache
from ksearch.gpu.sandbox.pool import WorkerPool, WorkerProcess
from ksearch.gpu.timing import ncu
from ksearch.worldmodel.models import Environment

log = logging.getLogger("ksearch.sandbox")
CACHE_VERSION = "v2"
CEILINGS_TIMEOUT_S = 600.0  # the ceilings' measurement (copies and matmuls of each dtype): seconds on a GPU


def _ceilings_key(env: Environment) -> str:
    return f"ceilings:{CACHE_VERSION}:{env.key()}"


class MachineFacts:
    """The hello, environment, ceilings and hardware facts of a sandbox's machine."""

    pool: WorkerPool
    cpu_mode: bool
    clean_baselines: bool
    cache: KVCache
    compiler: StaticCompiler
    isolation: str
    _driver: str | None
    _machine: dict[str, Any] | None
    _facts: HardwareFacts | None
    _ceilings: dict[str, Any] | None
    _ceil_job: asyncio.Task[dict[str, Any]] | None
    _ceil_running: asyncio.Future[dict[str, Any]] | None

    async def _hello(self) -> dict[str, Any]:
        """A worker's hello: the machine's facts (device, versions) are the same in every process, so the first
        one seen serves. Before any worker has started, this joins the first slot's start without taking the slot
        from the pool (a caller holding it never waits for this one, nor this one for that caller's work)."""
        if self._machine is None:
            seen = next((w.hello for w in self.pool.workers if w.hello is not None), None)
            w = self.pool.workers[0]
            deadline = time.monotonic() + w.start_timeout_s + 10.0
            # the process that started may be replaced before its hello is read (a fresh one per candidate):
            # wait for the next one's start rather than record an unknown device
            while seen is None and time.monotonic() < deadline:
                await asyncio.wait_for(w.ensure_started(), max(0.1, deadline - time.monotonic()))
                seen = w.hello
            if seen is None:
                return {}
            self._machine = dict(seen)
        return dict(self._machine)

    async def _environment(self) -> Environment:
        h = await self._hello()
        return Environment(
            device=h.get("device", "unknown"),
            cpu_mode=bool(h.get("cpu_mode", self.cpu_mode)),
            sm_count=h.get("sm_count"),
            driver=self._driver,
            cuda=h.get("cuda"),
            torch=h.get("torch"),
            triton=h.get("triton"),
            python=h.get("python"),
            # one slot: the first worker's GPU is every evaluation's (with several, each timing names its own)
            gpu_uuid=h.get("gpu_uuid") if len(self.pool.workers) == 1 else None,
        )

    async def ceilings(self, held: WorkerProcess | None = None) -> dict[str, Any]:
        """Measured copy bandwidth and matmul rates, cached per environment ({} in CPU mode).

        No lock is held while a worker is waited for. A caller without a worker joins the one measurement under
        way or starts one that takes a worker from the pool. `held`: a worker the caller already holds; it never
        waits for a measurement that still needs a worker from the pool (on a one-GPU machine that one is its
        own: the wait would never end) but measures on its own worker, unless a measurement is running on another
        worker already (that one ends within its bound without needing anything the caller holds)."""
        while True:
            if self._ceilings is not None:
                return self._ceilings
            env = await self._environment()
            if env.cpu_mode:
                self._ceilings = {}
                return self._ceilings
            hit = await self.cache.get(_ceilings_key(env))
            if hit is not None:
                self._ceilings = hit
                return hit
            try:
                if held is not None and self._ceil_running is None:
                    return await self._measure_ceilings(held, env)
                if held is None and self._ceil_running is None:
                    if self._ceil_job is None or self._ceil_job.done():
                        self._ceil_job = asyncio.create_task(self._ceilings_from_pool(env))
                    return await asyncio.shield(self._ceil_job)
                assert self._ceil_running is not None
                return await asyncio.shield(self._ceil_running)
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if me is None or me.cancelling():
                    raise
                # the measurement joined was cancelled with the call that ran it (a host gave up): measure anew
                log.info("the ceilings' measurement was cancelled with its caller; measuring again")

    async def _ceilings_from_pool(self, env: Environment) -> dict[str, Any]:
        async with self.pool.acquire(purpose="measuring the GPU's ceilings") as w:
            if self._ceilings is not None:  # a caller holding a worker measured them meanwhile
                return self._ceilings
            if self._ceil_running is not None:
                return await asyncio.shield(self._ceil_running)
            return await self._measure_ceilings(w, env)

    async def _measure_ceilings(self, w: WorkerProcess, env: Environment) -> dict[str, Any]:
        """One measurement on `w`; other callers wait for it through `_ceil_running` (it holds its worker)."""
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._ceil_running = done
        try:
            reply = await w.call("hardware", {}, timeout_s=CEILINGS_TIMEOUT_S)
            if not reply.get("ok"):
                raise SandboxError(f"measuring the GPU's ceilings failed: {reply.get('error')}")
            hit: dict[str, Any] = reply["result"]
            await self.cache.put(_ceilings_key(env), hit)
            self._ceilings = hit
            done.set_result(hit)
            return hit
        except asyncio.CancelledError:
            done.cancel()  # its waiters measure anew (see `ceilings`)
            raise
        except BaseException as e:
            done.set_exception(
                e
                if isinstance(e, SandboxError)
                else SandboxError(f"measuring the GPU's ceilings failed: {type(e).__name__}: {e}")
            )
            done.exception()  # retrieved: a waiter-less failure is not logged as unhandled
            raise
        finally:
            self._ceil_running = None

    async def _ensure_ceilings(self, w: WorkerProcess, env: Environment) -> None:
        """Measure the ceilings (once per environment) in a process that has run no candidate, so
        nothing a candidate left running can lower them (they bound the roofline check)."""
        if self._ceilings is not None:
            return
        if self.clean_baselines and w.ran_candidate and await self.cache.get(_ceilings_key(env)) is None:
            await w.restart("candidate")
        await self.ceilings(w)

    async def runs_without_gpu(self) -> bool:
        return self.cpu_mode  # from nvidia-smi at the start: no worker asked, none waited for

    async def hardware(self) -> HardwareFacts:
        if self._facts is not None:
            return self._facts
        h = await self._hello()
        ceil = await self.ceilings()
        bw = ceil.get("copy_bandwidth_Bps")
        best = ceil.get("bandwidth_Bps")
        self._facts = HardwareFacts(
            device=h.get("device", "unknown"),
            cpu_mode=bool(h.get("cpu_mode", self.cpu_mode)),
            workers=len(self.pool.workers),
            sm_count=h.get("sm_count"),
            compute_capability=h.get("compute_capability"),
            memory_gb=h.get("memory_gb"),
            l2_bytes=h.get("l2_bytes"),
            copy_bandwidth_gbps=round(bw / 1e9, 1) if bw else None,
            bandwidth_gbps=round(best / 1e9, 1) if best else None,
            matmul_tflops={k: round(v / 1e12, 1) for k, v in (ceil.get("matmul_flops") or {}).items()},
            driver=self._driver,
            cuda=h.get("cuda"),
            torch=h.get("torch"),
            triton=h.get("triton"),
            python=h.get("python"),
            nvcc=self.compiler.nvcc is not None,
            ncu=ncu.find_ncu() is not None,
            isolation=self.isolation,
        )
        return self._facts
