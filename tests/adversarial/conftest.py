"""Adversarial suite fixtures: one sandbox for the whole module (workers are reused across cases)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("adversarial"), call_timeout_s=120.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)
