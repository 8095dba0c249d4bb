"""Fixtures for the direct tests of the tool functions: a real store in tmp_path, the real sandbox (the Triton
interpreter without a GPU), one sandbox per test module because its worker processes are slow to start, and
the smallest tasks: the built-in row_sum (it has a seed) and a seedless row sum of tiny shapes.

Every tool refusal is checked to leave the store as it was: `snapshot` reads all of a database's rows."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from toolkit import TINY_TASK, Snapshot

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.store import Store


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The path of the seedless tiny row-sum task file."""
    p = tmp_path_factory.mktemp("task") / "tiny_rows.py"
    p.write_text(TINY_TASK)
    return str(p)


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    """One sandbox per module (its workers take seconds to start); its own scratch directory."""
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=120.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.fixture
async def ws(tmp_path: Path, sandbox: LocalSandbox) -> AsyncIterator[Workspace]:
    """A workspace over a fresh database and the module's sandbox. Only the store is closed after the test:
    `Workspace.close` would close the shared sandbox too."""
    store = await Store.open(tmp_path / "k.db")
    try:
        yield Workspace(store, sandbox)
    finally:
        await store.close()


@pytest.fixture
async def bare_ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    """A workspace over a fresh database whose sandbox is never started (tools that only read or edit the
    tree must not need one)."""
    async with await Workspace.open(tmp_path / "k.db") as w:
        yield w
        assert w._sandbox is None, "a tree-only tool started the sandbox"


@pytest.fixture
def snapshot(tmp_path: Path) -> Snapshot:
    """`await snapshot()`: every row of every table of the test's database (read through a second
    connection, as another process would see it), to assert a refused call wrote nothing."""

    async def take() -> dict[str, list[tuple[Any, ...]]]:
        def read() -> dict[str, list[tuple[Any, ...]]]:
            con = sqlite3.connect(tmp_path / "k.db")
            try:
                tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                return {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
            finally:
                con.close()

        return await asyncio.to_thread(read)

    return take
