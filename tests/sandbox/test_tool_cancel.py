"""A cancelled compile leaves no compiler behind: nvcc and its children are killed and reaped."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from unittest import mock

import pytest

from ksearch.gpu.build.compiler import StaticCompiler
from ksearch.gpu.build.procs import communicate_or_kill
from ksearch.gpu.jail import launch as jail
from ksearch.worldmodel.models import Candidate

pytestmark = pytest.mark.anyio

# A stand-in for nvcc that, like nvcc, starts a child (its "ptxas") and waits: both pids go to a file.
FAKE_NVCC = """#!/bin/sh
sleep 120 &
echo $$ $! > "{pids}"
wait
"""

CUDA_CANDIDATE = '''
SRC = """
extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
"""


class ModelNew:
    pass
'''


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not ours counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def _pids(path: Path) -> list[int]:
    for _ in range(1200):  # up to a minute: a loaded CI machine starts a shell slowly
        if path.is_file() and len(path.read_text().split()) == 2:
            return [int(p) for p in path.read_text().split()]
        await asyncio.sleep(0.05)
    raise AssertionError("the fake compiler never started")


async def _gone(pids: list[int]) -> bool:
    for _ in range(
        600
    ):  # the orphaned child is killed at once; its reaping by init may lag (a loaded machine)
        if not any(_alive(p) for p in pids):
            return True
        await asyncio.sleep(0.05)
    return False


def _fake_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "pids"
    exe = tmp_path / "nvcc"
    exe.write_text(FAKE_NVCC.format(pids=pids))
    exe.chmod(0o755)
    return exe, pids


async def test_cancelling_a_compile_kills_nvcc_and_its_children(tmp_path: Path) -> None:
    exe, pid_file = _fake_nvcc(tmp_path)
    compiler = StaticCompiler(tmp_path / "scratch", timeout_s=300)
    compiler.nvcc = str(exe)
    task = asyncio.create_task(compiler.compile(Candidate.of(CUDA_CANDIDATE, "cuda")))
    pids = await _pids(pid_file)
    assert all(_alive(p) for p in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(pids), f"still running after the cancel: {[p for p in pids if _alive(p)]}"


async def test_a_timeout_kills_the_group_and_says_so(tmp_path: Path) -> None:
    exe, pid_file = _fake_nvcc(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        str(exe), stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    with pytest.raises(TimeoutError):
        await communicate_or_kill(proc, 1.0)
    assert proc.returncode is not None  # reaped before the error went on
    assert await _gone(await _pids(pid_file))


async def test_a_tool_that_finishes_returns_its_output(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", "echo done", stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    assert await communicate_or_kill(proc, 10) == b"done\n"


def test_the_jail_probe_runs_in_its_own_session() -> None:
    """A Ctrl-C at the terminal signals the terminal's process group; the probe must not be in it."""
    jail.unavailable_reason.cache_clear()
    done = subprocess.CompletedProcess([], 0, stdout="1 1\n", stderr="")  # processes, network interfaces
    try:
        with (
            mock.patch.object(jail.platform, "system", return_value="Linux"),
            mock.patch.object(jail.subprocess, "run", return_value=done) as run,
        ):
            assert jail.unavailable_reason() is None
        assert run.call_args.kwargs.get("start_new_session") is True
    finally:
        jail.unavailable_reason.cache_clear()
