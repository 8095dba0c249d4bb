"""end_search, called over a real SQLite store: a search ends with the status given (done or stopped), or with
the one its open intents and budgets give; any other status is refused, writing nothing."""

from __future__ import annotations

import pytest
from toolkit import Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.final_eval import end_search
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec

pytestmark = pytest.mark.anyio


async def test_a_search_with_open_intents_ends_stopped_one_without_ends_done(bare_ws: Workspace) -> None:
    going = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="going"))
    [idea] = await propose_intents(
        bare_ws, ProposeIntentsIn(search="going", intents=[IntentSpec(title="wider")])
    )
    ended = await end_search(bare_ws, going)
    assert (ended.id, ended.status) == (going.id, "stopped")  # an open intent left: more budget goes on
    assert (await bare_ws.search("going")).status == "stopped"
    await bare_ws.store.close_node(idea.id, "failed")
    assert (await end_search(bare_ws, await bare_ws.search("going"))).status == "done"  # nothing left open
    bare = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="bare"))
    assert (await end_search(bare_ws, bare)).status == "done"  # never had an intent


async def test_the_status_given_wins(bare_ws: Workspace) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="given"))
    await propose_intents(bare_ws, ProposeIntentsIn(search="given", intents=[IntentSpec(title="wider")]))
    assert (await end_search(bare_ws, s, "done")).status == "done"
    assert (await end_search(bare_ws, s, "stopped")).status == "stopped"  # a run stopped by Ctrl-C or a crash


async def test_a_status_that_is_no_end_is_refused_and_writes_nothing(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="ending"))
    before = await snapshot()
    for status in ("running", "new"):
        with pytest.raises(ToolFailure) as e:
            await end_search(bare_ws, s, status)  # type: ignore[arg-type]
        assert str(e.value) == (
            f"a search cannot end {status!r}; accepted: done, stopped (or none, for the status its budgets "
            "and open intents give)"
        )
    assert await snapshot() == before
