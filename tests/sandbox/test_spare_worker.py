"""A worker slot keeps a spare process started ahead: a killed worker is replaced by it at once (no cold
start for the next caller), the next spare starts only once the call after a takeover is done, a baseline
is never measured in a spare, and closing the sandbox ends it too."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ksearch.gpu.sandbox import LocalSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


async def _gone(pid: int, within_s: float = 20.0) -> bool:
    """Whether the process has left /proc (reaped) within `within_s`."""
    for _ in range(int(within_s / 0.05)):
        if not Path(f"/proc/{pid}").exists():
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.slow
async def test_a_dead_worker_is_replaced_at_once_by_its_spare(tmp_path, affine, cand, st) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, spare_workers=True)
    w = sb.pool.workers[0]
    try:
        sb.show(affine)  # a jailed worker shows the task's file from its start
        await sb.start()
        assert await w.wait_spare() is None  # none before the slot's process is first given back
        assert (await sb.correctness(cand("good_triton"), affine, st("small"))).status == "ok"
        assert w.hello is not None
        first, first_dir = w.hello["pid"], w.scratch
        spare = await w.wait_spare()
        assert spare is not None and spare != first
        assert os.getpgid(spare) != os.getpgid(first)  # its own group: its memory is watched on its own
        starts = w.starts
        ev = await sb.correctness(cand("exits"), affine, st("small"))
        assert ev.status == "crash", ev.error
        # the spare took over as the crashed call gave the slot back: nothing started, nothing awaited
        assert w.alive and w.hello is not None and w.hello["pid"] == spare
        assert (w.starts, w.spares_taken) == (starts + 1, 1)
        assert w.hello["mode"] == "candidate" and not w.ran_candidate  # it never ran a candidate before
        assert await w.wait_spare() is None  # the next one waits until the slot is given back alive
        ok = await sb.correctness(cand("good_triton"), affine, st("small"))
        assert ok.status == "ok", ok.error
        assert w.hello["pid"] == spare and w.ran_candidate
        nxt = await w.wait_spare()  # a new spare, started as that call gave the slot back
        assert nxt is not None and nxt not in (first, spare)
        assert await _gone(first)  # the crashed process was reaped
        assert first_dir.name == "w0-001" and not first_dir.exists()  # and its directory removed
    finally:
        await sb.close()
    assert await _gone(spare, 5.0) and await _gone(nxt, 5.0)  # close ends the spare too


@pytest.mark.slow
async def test_a_baseline_process_is_never_the_spare(tmp_path) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, spare_workers=True)
    try:
        async with sb.pool.acquire():
            pass  # started, then given back: its spare starts
        async with sb.pool.acquire() as w:
            spare = await w.wait_spare()
            assert spare is not None
            await w.restart("baseline")  # a cold start: a baseline has caches no candidate process uses
            assert w.hello is not None and w.hello["mode"] == "baseline"
            assert w.hello["pid"] != spare and w.spares_taken == 0
            assert await w.wait_spare() == spare  # still waiting, in candidate mode
            await w.restart("candidate")
            assert w.hello["pid"] == spare and w.spares_taken == 1 and w.hello["mode"] == "candidate"
    finally:
        await sb.close()


@pytest.mark.slow
async def test_without_spares_a_dead_worker_is_started_cold(tmp_path, affine, cand, st) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, spare_workers=False)
    w = sb.pool.workers[0]
    try:
        sb.show(affine)  # a jailed worker shows the task's file from its start
        await sb.start()
        assert await w.wait_spare() is None
        ev = await sb.correctness(cand("exits"), affine, st("small"))
        assert ev.status == "crash", ev.error
        assert not w.alive  # its replacement is still starting
        ok = await sb.correctness(cand("good_triton"), affine, st("small"))
        assert ok.status == "ok" and w.spares_taken == 0 and w.starts == 2
    finally:
        await sb.close()
