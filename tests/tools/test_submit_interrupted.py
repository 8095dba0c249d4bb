"""Ctrl-C during `ksearch submit` (its task cancelled) after the submission claimed an open intent and before its
kernel was recorded: the claim is given back (the intent open, its round not counted), and the submission says so."""

from __future__ import annotations

import asyncio

import pytest
from toolkit import ROW_SUM_SEED

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.submit_kernel import SubmitKernelIn, submit_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


async def test_a_submission_interrupted_before_its_attempt_gives_its_claim_back(
    ws: Workspace, tiny_task: str
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny", rounds=3))
    [intent] = await propose_intents(ws, ProposeIntentsIn(search="tiny", intents=[IntentSpec(title="halve")]))
    notes: list[str] = []
    work: asyncio.Future[object] | None = None

    async def note(text: str) -> None:
        notes.append(text)
        if text.startswith("claimed intent") and work is not None:
            work.cancel()  # Ctrl-C as the evaluation starts

    work = asyncio.ensure_future(
        submit_kernel(ws, SubmitKernelIn(search="tiny", source=ROW_SUM_SEED, node_id=intent.id), note=note)
    )
    with pytest.raises(asyncio.CancelledError):
        await work
    assert notes[0].startswith(f"claimed intent #{intent.id}: round 1 started"), notes
    assert notes[-1] == (
        f"interrupted before the kernel was recorded: intent #{intent.id} is open again and round 1 is not counted"
    )
    after = await ws.search(s.id)
    assert after.round == 0
    assert (await ws.records.get_node(intent.id)).status.value == "open"
    assert await ws.records.list_attempts(s.id) == []
