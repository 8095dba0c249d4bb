"""A candidate that floods its output until its call times out is said to flood it, not to hang."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.sandbox.steps import FLOOD_BYTES

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def short(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("flood"), call_timeout_s=15.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.mark.slow
async def test_a_flood_of_output_is_named_not_called_a_hang(short, affine, cand, st) -> None:  # type: ignore[no-untyped-def]
    ev = await short.correctness(cand("floods_output"), affine, st("small"))
    assert ev.status == "timeout", ev.error
    assert ev.error is not None and "flooding its output" in ev.error, ev.error
    assert "probably hangs" not in ev.error
    assert ev.correctness[0].kind == "timeout" and "flooding its output" in ev.correctness[0].message
    printed = int(ev.error.split("it printed ", 1)[1].split(" MiB", 1)[0])
    assert printed * 2**20 >= FLOOD_BYTES * 0.99
    good = await short.evaluate(cand("good_triton"), affine, st("small"))  # and the pool recovers
    assert good.status == "ok", good.error
