"""A kernel that faults on the GPU (an illegal memory address poisons the CUDA context): the evaluation is
a recorded crash naming the error, the worker is replaced, and the next candidate evaluates normally."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.run_correctness import RunCorrectnessIn, run_correctness
from ksearch.tools.workspace import StoreCache, Workspace
from ksearch.worldmodel.store import Store
from tests.faults.faultkit import SEED, attempts, integrity

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]

ILLEGAL_ADDRESS = """
import torch
import triton
import triton.language as tl


@triton.jit
def _far_away(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs + (1 << 40))  # a terabyte past the input: no allocation is there
    tl.store(y_ptr + offs, v)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _far_away[(1,)](x, y, BLOCK=128)
        return y
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_illegal_address_is_a_recorded_crash_and_the_pool_recovers(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    store = await Store.open(db)
    sandbox = LocalSandbox(n_workers=1, scratch_dir=tmp_path / "sandbox", cache=StoreCache(store))
    async with Workspace(store, sandbox) as ws:
        await create_search(ws, CreateSearchIn(task="softmax", name="g", seed=11))
        ok = await run_correctness(
            ws,
            RunCorrectnessIn(search="g", candidate=CandidateRef(source=SEED), workloads=["smoke"], trials=1),
        )
        assert ok.evaluation.status == "ok", ok.summary
        pid_before = sandbox.pool.workers[0].hello["pid"]  # type: ignore[index]

        bad = await benchmark(
            ws,
            BenchmarkIn(
                search="g", candidate=CandidateRef(source=ILLEGAL_ADDRESS), workloads=["smoke"], trials=1
            ),
        )
        ev = bad.evaluation
        assert ev.status == "crash", bad.summary
        assert "illegal" in (ev.error or "").lower() or "cuda" in (ev.error or "").lower(), ev.error
        assert bad.attempt_id is not None

        again = await run_correctness(
            ws,
            RunCorrectnessIn(search="g", candidate=CandidateRef(source=SEED), workloads=["smoke"], trials=2),
        )
        assert again.evaluation.status == "ok", again.summary
        assert sandbox.pool.workers[0].hello["pid"] != pid_before  # type: ignore[index]
    rows = attempts(db)
    assert [r[7] for r in rows.values()] == ["crash"]
    assert integrity(db) == "ok"
