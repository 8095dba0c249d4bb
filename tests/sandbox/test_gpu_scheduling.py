"""The sandbox's GPU scheduling path, run without a GPU: a simulated one-GPU machine (gpu/worker/simulated.py) has one worker
slot, spares, clean baseline processes, background baselines, draws ahead, the ceilings' measurement and the kernel
audit on, as an H200 has. Every test runs its calls under a hang detector: a call that neither returns nor fails
within its bound fails the test with the stack of every task still waiting.

The first test is the interleaving that hung a host on an H200 (a prompt's hardware facts read while a benchmark held
the only worker); the second plays random schedules of prompt reads, checks, benchmarks, final evaluations and
cancellations, some from a second sandbox on the same machine."""

from __future__ import annotations

import asyncio
import io
import os
import random
import signal
import subprocess
import sys
import traceback
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.sandbox.lease import GpuLease, LeaseTimeout
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.gpu.worker import simulated
from ksearch.worldmodel.models import EvalSettings
from tests.sandbox.conftest import candidate, settings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

HANG_S = 120.0  # far beyond any call here (each takes seconds): past it, a call is waiting for something that never comes


def _stacks() -> str:
    out = io.StringIO()
    for t in asyncio.all_tasks():
        if t is asyncio.current_task():
            continue
        out.write(f"--- {t.get_name()} {t.get_coro()}\n")
        for f in t.get_stack(limit=12):
            out.write("".join(traceback.format_stack(f, limit=1)))
    return out.getvalue()


async def _within(aws: dict[str, Awaitable[Any]], bound_s: float = HANG_S) -> dict[str, Any]:
    """Run the calls at once; each must return or fail within `bound_s` (their exceptions are results)."""
    tasks = {name: asyncio.ensure_future(aw) for name, aw in aws.items()}
    _done, pending = await asyncio.wait(tasks.values(), timeout=bound_s)
    if pending:
        stacks = _stacks()
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        hung = [n for n, t in tasks.items() if t in pending]
        pytest.fail(f"hang: {hung} did not end within {bound_s:.0f} s; waiting tasks:\n{stacks[-6000:]}")
    return {n: (t.exception() if t.exception() is not None else t.result()) for n, t in tasks.items()}


def _sim(tmp: Path, **kw: Any) -> LocalSandbox:
    return LocalSandbox(scratch_dir=tmp, simulated_gpus=1, call_timeout_s=90.0, **kw)


async def _holding(sb: LocalSandbox, within_s: float = 60.0) -> None:
    """Until some caller holds the (only) worker."""
    for _ in range(int(within_s / 0.01)):
        if sb.pool._queue().qsize() == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no caller took the worker")


async def test_a_simulated_gpu_runs_the_gpu_path(tmp_path, affine: Task) -> None:
    sb = _sim(tmp_path)
    try:
        hw = await sb.hardware()
        assert (hw.device, hw.cpu_mode, hw.copy_bandwidth_gbps) == (simulated.DEVICE, False, 4200.0)
        ev = await sb.evaluate(candidate("good_triton"), affine, settings(trials=1))
        assert ev.status == "ok", ev.error
        assert ev.env is not None and ev.env.device == simulated.DEVICE  # never passed off as a GPU's time
        t = ev.timings[0]
        assert t.eager_us is not None  # the baselines ran, in a process of their own
        assert sb.pool.workers[0].spare  # the GPU's slot keeps a spare
    finally:
        await sb.close()


async def test_a_prompts_hardware_read_while_a_benchmark_holds_the_only_worker(
    tmp_path, affine: Task
) -> None:
    """The benchmark holds the GPU's one worker and needs the ceilings; the prompt's hardware read needs them too.
    Before the fix, the read held the ceilings' lock while waiting for the worker and the benchmark waited for the
    lock: neither ever returned."""
    sb = _sim(tmp_path)
    try:
        cand, st = candidate("good_triton"), settings(trials=1)
        # a check first: the worker has run candidate code, and the ceilings are not measured yet
        first = await sb.correctness(cand, affine, st)
        assert first.status == "ok", first.error

        async def read_while_held() -> Any:
            await _holding(sb)
            return await sb.hardware()

        got = await _within(
            {"benchmark": sb.evaluate(candidate("good_triton"), affine, st), "prompt": read_while_held()}
        )
        assert not isinstance(got["benchmark"], BaseException), got["benchmark"]
        assert got["benchmark"].status == "ok", got["benchmark"].error
        assert got["prompt"].copy_bandwidth_gbps == 4200.0
    finally:
        await sb.close()


def _variant(i: int) -> str:
    """A distinct candidate source (a new candidate each time: a fresh process on a GPU)."""
    return candidate("good_triton").source + f"\n# variant {i}\n"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 7))
