"""Fixtures for the direct tests of the tool functions: a real store in tmp_path, the real sandbox (the Triton
interpreter without a GPU), one sandbox per test module because its worker processes are slow to start, and
the smallest tasks: the built-in row_sum (it has a seed) and a seedless row sum of tiny shapes.

Every tool refusal is checked to leave the store as it was: `snapshot` reads all of a database's rows."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.sandbox import LocalSandbox
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.store import Store

ROOT = Path(__file__).resolve().parents[2]
ROW_SUM_SEED = (ROOT / "gpu" / "tasks" / "builtin" / "row_sum" / "seed_triton.py").read_text()
# the seed with each row sum doubled: compiles and runs, wrong values
WRONG_ROW_SUM = ROW_SUM_SEED.replace("tl.sum(acc, axis=0))", "tl.sum(acc, axis=0) * 2.0)")
# the seed with its entry point renamed: parses, but defines no ModelNew, so it does not compile
NO_MODELNEW = ROW_SUM_SEED.replace("class ModelNew(", "class ModelOld(")
NOT_PYTHON = "import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n"

# A seedless task (every KernelBench, GPU MODE and FlashInfer-Bench task is): a row sum with a search, a
# held-out and a smoke workload, all small enough for the interpreter.
TINY_TASK = '''"""Row sum of a small fp32 matrix (the tools tests' seedless task)."""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "row_sum", "dtype": "float32", "bound": "memory", "title": "Row sum (tools tests)"}

WORKLOADS = [
    {"name": "wide", "params": {"M": 16, "N": 300}, "split": "search"},
    {"name": "tall", "params": {"M": 40, "N": 64}, "split": "search"},
    {"name": "heldout", "params": {"M": 24, "N": 200}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 8, "N": 100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-3}, "rtol": {"float32": 1e-5}}


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs(M=16, N=300):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
'''

Snapshot = Callable[[], Awaitable[dict[str, list[tuple[Any, ...]]]]]


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
def facts_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("facts")


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    """One sandbox per module (its workers take seconds to start); its own scratch directory."""
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=120.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.fixture
async def ws(
    tmp_path: Path, sandbox: LocalSandbox, facts_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Workspace]:
    """A workspace over a fresh database and the module's sandbox. Only the store is closed after the test:
    `Workspace.close` would close the shared sandbox too."""
    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(facts_cache))
    store = await Store.open(tmp_path / "k.db")
    try:
        yield Workspace(store, sandbox)
    finally:
        await store.close()


@pytest.fixture
async def bare_ws(
    tmp_path: Path, facts_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Workspace]:
    """A workspace over a fresh database whose sandbox is never started (tools that only read or edit the
    tree must not need one)."""
    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(facts_cache))
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
