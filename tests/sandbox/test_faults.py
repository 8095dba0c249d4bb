"""Crashes, hangs and memory hogs end only their worker; the next candidate evaluates normally."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def tight(tmp_path_factory):
    """A sandbox with a short call timeout and a low host-memory limit. The timeout leaves the memory hog
    time to write past the limit on a loaded 2-core machine (it took over 8 s there)."""
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("tight"), call_timeout_s=20.0, memory_limit_gb=2.5)
    try:
        yield sb
    finally:
        await sb.close()


async def _then_good(sb, affine, cand, st) -> None:
    ev = await sb.evaluate(cand("good_triton"), affine, st("small"))
    assert ev.status == "ok", ev.error


@pytest.mark.slow
async def test_process_exit_is_a_crash_and_the_pool_recovers(tight, affine, cand, st) -> None:
    tight.show(affine)  # a jailed worker shows the task's file from its start
    await tight.start()
    w = tight.pool.workers[0]
    starts = w.starts
    ev = await tight.correctness(cand("exits"), affine, st("small"))
    assert ev.status == "crash"
    assert ev.correctness[0].kind == "crash" and "status 7" in ev.error
    await _then_good(tight, affine, cand, st)
    assert w.starts == starts + 1 and w.alive  # exactly one replacement worker


@pytest.mark.slow
async def test_segfault_is_a_crash_naming_the_signal(tight, affine, cand, st) -> None:
    ev = await tight.correctness(cand("segfault"), affine, st("small"))
    assert ev.status == "crash" and "SIGSEGV" in ev.error
    await _then_good(tight, affine, cand, st)


@pytest.mark.slow
async def test_hang_times_out_and_the_pool_recovers(tight, affine, cand, st) -> None:
    pid_before = tight.pool.workers[0].hello["pid"]
    ev = await tight.correctness(cand("hangs"), affine, st("small"))
    assert ev.status == "timeout"
    assert ev.correctness[0].kind == "timeout" and "hang" in ev.error
    assert 20.0 <= ev.seconds < 60.0
    await _then_good(tight, affine, cand, st)
    assert tight.pool.workers[0].hello["pid"] != pid_before  # a fresh worker took over


@pytest.mark.slow
async def test_host_memory_limit(tight, affine, cand, st) -> None:
    ev = await tight.correctness(cand("host_hog"), affine, st("small"))
    assert ev.status == "crash" and "host-memory limit" in (ev.error or ""), (ev.status, ev.error)
    await _then_good(tight, affine, cand, st)


@pytest.mark.slow
async def test_worker_environment_is_scrubbed(tmp_path_factory, affine, cand, st, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("TORCH_SECRET_TOKEN", "also-secret")  # an allowed prefix does not let a secret through
    monkeypatch.setenv("HOME", "/root-home-of-parent")
    scratch = tmp_path_factory.mktemp("scrub")
    sb = LocalSandbox(scratch_dir=scratch, call_timeout_s=60.0)
    try:
        ev = await sb.correctness(cand("env_probe"), affine, st("small"))
    finally:
        await sb.close()
    assert ev.status == "error"
    msg = ev.correctness[0].message
    assert "ENV" in msg
    assert "sk-do-not-leak" not in msg and "FAKE_API_KEY" not in msg and "TORCH_SECRET_TOKEN" not in msg
    assert '"secret": null' in msg
    assert "PATH" in msg
    seen = json.loads(msg[msg.index("ENV") + 3 :].split("\n")[0])
    home = Path(seen["home"])
    # HOME is the worker process's own scratch dir
    assert home.name == "w0-001" and home.is_relative_to(scratch.resolve())
    assert seen["cwd"] == seen["home"]
    assert os.environ["FAKE_API_KEY"] == "sk-do-not-leak"  # the parent keeps its own environment


@pytest.mark.slow
async def test_ceilings_measured_on_the_held_worker_never_wait_for_the_pool(tmp_path, monkeypatch) -> None:
    """Timing asks for the GPU's ceilings while it holds the only worker: they must be measured on
    that worker, not on one acquired from the (empty) pool, which would wait forever."""
    import asyncio

    from ksearch.worldmodel.models import Environment

    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=30.0)
    real_env = sb._environment

    async def as_if_gpu() -> Environment:  # so that ceilings are measured, here on the CPU
        return (await real_env()).model_copy(update={"cpu_mode": False})

    monkeypatch.setattr(sb, "_environment", as_if_gpu)
    try:
        async with sb.pool.acquire() as held:
            ceil = await asyncio.wait_for(sb.ceilings(held), 60)
        assert "copy_bandwidth_Bps" in ceil  # the held worker answered (no GPU here: no figure)
    finally:
        await sb.close()
