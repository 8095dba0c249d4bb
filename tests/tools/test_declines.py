"""tools.declines over a real store: a decline before any attempt gives the round back and is read back from the
edit log with its round, policy and reason; one after attempts only notes it; the edit log of a search recorded
before declines gave a reason is read too, and a decline line a later edit keeps is not counted again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.loop.declines import decline_intent, decline_note, declines_in
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Edit, IntentSpec

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "declines.db") as w:
        yield w


@pytest.mark.slow  # creating a search on a task derives its facts (torch)
async def test_a_decline_is_recorded_and_read_back(ws: Workspace, tiny_task: str) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    a, b = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="tiny", intents=[IntentSpec(title="vectorize loads"), IntentSpec(title="tile")]
        ),
    )
    await select_action(ws, SelectActionIn(search="tiny", node_id=a.id))
    s = await ws.search(s.id)
    assert s.round == 1
    node = await ws.records.get_node(a.id)
    given_back = await decline_intent(
        ws, s, node, "it names no parameters", by="tuner", attempts=0, author="tuner"
    )
    assert given_back and (await ws.search(s.id)).round == 0  # the round is given back
    node = await ws.records.get_node(a.id)
    assert node.status.value == "open" and node.notes.endswith(
        decline_note("tuner", 0, "it names no parameters")
    )
    await select_action(ws, SelectActionIn(search="tiny", node_id=b.id))
    s = await ws.search(s.id)
    after = await decline_intent(
        ws,
        s,
        await ws.records.get_node(b.id),
        "no more ideas",
        by="replay",
        attempts=2,
        author="llm:replay:x",
    )
    assert (
        not after and (await ws.records.get_node(b.id)).status.value == "active"
    )  # the caller ends the phase
    got = declines_in(await ws.records.list_edits(s.id))
    assert [(d.node_id, d.round, d.by, d.attempts, d.why) for d in got] == [
        (a.id, 1, "tuner", 0, "it names no parameters"),
        (b.id, 1, "replay", 2, "no more ideas"),
    ]


def _edit(i: int, op: str, author: str, notes: str, reason: str = "") -> Edit:
    payload = {"changes": {"notes": notes}} if op == "update" else {"notes": notes, "title": "t"}
    return Edit(id=i, search_id=1, op=op, node_id=5, payload=payload, author=author, round=i, reason=reason)  # type: ignore[arg-type]


def test_an_older_edit_log_is_read_and_a_kept_line_is_not_a_new_decline() -> None:
    line = "[declined by the tuner policy; waiting for a model or a person] it names no parameters"
    log = [
        _edit(1, "insert", "llm:m", "first thoughts"),
        _edit(2, "update", "tuner", f"first thoughts\n{line}"),  # recorded before declines gave a reason
        _edit(3, "update", "llm:m", f"rewritten\n{line}"),  # a model rewrote the notes and kept the line last
        _edit(4, "update", "human", f"mine\n{line}"),  # a person's edit is never a policy's decline
        _edit(5, "update", "llm:m", "x\n[declined by the replay policy after 3 attempts] no answers left"),
    ]
    got = declines_in(log)
    assert [(d.round, d.by, d.attempts) for d in got] == [(2, "tuner", 0), (5, "replay", 3)]
