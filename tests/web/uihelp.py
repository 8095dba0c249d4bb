"""Helpers for the UI tests: store access from sync code, `ksearch ui` in a child process, Chromium settings."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from ksearch.worldmodel.store import Store

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
T = TypeVar("T")

CHROMIUM = os.environ.get("KSEARCH_CHROMIUM", "/usr/bin/chromium")
TIMEOUT_MS = 15_000  # a page fetching from a server on a loaded 2-core CI machine
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def subprocess_env() -> dict[str, str]:
    """The environment for child processes: the repo and this folder importable."""
    extra = os.pathsep.join([str(REPO), str(HERE)])
    old = os.environ.get("PYTHONPATH")
    mine = {k: v for k, v in os.environ.items() if k != "KSEARCH_TOKEN"}  # a test that wants one passes it
    return {**mine, "PYTHONPATH": extra + (os.pathsep + old if old else "")}


def arun(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even where Playwright's sync API owns this thread's loop."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def with_store(db: Path, fn: Callable[[Store], Awaitable[T]]) -> T:
    """`fn(store)` on a fresh connection to `db` (as another process would see it)."""

    async def go() -> T:
        store = await Store.open(db)
        try:
            return await fn(store)
        finally:
            await store.close()

    return arun(go())


class UiProcess:
    """`ksearch ui` in a child process on a free port, as a user would start it."""

    def __init__(self, db: Path, search: str | None = None, *extra: str) -> None:
        args = ["ui", *([search] if search else []), "--db", str(db), "--port", "0", *extra]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ksearch.server.cli", *args],
            cwd=REPO,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 60
        self.url = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"(http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            self.stop()
            raise AssertionError("ksearch ui did not start:\n" + "".join(seen))
        self.base = self.url.split("/s/")[0].rstrip("/")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
