"""Nsight Compute on one workload: the candidate runs under ncu (jailed like a worker) on the GPU of a
worker the caller holds, and ncu's report is read back as a ProfileSummary."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

from ksearch.gpu.build.procs import communicate_or_kill
from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.scrub import scrubbed_env
from ksearch.gpu.sandbox.api import SandboxError
from ksearch.gpu.sandbox.pool import WorkerProcess, compiler_cache_env
from ksearch.gpu.sandbox.run import task_json
from ksearch.gpu.task import Task
from ksearch.gpu.timing import ncu
from ksearch.worldmodel.models import Candidate, ProfileSummary

PROFILED_CALLS = 5  # ncu's duration is the median of this many profiled calls (one alone varies ~4%)


async def profile_on(
    w: WorkerProcess,
    candidate: Candidate,
    task: Task,
    workload: str,
    kernel: str | None,
    *,
    session: Path,
    shared: Path,
    jailed: bool,
    timeout_s: float,
) -> ProfileSummary:
    """Run ncu while holding worker `w`, so nothing else runs on its GPU meanwhile; `session`: the
    sandbox's own directory, `shared`: the compiler caches, `timeout_s`: for each ncu run."""
    exe = ncu.find_ncu()
    if exe is None:
        raise SandboxError(
            "Nsight Compute (ncu) is not installed on this machine: install the CUDA toolkit's "
            "nsight-compute or put ncu on PATH; timing and correctness work without it"
        )
    work = session / f"profile{w.slot}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = {
        "task": task_json(task),
        "workload": workload,
        "seed": 0,
        "calls": PROFILED_CALLS,
        "candidate": {"id": candidate.id, "language": candidate.language, "source": candidate.source},
    }
    (work / "spec.json").write_text(json.dumps(spec))
    report = str(work / "profile.ncu-rep")
    cmd = ncu.ncu_command(
        exe,
        [sys.executable, "-m", "ksearch.gpu.worker.profile_driver", str(work / "spec.json")],
        report,
        kernel,
    )
    devices, visible = w.gpu_view()
    if jailed:  # the candidate runs under ncu here: the same walls as in a worker
        await asyncio.to_thread(shared.mkdir, parents=True, exist_ok=True)
        cmd = jail.wrap(
            cmd,
            [work],
            caches=[shared],
            readable=jail_view.task_paths(task),
            devices=devices,
            limits=w.limits,
        )
    env = scrubbed_env(home=work, extra={"CUDA_VISIBLE_DEVICES": visible, **compiler_cache_env(shared)})
    rc, text = await run_tool(cmd, work, env, timeout_s)
    if rc == 3 or "candidate failed under the profiler" in text:
        msg = next((ln for ln in text.splitlines() if "candidate failed" in ln), text[-800:])
        raise SandboxError(f"the candidate failed while being profiled: {msg}")
    _, details = await run_tool(ncu.import_command(exe, report, "details"), work, env, timeout_s)
    _, raw = await run_tool(ncu.import_command(exe, report, "raw"), work, env, timeout_s)
    try:
        return ncu.parse_details(details, workload, kernel, raw_text=raw)
    except ncu.ProfileError as e:
        raise SandboxError(f"{e}{ncu.explain(text)}") from None


async def run_tool(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[int, str]:
    """Run a tool in its own process group with a timeout; (exit status, stdout + stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,  # never the MCP host's pipe
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out = await communicate_or_kill(proc, timeout_s)  # cancelled: the group is killed
    except TimeoutError:
        raise SandboxError(f"{Path(cmd[0]).name} did not finish within {timeout_s:.0f} s") from None
    return proc.returncode or 0, out.decode(errors="replace")
