"""A candidate leaves a thread running in its worker (it could as well patch a module the guard does not watch, or
leave GPU work queued): the next candidate must not share that process. With `fresh_per_candidate` (the default
on a GPU) each new candidate is loaded in a process that ran no other candidate's code; the same candidate again
keeps its process. Without it (the CPU's default) a worker that reports threads candidate code left running is
still replaced before another candidate loads; one that reports none is kept. Real sandbox, real worker
processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task

pytestmark = pytest.mark.anyio

GOOD = (Path(__file__).parent / "fixtures" / "candidates" / "good_triton.py").read_text()
# leaves a thread behind that outlives its module (it keeps what it needs in its own frame)
LEAVER = GOOD.replace(
    "BLOCK = 64",
    "BLOCK = 64\nimport threading, time\n\n\ndef _spin(sleep=time.sleep):\n    while True:\n        sleep(0.01)\n\n\n"
    "threading.Thread(target=_spin, daemon=True, name='left-behind').start()\n",
)
# fails its import where a thread of another candidate still runs in its process
LOOKS = GOOD.replace(
    "BLOCK = 64",
    "BLOCK = 64\nimport threading\nassert not [t for t in threading.enumerate() if t.name == 'left-behind'], "
    "'a thread another candidate left runs in this process'\n",
)


@pytest.mark.parametrize("fresh", [True, False])
async def test_a_thread_one_candidate_leaves_is_not_in_the_next_ones_process(
    tmp_path: Path, affine: Task, cand: Any, st: Any, fresh: bool
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, fresh_per_candidate=fresh)
    w = sb.pool.workers[0]
    try:
        assert (await sb.correctness(cand(LEAVER), affine, st("small"))).status == "ok"
        assert w.hello is not None
        leaver_pid = w.hello["pid"]
        again = await sb.correctness(cand(LEAVER), affine, st("small"))  # the same candidate: its own process
        assert again.status == "ok" and w.hello["pid"] == leaver_pid
        assert "fresh_worker" not in again.seconds_by_step
        ev = await sb.correctness(cand(LOOKS), affine, st("small"))
        assert ev.status == "ok", ev.error  # without the fresh process: "a thread another candidate left ..."
        assert w.hello["pid"] != leaver_pid and "fresh_worker" in ev.seconds_by_step
    finally:
        await sb.close()


async def test_without_fresh_per_candidate_a_worker_no_thread_was_left_in_is_kept(
    tmp_path: Path, affine: Task, cand: Any, st: Any
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, fresh_per_candidate=False)
    w = sb.pool.workers[0]
    try:
        assert (await sb.correctness(cand(GOOD), affine, st("small"))).status == "ok"
        assert w.hello is not None
        pid = w.hello["pid"]
        ev = await sb.correctness(cand(GOOD + "\n# another candidate\n"), affine, st("small"))
        assert ev.status == "ok", ev.error
        assert w.hello["pid"] == pid and "fresh_worker" not in ev.seconds_by_step
    finally:
        await sb.close()


async def test_the_machine_facts_outlive_the_process_that_said_them(
    tmp_path: Path, affine: Task, cand: Any, st: Any
) -> None:
    """Between a candidate's process and the next one's start, the slot still says the machine's facts (device,
    versions): an evaluation that read them in that gap (another item of a batch) once recorded an unknown device."""
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, fresh_per_candidate=True)
    w = sb.pool.workers[0]
    try:
        assert (await sb.correctness(cand(GOOD), affine, st("small"))).status == "ok"
        first = w.hello
        assert first is not None and first.get("device")
        starting = asyncio.create_task(w.restart("candidate"))  # a fresh process, not started yet
        await asyncio.sleep(0)
        assert w.hello is not None and w.hello["device"] == first["device"]
        await starting
        assert w.hello["pid"] != first["pid"]  # the new process's own, once it has started
    finally:
        await sb.close()
