"""now_doing over a real SQLite store (no sandbox): the line follows the loop's state as `ksearch status` reads it,
and says what a live driver run does, what the loop waits for when none holds the search, and that a run was
killed; doing_text for the states a store without a sandbox cannot reach (a final evaluation due, done)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.loop.runs import hold_run, mark_running
from ksearch.tools.loop.state import BudgetState, LoopState, RefineState
from ksearch.tools.now_doing import doing_text, now_doing
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.models import IntentSpec

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path, tiny_task: str) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "now.db") as w:
        yield w


@pytest.mark.slow  # creating a search on a task derives its facts (torch)
async def test_the_line_follows_the_loop_and_who_runs_it(
    ws: Workspace, tiny_task: str, tmp_path: Path
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny", rounds=2))
    now = await now_doing(ws, "tiny")
    assert (now.phase, now.live, now.text) == (
        "init",
        False,
        "waiting: the first intents; no run in progress",
    )
    [a, _] = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="tiny", intents=[IntentSpec(title="vectorize loads"), IntentSpec(title="tile rows")]
        ),
    )
    assert (
        await now_doing(ws, s.id)
    ).text == "waiting: an intent to select for round 1 of at most 2; no run in progress"
    async with hold_run(ws, s.id):
        await mark_running(ws, s.id)
        now = await now_doing(ws, s.id)
        assert (now.phase, now.live, now.text) == (
            "select",
            True,
            "selecting the next intent for round 1 of at most 2",
        )
        await select_action(ws, SelectActionIn(search="tiny", node_id=a.id))
        assert (
            await now_doing(ws, s.id)
        ).text == f"refining intent #{a.id} 'vectorize loads': attempt 1 of at most 8"
    # the run ended (a person goes on by hand): the line says where the phase stands, and that nobody runs it
    now = await now_doing(ws, s.id)
    assert (now.phase, now.live) == ("refine", False)
    assert (
        now.text
        == f"refining intent #{a.id} 'vectorize loads': 0 of at most 8 attempts made; no run in progress"
    )
    await finish_intent(ws, FinishIntentIn(search="tiny"))
    now = await now_doing(ws, s.id)
    assert (now.phase, now.text) == (
        "update",
        f"waiting: the reflection on #{a.id} 'vectorize loads', then an intent to select for round 2 of at most 2; "
        "no run in progress",
    )
    async with hold_run(ws, s.id):
        assert (await now_doing(ws, s.id)).text == f"reflecting on #{a.id} 'vectorize loads'"
    # a run that was killed: said first, then what the loop waits for
    await runs.claim(ws.store, s.id)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    raw = sqlite3.connect(tmp_path / "now.db")
    raw.execute("UPDATE search_runs SET pid = ? WHERE search_id = ?", (dead.pid, s.id))
    raw.commit()
    raw.close()
    now = await now_doing(ws, s.id)
    assert not now.live and now.text.startswith(
        "interrupted (its run was killed): waiting: the reflection on"
    )


def _state(phase: str, **kw: object) -> LoopState:
    budget = BudgetState(
        rounds_used=3,
        rounds=3,
        attempts_used=9,
        attempts=None,
        tokens_used=0,
        tokens=None,
        usd_used=0.0,
        usd=None,
        target_speedup=None,
        best_speedup=None,
        exhausted="round budget reached (3 of 3 rounds started)",
    )
    fields: dict[str, object] = {
        "search_id": 1,
        "search": "s",
        "status": "running",
        "round": 3,
        "phase": phase,
    }
    return LoopState(**{**fields, "budget": budget, "next": "", **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "live", "want"),
    [
        (_state("final"), True, "final evaluation: re-measuring the best candidates on every workload"),
        (
            _state("final"),
            False,
            "waiting: budget spent (round budget reached (3 of 3 rounds started)); the final evaluation is due",
        ),
        (_state("done", status="done"), False, "done"),
        (_state("done", status="stopped"), False, "done (stopped; its final evaluation is recorded)"),
        (_state("init"), True, "measuring the task's seed"),
        # a stopped search with intents open and budget left: stopped, not "refining ... waiting: an intent to select"
        (
            _state(
                "select",
                status="stopped",
                refining=[
                    RefineState(
                        node_id=20, title="tile", round=3, attempts=2, cap=8, stagnant=0, window=5,
                        base_attempt_id=None, best_attempt_id=None, over=False,
                    )
                ],
            ),
            False,
            "stopped (its final evaluation is recorded); intent #20 'tile' left active when it stopped; intents are "
            "open and budget is left: selecting one searches further",
        ),  # fmt: skip
        (
            _state(
                "refine",
                refining=[
                    RefineState(
                        node_id=7,
                        title="vectorize loads",
                        round=3,
                        attempts=2,
                        cap=8,
                        stagnant=2,
                        window=5,
                        base_attempt_id=None,
                        best_attempt_id=None,
                        over=False,
                    ),
                    RefineState(
                        node_id=9,
                        title="tile",
                        round=3,
                        attempts=8,
                        cap=8,
                        stagnant=1,
                        window=5,
                        base_attempt_id=None,
                        best_attempt_id=None,
                        over=True,
                        why="the attempt cap was reached (8 of 8)",
                    ),
                ],
            ),
            True,
            "refining intent #7 'vectorize loads': attempt 3 of at most 8; ending the refine phase of intent #9 "
            "'tile': the attempt cap was reached (8 of 8)",
        ),
    ],
)
def test_every_phase_has_its_words(state: LoopState, live: bool, want: str) -> None:
    titles = {7: "vectorize loads", 9: "tile", 20: "tile"}
    assert doing_text(state, live=live, interrupted=False, titles=titles, seed_due=True) == want
