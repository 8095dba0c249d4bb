"""The driver's update phase on a real store: when the edits of an answer go in and its new intents are
refused, the retry does not send the edits again (they would be logged twice, and a second prune refused)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ksearch.server.driver.display import Display
from ksearch.server.driver.loop import Driver
from ksearch.server.driver.policies.base import Policy
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.prompting.phase_models import UpdateContext, UpdateResult
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import EditSpec, IntentSpec

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


class Scripted(Policy):
    """Answers each update with the next scripted result and keeps what it was asked."""

    name = "scripted"
    model = "scripted"

    def __init__(self, answers: list[UpdateResult]) -> None:
        super().__init__()
        self.answers = answers
        self.asked: list[UpdateContext] = []

    async def init(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    async def write_code(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    async def update(self, ctx: UpdateContext) -> UpdateResult:
        self.asked.append(ctx)
        return self.answers.pop(0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
async def test_edits_that_went_in_are_not_sent_again(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task="row_sum", name="rs"))
        a, b = await propose_intents(
            ws,
            ProposeIntentsIn(
                search="rs", intents=[IntentSpec(title="tile rows"), IntentSpec(title="vectorize")]
            ),
        )
        prune_b = EditSpec(op="prune", node_id=b.id, reason="measured slower")
        duplicate = IntentSpec(title="tile rows")  # a near-duplicate of #a: refused
        policy = Scripted(
            [
                UpdateResult(reflection="first", edits=[prune_b], new_intents=[duplicate]),
                UpdateResult(
                    reflection="again", edits=[prune_b], new_intents=[IntentSpec(title="use 2 warps")]
                ),
            ]
        )
        out = io.StringIO()
        driver = Driver(ws, policy, Display(Console(file=out, width=200)))
        driver._search_id = s.id
        await driver._update(await ws.search("rs"), a)

        assert len(policy.asked) == 2
        retry = policy.asked[1].rejected
        assert any("near-duplicate" in p for p in retry)
        assert "your 1 edit(s) were applied; only the new intents were refused" in retry[-1]
        edits = [e for e in await ws.records.list_edits(s.id) if e.op == "prune"]
        assert [e.node_id for e in edits] == [b.id]  # pruned once, logged once
        titles = [n.title for n in await ws.records.list_nodes(s.id)]
        assert "use 2 warps" in titles and titles.count("tile rows") == 1
        assert "update: 1 edits, 1 new intents — again" in out.getvalue()
