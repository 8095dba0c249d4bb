"""record_llm_call, called over a real SQLite store: a policy's call is kept as it was reported (failed ones
too), counts in the search's spend, and a call on a search that does not exist writes nothing."""

from __future__ import annotations

import pytest
from toolkit import Snapshot

from ksearch.tools.llm_calls import record_llm_call
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import LLMCallRecord, SearchConfig

pytestmark = pytest.mark.anyio


async def test_a_call_is_kept_as_reported_and_counts_in_the_spend(bare_ws: Workspace) -> None:
    s = await bare_ws.store.create_search("spend", "row_sum", SearchConfig())
    call = LLMCallRecord(
        phase="write_code",
        provider="anthropic",
        model="m",
        tokens_in=1200,
        tokens_out=300,
        cost_usd=0.02,
        latency_s=3.5,
        request="write the kernel",
        response="class ModelNew: ...",
    )
    kept = await record_llm_call(bare_ws, s.id, call)
    assert kept.search_id == s.id and kept.id >= 1
    assert LLMCallRecord.model_validate(kept.model_dump(exclude={"id", "search_id", "created_at"})) == call
    failed = LLMCallRecord(phase="update", provider="openai", model="x", error="timeout", priced=False)
    await record_llm_call(bare_ws, s.id, failed)
    stored = await bare_ws.store.list_llm_calls(s.id)
    assert [(c.phase, c.error, c.priced) for c in stored] == [
        ("write_code", None, True),
        ("update", "timeout", False),
    ]
    totals = await bare_ws.records.llm_totals(s.id)
    assert (totals.calls, totals.tokens_in, totals.tokens_out, totals.unpriced_calls) == (2, 1200, 300, 1)
    assert totals.usd == pytest.approx(0.02)


async def test_a_call_on_no_search_is_kept_outside_every_search(bare_ws: Workspace) -> None:
    s = await bare_ws.store.create_search("quiet", "row_sum", SearchConfig())
    kept = await record_llm_call(bare_ws, None, LLMCallRecord(phase="init", provider="tuner", model="t"))
    assert kept.search_id is None
    assert (await bare_ws.records.llm_totals(s.id)).calls == 0
    assert [c.id for c in await bare_ws.store.list_llm_calls()] == [kept.id]


async def test_a_call_on_an_unknown_search_is_not_found_and_writes_nothing(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    await bare_ws.store.create_search("only", "row_sum", SearchConfig())
    before = await snapshot()
    with pytest.raises(NotFound, match="no search with id 9"):
        await record_llm_call(bare_ws, 9, LLMCallRecord(phase="init", provider="anthropic", model="m"))
    assert await snapshot() == before
