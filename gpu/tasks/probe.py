"""Run a task's own code in a subprocess: scrubbed environment, jailed where the machine allows it.

A task file is code like a candidate: the process that asks (the MCP server, the CLI) never runs it
itself and never imports torch for it. The subprocess gets the same allow-listed environment as a
worker (no API keys) and, where user namespaces work, the same jail (gpu/jail/launch.py): no network, no GPU, a
view of the Python environment and of the task's own files (`where`, or `readable`), writing only into a
throwaway home directory, which is also where the caller's input files are placed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.scrub import scrubbed_env
from ksearch.gpu.jail.zygote import PROBE_PROGRAM
from ksearch.gpu.jail.zygote_client import ZygoteUnavailable, forking, run_forked, zygote_for
from ksearch.gpu.task import TaskError

START_TIMEOUT_S = 120.0  # a zygote's start: torch's imports, seconds on a busy machine


class ProbeFailed(TaskError):
    """The subprocess could not be started, ran too long, or exited non-zero (the message says which)."""


def run_probe(
    args: list[str],
    *,
    where: Path,
    what: str,
    timeout_s: float,
    files: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    readable: Sequence[str] | None = None,
) -> str:
    """Run `python ARGS` in `where` and return its stdout.

    `files` are written into the subprocess's home first; an argument `{home}` is replaced by that
    directory's path. `what` completes error messages: "<where>: running the file to <what> ...".
    `readable`: the files the code may read (default `where` itself).
    """
    cwd = where if where.is_dir() else where.parent
    with tempfile.TemporaryDirectory(prefix="ksearch-task-probe-") as home:
        for name, text in (files or {}).items():
            (Path(home) / name).write_text(text)
        cmd = [sys.executable, *(a.replace("{home}", home) for a in args)]
        try:
            jailed, _ = jail.resolve(os.environ.get("KSEARCH_ISOLATION", "auto"))
        except (ValueError, OSError) as exc:
            raise ProbeFailed(f"{where}: cannot run the file to {what}: {exc}") from None
        if jailed:
            cmd = jail.wrap(cmd, [Path(home)], readable=[str(where)] if readable is None else readable)
        env = scrubbed_env(home=Path(home), extra=extra_env)
        try:
            code, out, err = _forked(cmd, env, cwd, timeout_s) or _started(cmd, env, cwd, timeout_s)
        except (subprocess.TimeoutExpired, TimeoutError):
            raise ProbeFailed(f"{where}: running the file to {what} took over {timeout_s:.0f} s") from None
        except (OSError, ValueError) as exc:
            raise ProbeFailed(f"{where}: cannot run the file to {what}: {exc}") from None
    if code != 0:
        tail = err.strip().splitlines()[-1:] or [f"exit status {code}, no output"]
        raise ProbeFailed(f"{where}: running the file to {what} failed: {tail[0]}")
    return out


def _started(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> tuple[int, str, str]:
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, env=env
    )
    return proc.returncode, proc.stdout, proc.stderr


def _forked(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> tuple[int, str, str] | None:
    """The task-facts probe forked from this process's probe zygote (torch and FakeTensorMode's imports made once,
    not per probe: 0.15 s a probe instead of 2.9 on a 2-core machine, bench/probe_start.py); None where it cannot
    be (another program, the zygote failed, KSEARCH_FORK_WORKERS=0): the caller starts the process the usual way."""
    if not forking():
        return None
    z = zygote_for(env, START_TIMEOUT_S, PROBE_PROGRAM)
    if not z.fits(cmd, env):
        return None
    try:
        return run_forked(z, cmd, env, cwd, timeout_s)
    except ZygoteUnavailable:  # the zygote logged why; from now on its probes start the usual way
        return None