async def test_random_schedules_of_the_gpu_path_never_hang(tmp_path, affine: Task, seed: int) -> None:
    rng = random.Random(seed)
    root = (
        tmp_path / "machine"
    )  # the machine's scratch root: two sandboxes share its caches, as two servers do
    one, two = _sim(root), _sim(root)
    st = settings(trials=1)
    final = EvalSettings(**{**st.model_dump(), "final": True})
    try:

        async def later(s: float, aw: Awaitable[Any]) -> Any:
            await asyncio.sleep(s)
            return await aw

        calls: dict[str, Awaitable[Any]] = {}
        if rng.random() < 0.5:
            # a search's creation starts its baselines in the background, as create_search does on a GPU (a search
            # resumed by a new server starts none: its first benchmark measures them)
            assert one.start_reference_times(affine, st)
            calls["baselines at creation"] = one.reference_times(affine, st)
        for i in range(7):
            sb = one if rng.random() < 0.7 else two
            kind = rng.choice(
                ["prompt", "prompt", "correctness", "benchmark", "benchmark", "final", "reference"]
            )
            delay = rng.uniform(0.0, 3.0)
            name = f"{i}:{kind}@{'one' if sb is one else 'two'}+{delay:.1f}s"
            src = candidate(_variant(rng.randrange(3)))
            if kind == "prompt":
                calls[name] = later(delay, sb.hardware())
            elif kind == "correctness":
                calls[name] = later(delay, sb.correctness(src, affine, st))
            elif kind == "benchmark":
                calls[name] = later(delay, sb.evaluate(src, affine, st))
            elif kind == "final":
                calls[name] = later(delay, sb.evaluate(src, affine, final))
            else:
                calls[name] = later(delay, sb.reference_times(affine, st))
        # one more benchmark, cancelled mid-way (a host that gave up): the others go on
        cancelled = asyncio.ensure_future(one.evaluate(candidate(_variant(9)), affine, st))
        calls["cancel"] = later(rng.uniform(0.2, 2.0), _cancel(cancelled))
        got = await _within(calls)
        for name, res in got.items():
            assert not isinstance(res, BaseException), f"{name}: {res!r}"
            if hasattr(res, "status"):
                assert res.status == "ok", f"{name}: {res.status} {res.error}"
        # nothing left waiting: every worker is back in its pool
        for sb in (one, two):
            assert sb.pool._queue().qsize() == len(sb.pool.workers), sb.pool.held_by()
    finally:
        await asyncio.gather(one.close(), two.close())


async def _cancel(task: asyncio.Future[Any]) -> str:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "finished before the cancel"


async def _measuring(sb: LocalSandbox, within_s: float = 60.0) -> None:
    for _ in range(int(within_s / 0.01)):
        if sb._ceil_running is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the ceilings were never measured")


async def test_a_cancel_during_the_ceilings_measurement(tmp_path, affine: Task) -> None:
    """A prompt's read cancelled mid-measurement leaves the measurement to finish for the next reader; a benchmark
    cancelled while it measures on its own worker loses that process (killed, not left running), and the next call
    measures anew and succeeds."""
    sb = _sim(tmp_path)
    try:
        read = asyncio.ensure_future(sb.hardware())
        await _measuring(sb)
        read.cancel()
        t0 = asyncio.get_running_loop().time()
        again = await _within({"read again": sb.hardware()})
        assert again["read again"].copy_bandwidth_gbps == 4200.0
        assert (
            asyncio.get_running_loop().time() - t0 < simulated.HARDWARE_S + 1.5
        )  # joined, not measured twice

        sb2 = _sim(tmp_path / "second")
        first = await sb2.correctness(candidate("good_triton"), affine, settings(trials=1))
        assert first.status == "ok", first.error
        bench = asyncio.ensure_future(sb2.evaluate(candidate(_variant(1)), affine, settings(trials=1)))
        await _measuring(sb2)
        pid = sb2.pool.workers[0]._cur.pid if sb2.pool.workers[0]._cur is not None else None
        assert pid is not None
        bench.cancel()
        await asyncio.gather(bench, return_exceptions=True)
        for _ in range(200):  # reaped within seconds
            if not Path(f"/proc/{pid}").exists():
                break
            await asyncio.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists(), "the cancelled benchmark's worker was left running"
        got = await _within(
            {"next benchmark": sb2.evaluate(candidate(_variant(2)), affine, settings(trials=1))}
        )
        assert got["next benchmark"].status == "ok", got["next benchmark"].error
        await sb2.close()
    finally:
        await sb.close()


async def test_two_sandboxes_on_one_gpu_take_turns_and_a_waiter_is_told_who_holds_it(
    tmp_path, affine: Task
) -> None:
    """Two servers on one machine share its GPU: while one holds it, the other's call waits (bounded) and, past the
    bound, is told which process holds it and for what; a holder killed with -9 leaves no lease behind."""
    root = tmp_path / "machine"
    one, two = _sim(root), _sim(root)
    two.pool.acquire_timeout_s = 1.5
    try:
        async with one.pool.acquire(purpose="a long benchmark of the other server"):
            ev = await two.evaluate(candidate("good_triton"), affine, settings(trials=1))
            assert ev.status == "error"
            assert "stayed in use by another ksearch process" in (ev.error or ""), ev.error
            assert f"pid {os.getpid()}: a long benchmark of the other server" in (ev.error or ""), ev.error
            assert "nothing of this candidate ran" in (ev.error or "")
        ev = await two.evaluate(candidate("good_triton"), affine, settings(trials=1))
        assert ev.status == "ok", ev.error
    finally:
        await asyncio.gather(one.close(), two.close())
    # a process that dies holding the lease (kill -9) drops it with its descriptor
    lease = GpuLease(root, "sim0")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(lease.path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseTimeout):
            await lease.take("a test", timeout_s=0.3)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert await lease.take("a test", timeout_s=5.0) < 5.0
        lease.give_back()
    finally:
        holder.kill()
