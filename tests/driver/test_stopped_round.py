"""A stop costs no round: a round interrupted before its intent recorded an attempt (Ctrl-C, which cancels the run, or
a kill, which the next run recovers from) is given back with its intent, and the next claim starts it again. A
round that recorded an attempt stays counted. On a real store, in process."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console

from ksearch.server.driver.display import Display
from ksearch.server.driver.loop import Driver
from ksearch.server.driver.policies.base import Policy
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.loop.runs import release_claims
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Evaluation, IntentSpec
from tests.tools.toolkit import TINY_TASK

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


class Thinking(Policy):
    """Never answers write_code (a model still thinking when the stop comes); says when it was asked."""

    name = "thinking"
    model = "thinking"

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def init(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    async def write_code(self, ctx):  # type: ignore[no-untyped-def]
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    async def update(self, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("not reached")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _search(ws: Workspace, tmp_path: Path) -> tuple[int, list[int]]:
    task = tmp_path / "tiny_rows.py"  # seedless: the first round needs no measured seed
    task.write_text(TINY_TASK)
    s = await create_search(ws, CreateSearchIn(task=str(task), name="rs", rounds=5))
    made = await propose_intents(
        ws,
        ProposeIntentsIn(search="rs", intents=[IntentSpec(title="tile rows"), IntentSpec(title="vectorize")]),
    )
    return s.id, [n.id for n in made]


async def _stopped_while_thinking(ws: Workspace, search_id: int) -> str:
    """Run the driver until its policy is asked for code, then cancel it (what Ctrl-C does); its output."""
    out = io.StringIO()
    policy = Thinking()
    run = asyncio.ensure_future(Driver(ws, policy, Display(Console(file=out, width=200))).run(search_id))
    asked = asyncio.ensure_future(policy.asked.wait())
    await asyncio.wait([run, asked], timeout=120, return_when=asyncio.FIRST_COMPLETED)
    assert policy.asked.is_set(), out.getvalue()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    return out.getvalue()


async def test_a_round_stopped_before_its_first_attempt_is_resumed_not_counted(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        sid, intents = await _search(ws, tmp_path)
        # Ctrl-C while the model writes round 1's first attempt: the round is given back with its intent
        shown = await _stopped_while_thinking(ws, sid)
        assert "round 1: intent #" in shown
        s = await ws.search(sid)
        assert (s.round, s.status) == (0, "stopped"), shown
        assert {(await ws.records.get_node(i)).status.value for i in intents} == {"open"}
        # the next run starts round 1 again, not round 2
        shown = await _stopped_while_thinking(ws, sid)
        assert "round 1: intent #" in shown and "round 2" not in shown, shown
        assert (await ws.search(sid)).round == 0


async def test_a_killed_runs_claim_without_attempt_gives_its_round_back_on_resume(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        sid, _ = await _search(ws, tmp_path)
        # what a run killed (SIGKILL) in its round 1 leaves: the claim, no attempt
        sel = await select_action(ws, SelectActionIn(search=sid))
        assert sel.node is not None and sel.round == 1
        shown = await _stopped_while_thinking(ws, sid)
        assert f"round 1 (intent #{sel.node.id}) was interrupted before its first attempt" in shown, shown
        assert "round 1: intent #" in shown and "round 2" not in shown, shown


async def test_only_rounds_without_an_attempt_are_given_back(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        sid, (a, b) = await _search(ws, tmp_path)
        first = await select_action(ws, SelectActionIn(search=sid, node_id=a), lanes=2)
        cand = await ws.store.put_candidate("class ModelNew: pass\n", "triton")
        ev = Evaluation(status="error", error="did not compile")
        await ws.store.record_attempt(sid, a, cand.id, ev, round=first.round, author="llm:x")
        second = await select_action(ws, SelectActionIn(search=sid, node_id=b), lanes=2)
        assert (first.round, second.round) == (1, 2)
        released = {r.node.id: (r.round, r.given_back) for r in await release_claims(ws, sid)}
        assert released == {a: (1, False), b: (2, True)}
        assert (await ws.search(sid)).round == 1  # round 1 recorded an attempt: it stays counted
        assert {(await ws.records.get_node(i)).status.value for i in (a, b)} == {"open"}
