"""Fixtures for the world-model tests: a fresh file-backed store and a search in it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.worldmodel.models import Search
from ksearch.worldmodel.store import Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "project" / ".ksearch" / "ksearch.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(db_path) as s:
        yield s


@pytest.fixture
async def search(store: Store) -> Search:
    return await store.create_search("demo", "softmax", {"difficulty_cap": 3})
