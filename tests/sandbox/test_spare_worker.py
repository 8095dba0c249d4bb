"""A worker slot keeps a spare process started ahead: a killed worker is replaced by it at once (no cold
start for the next caller) and the next spare starts once the call after the takeover is done; where a task's
checks outlast a start, a new candidate's takeover starts the next spare at once and the timing waits for its
start, so back-to-back new candidates each find one ready; a baseline is never measured in a spare, and closing
the sandbox ends it too."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ksearch.gpu.sandbox import steps as sandbox_steps
from ksearch.gpu.sandbox.local import LocalSandbox

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
    # the same process for every candidate, as on a CPU (on a GPU a new candidate's load would take the spare)
    sb = LocalSandbox(
        scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, spare_workers=True, fresh_per_candidate=False
    )
    w = sb.pool.workers[0]
    try:
        sb.show(affine)  # a jailed worker shows the task's file from its start
        await sb.start()
        assert await w.wait_spare() is None  # none before the slot is first handed to a caller
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
def _sandbox_per_candidate(tmp_path: Path) -> LocalSandbox:
    # baselines in the candidate's process, as on a CPU (on a GPU the first call's clean baseline process hands
    # the slot to the spare at its end, and the next candidate then runs in that fresh process)
    return LocalSandbox(
        scratch_dir=tmp_path,
        n_workers=1,
        call_timeout_s=60.0,
        spare_workers=True,
        fresh_per_candidate=True,
        clean_baselines=False,
    )


@pytest.mark.slow
async def test_back_to_back_new_candidates_each_find_a_spare_ready(
    tmp_path, affine, cand, st, monkeypatch
) -> None:
    """Where a task's checks outlast a process start (here: any task), each new candidate's takeover starts the
    next spare at once and the timing waits for that start, so when the call returns the next spare is ready and
    the following candidate's fresh process costs a handoff, not a cold start."""
    monkeypatch.setattr(sandbox_steps, "SPARE_HIDDEN", 0.0)
    sb = _sandbox_per_candidate(tmp_path)
    w = sb.pool.workers[0]
    src = cand("good_triton").source
    try:
        sb.show(affine)
        await sb.start()
        evs = []
        for i in range(3):  # back to back: no pause for a spare to start between the calls
            ev = await sb.evaluate(cand(f"{src}\n# variant {i}\n"), affine, st("small"))
            assert ev.status == "ok", ev.error
            assert ev.timings, "timed"
            if i:  # the first call's process is the slot's first: no takeover, its spare starts at the reply
                # the spare for the next candidate is ready the moment this call returns (it started at this
                # call's takeover, and the timing waited for its start), not starting behind the reply
                assert w.spare_ready, f"call {i}: no spare ready as the call returned"
            evs.append(ev)
        assert w.spares_taken == 2 and w.starts == 3
        for ev in evs[1:]:
            # a handoff to a started process: no imports, no CUDA context waited for (the spare's pid is checked
            # below; the bound only catches a cold start's seconds, with room for a loaded 2-core machine: 1.07 s seen)
            # (no step at all: the baselines' own restart had already given it a process that ran no candidate)
            assert ev.seconds_by_step.get("fresh_worker", 0.0) < 2.0, ev.seconds_by_step
        pids = {w.hello["pid"], await w.wait_spare()}
        assert len(pids) == 2
    finally:
        await sb.close()


@pytest.mark.slow
async def test_where_checks_are_quicker_than_a_start_the_next_spare_starts_behind_the_reply(
    tmp_path, affine, cand, st, monkeypatch
) -> None:
    """A quick task's checks would not hide a start: its timing would wait for one. The next spare then starts
    when the call gives the slot back (behind the reply, while the model reads it), and no timing waits."""
    # every check quicker than a start (here a forked start can be the quicker: the threshold says which)
    monkeypatch.setattr(sandbox_steps, "SPARE_HIDDEN", 1e9)
    sb = _sandbox_per_candidate(tmp_path)
    w = sb.pool.workers[0]
    src = cand("good_triton").source
    try:
        sb.show(affine)
        await sb.start()
        for i in range(3):
            ev = await sb.evaluate(cand(f"{src}\n# quick {i}\n"), affine, st("small"))
            assert ev.status == "ok", ev.error
            assert "wait_for_spare" not in ev.seconds_by_step, ev.seconds_by_step
            assert w.start_s is not None
            assert not w.spare_ready  # none started under the call: the next starts as the slot is given back
            await w.wait_spare()  # the model's reading time, in which that spare starts
        assert w.spares_taken == 2
    finally:
        await sb.close()


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
