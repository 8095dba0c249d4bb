"""Helpers for the fault tests: running `ksearch` as a subprocess in an isolated scratch area, finding
sandbox workers from outside, and snapshots of what the database has committed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ksearch.gpu.jail import zygote
from ksearch.gpu.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
SEED = load_task("softmax").seeds["triton"]

# The seed, slowed down inside the timed call: it leaves a marker in its scratch directory (its HOME)
# and sleeps, so a test knows the worker is busy with it.
SLOW_SEED = (
    SEED
    + """

_Fast = ModelNew


class ModelNew(_Fast):
    def forward(self, x):
        import os
        import pathlib
        import time

        pathlib.Path(os.environ["HOME"], "busy.marker").write_text(str(os.getpid()))
        time.sleep(300)
        return super().forward(x)
"""
)


def ksearch_env(scratch: Path, **extra: str) -> dict[str, str]:
    """The environment of a `ksearch` subprocess: no API keys, the Triton interpreter, and TMPDIR in
    `scratch` so that its sandbox workers get their own scratch root (and can be found there)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KSEARCH_DB")
    }
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    scratch.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(scratch)
    env["COLUMNS"] = "200"  # fewer wrapped lines in the driver's plain output
    env.update(extra)
    return env


def ksearch(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def start_ksearch(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`ksearch ARGS` started in the background; stdout and stderr come back apart (communicate())."""
    return subprocess.Popen(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def result_json(stdout: str) -> dict[str, Any]:
    """The JSON document `ksearch run --json` prints last."""
    return json.loads(
        stdout[stdout.rindex("\n{\n") + 1 :] if "\n{\n" in stdout else stdout[stdout.index("{") :]
    )


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def worker_pids(parent: int | None = None, scratch: Path | None = None, *, itself: bool = False) -> list[int]:
    """Live sandbox worker processes (`python -m ksearch.gpu.worker.main`, and the ksearch.gpu.jail.launch processes around it
    unless `itself`): children of `parent`, and/or whose working directory is under `scratch`.
    Zombies are left out. PIDs are the host's (a jailed worker is PID 2 in its own namespace)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        fields = _stat(pid)
        cmd = _cmdline(pid)
        comm = _comm(pid)  # a worker forked from the zygote has the zygote's command line and its own name
        forked = comm in (zygote.WORKER_NAME, zygote.JAIL_NAME)
        if fields is None or fields[0] == "Z" or not (b"ksearch.gpu.worker.main" in cmd or forked):
            continue
        if itself and (b"ksearch.gpu.jail.launch" in cmd or comm == zygote.JAIL_NAME):
            continue
        if parent is not None and int(fields[1]) != parent:
            continue
        if scratch is not None:
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if not cwd.startswith(str(scratch.resolve())):
                continue
        found.append(int(pid))
    return sorted(found)


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)


def attempts(db: Path) -> dict[int, tuple[Any, ...]]:
    """id -> the whole committed attempt row (evaluation JSON included)."""
    if not db.exists():
        return {}
    con = connect(db)
    try:
        return {r[0]: tuple(r) for r in con.execute("SELECT * FROM attempts ORDER BY id")}
    except sqlite3.OperationalError as e:  # created, but its schema not yet committed
        assert "no such table" in str(e), e
        return {}
    finally:
        con.close()


def committed(db: Path) -> dict[str, dict[int, tuple[Any, ...]]]:
    """The append-only record: attempts, the edit log, LLM calls and candidates, keyed by id."""
    if not db.exists():
        return {}
    con = connect(db)
    try:
        out = {}
        for table, key in (("attempts", "id"), ("edits", "id"), ("llm_calls", "id"), ("candidates", "id")):
            out[table] = {r[0]: tuple(r) for r in con.execute(f"SELECT * FROM {table} ORDER BY {key}")}
        return out
    except sqlite3.OperationalError as e:
        assert "no such table" in str(e), e
        return {}
    finally:
        con.close()


def integrity(db: Path) -> str:
    con = connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def node_statuses(db: Path) -> list[str]:
    con = connect(db)
    try:
        return [r[0] for r in con.execute("SELECT status FROM nodes ORDER BY id")]
    finally:
        con.close()
