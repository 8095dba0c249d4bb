"""A policy that cannot implement an intent (the tuner on a person's intent without params, a replay without
answers for it) leaves it open: marked as waiting for a model or a person, its round given back, passed over
for the rest of the run; a decline after attempts just ends the refine phase. On a real store."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ksearch.server.driver.display import Display
from ksearch.server.driver.loop import Driver, DriverOptions, _Budget
from ksearch.server.driver.policies.base import IntentDeclined, Policy
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from tests.tools.toolkit import TINY_TASK

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


class Declining(Policy):
    """Declines every intent it is asked to write code for, and keeps which."""

    name = "declining"
    model = "declining"

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    async def init(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    async def write_code(self, ctx):  # type: ignore[no-untyped-def]
        self.asked.append(ctx.intent_id)
        raise IntentDeclined("it names no parameters to set")

    async def update(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("a declined intent has no update phase")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_declined_intents_stay_open_cost_no_round_and_are_passed_over(tmp_path: Path) -> None:
    task = tmp_path / "tiny_rows.py"  # seedless: the first round needs no measured seed
    task.write_text(TINY_TASK)
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task=str(task), name="rs", rounds=5))
        a, b = await propose_intents(
            ws,
            ProposeIntentsIn(
                search="rs",
                intents=[IntentSpec(title="tile rows", priority=0.9), IntentSpec(title="vectorize loads")],
            ),
        )
        out = io.StringIO()
        policy = Declining()
        driver = Driver(ws, policy, Display(Console(file=out, width=200)))
        driver._search_id = s.id
        why = await driver._lane(s.id, _Budget(DriverOptions(), s))
        assert policy.asked == [a.id, b.id]  # each asked once, then passed over
        assert why == (
            "no open intent to select (2 open but passed over this time); propose intents or reopen one; "
            f"#{a.id}, #{b.id} wait for a model or a person (declined by the declining policy)"
        )
        after = await ws.search("rs")
        assert after.round == 0  # both rounds given back
        for n in (a, b):
            node = await ws.records.get_node(n.id)
            assert node.status.value == "open"
            assert "[declined by the declining policy; waiting for a model or a person]" in node.notes
        assert await ws.records.list_attempts(s.id, a.id) == []
        text = out.getvalue()
        assert f"intent #{a.id} declined: it names no parameters to set; it stays open" in text
        # a person (or another run) can still take them: nothing closed them
        sel = await select_action(ws, SelectActionIn(search="rs"))
        assert sel.node is not None and sel.node.id == a.id and sel.round == 1
