"""The driver's implementations written at once (`branching`) are benchmarked as one batch (tools.benchmark_batch) and
recorded in the order written, each as the attempt it is; on a real store and the real sandbox (CPU interpreter)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ksearch.server.driver import loop as driver_loop
from ksearch.server.driver.display import Display
from ksearch.server.driver.loop import Driver, DriverOptions
from ksearch.server.driver.policies.base import Policy
from ksearch.tools.create_search import CreateSearchIn, DriverSettings, create_search
from ksearch.tools.prompting.phase_models import CodeResult, UpdateResult
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from tests.tools.toolkit import ROW_SUM_SEED, TINY_TASK, WRONG_ROW_SUM

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


class TwoAtOnce(Policy):
    """Writes a wrong and a correct implementation for attempt indexes 0 and 1 of each write."""

    name = "two"
    model = "two"

    async def init(self, ctx: Any) -> Any:
        raise AssertionError("not used: the intents are proposed by the test")

    async def write_code(self, ctx: Any) -> CodeResult:
        source = WRONG_ROW_SUM if ctx.attempt_index % 2 == 0 else ROW_SUM_SEED
        return CodeResult(source=source + f"\n# attempt index {ctx.attempt_index}\n")

    async def update(self, ctx: Any) -> UpdateResult:
        return UpdateResult(reflection="two at once")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_implementations_written_at_once_are_benchmarked_as_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    real = driver_loop.benchmark_batch

    async def counted(ws: Workspace, inp: Any, progress: Any = None) -> Any:
        batches.append(len(inp.items))
        return await real(ws, inp, progress)

    monkeypatch.setattr(driver_loop, "benchmark_batch", counted)
    task = tmp_path / "tiny_rows.py"  # seedless: the first round needs no measured seed
    task.write_text(TINY_TASK)
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(
            ws,
            CreateSearchIn(task=str(task), name="two", rounds=1, stagnation=5),
            DriverSettings(max_attempts_per_intent=2, branching=2),
        )
        [intent] = await propose_intents(
            ws, ProposeIntentsIn(search="two", intents=[IntentSpec(title="rows")])
        )
        out = io.StringIO()
        res = await Driver(
            ws, TwoAtOnce(), Display(Console(file=out, width=200)), DriverOptions(final_eval=False)
        ).run(s.id)
        assert batches == [2], out.getvalue()  # the cap of 2 in one write, one batch of both
        attempts = await ws.store.list_attempts(s.id, intent.id)
        assert [a.evaluation.status for a in attempts if a.evaluation] == ["incorrect", "ok"], out.getvalue()
        assert [a.author for a in attempts] == ["llm:two"] * 2
        node = await ws.records.get_node(intent.id)
        assert node.best_attempt_id == attempts[1].id and node.status.value == "closed"
        assert res.attempts == 2
