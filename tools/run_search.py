"""run_search: start the built-in driver on a search in the background, and follow its progress."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from pydantic import Field

from ksearch.about import IMPORT_ROOT
from ksearch.tools.common import Progress
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace


class RunSearchIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    rounds: int | None = Field(
        None, ge=1, le=10_000, description="Round budget for this run (default: the search's)"
    )
    wait_s: float = Field(
        0.0, ge=0.0, le=3600.0, description="Follow progress for up to this long before returning"
    )


class RunSearchOut(ToolModel):
    search_id: int
    pid: int
    log: str
    running: bool
    round: int
    attempts: int
    best_speedup_vs_eager: float | None
    message: str


async def run_search(
    ws: Workspace, inp: RunSearchIn, db: Path, progress: Progress | None = None
) -> RunSearchOut:
    s = await ws.search(inp.search)
    before_round, before_attempts = s.round, len(await ws.store.attempt_speedups(s.id))
    log = db.parent / "logs" / f"search-{s.id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "ksearch.server.cli",
        "run",
        "--resume",
        str(s.id),
        "--db",
        str(db),
        "--plain",
    ]
    if inp.rounds is not None:
        cmd += ["--rounds", str(inp.rounds)]
    start = log.stat().st_size if log.exists() else 0  # this run's part of the log begins here
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        proc = await asyncio.create_subprocess_exec(  # its own session: the driver outlives this request
            *cmd,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(IMPORT_ROOT),  # `python -m` imports from its cwd first: this copy of ksearch
            env=dict(os.environ),
        )
    finally:
        os.close(fd)
    deadline = time.monotonic() + inp.wait_s
    while time.monotonic() < deadline and proc.returncode is None:
        await asyncio.sleep(1.0)
        if progress is not None:
            cur = await ws.search(s.id)
            n = len(await ws.store.attempt_speedups(s.id))
            await progress(
                f"round {cur.round}, {n} attempts",
                min(1.0, 1 - (deadline - time.monotonic()) / max(inp.wait_s, 1e-9)),
            )
    if proc.returncode not in (None, 0):
        tail = log.read_text(errors="replace")[-2000:]
        raise ToolFailure(f"the driver exited with code {proc.returncode}; end of its log ({log}):\n{tail}")
    cur = await ws.search(s.id)
    speedups = await ws.store.attempt_speedups(s.id)
    running = proc.returncode is None
    return RunSearchOut(
        search_id=s.id,
        pid=proc.pid,
        log=str(log),
        running=running,
        round=cur.round,
        attempts=len(speedups),
        best_speedup_vs_eager=speedups.get(cur.best_attempt_id) if cur.best_attempt_id else None,
        message=(
            "driver running in the background; call get_tree or list_searches to follow it"
            if running
            else _finished(cur.round - before_round, len(speedups) - before_attempts, log, start)
        ),
    )


def _finished(rounds: int, attempts: int, log: Path, start: int) -> str:
    """What a finished run did: its policy, its counts and its log's stop line (a host read only "driver finished"
    from a run whose tuner declined every open intent)."""
    with log.open("rb") as f:
        f.seek(start)
        said = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    policy = next((ln.split("; policy: ", 1)[1] for ln in said if "; policy: " in ln), "")
    stop = next((ln for ln in reversed(said) if ln.startswith("stopped:")), "")
    return (
        f"driver finished: {rounds} round(s) and {attempts} attempt(s) in this run"
        + (f"; policy: {policy}" if policy else "")
        + (f"; {stop}" if stop else "")
        + f" (its log: {log})"
    )
