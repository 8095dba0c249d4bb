"""tools.records, called over a real SQLite store: `ws.records` answers every read a face makes, exactly as the
store does (NotFound included), sees what the tools write at once, and offers no write at all."""

from __future__ import annotations

import pytest

from ksearch.tools.records import Records
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import (
    Evaluation,
    IntentSpec,
    SearchConfig,
)
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

SRC = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass  # {}\n"

READS = {
    "list_searches",
    "best_attempt",
    "llm_totals",
    "list_edits",
    "get_node",
    "list_nodes",
    "root",
    "node_counts",
    "get_attempt",
    "list_attempts",
    "attempt_speedups",
    "get_candidate",
    "final_verdict",
    "best_figure",  # a read: the best's figures from attempt_speedups and final_verdict
}
# every method of the store that changes the database (or closes it): none is reachable through records
WRITES = {
    "create_search",
    "set_search_status",
    "set_search_fields",
    "bump_round",
    "set_node_status",
    "close_node",
    "put_candidate",
    "record_attempt",
    "record_final",
    "log_llm_call",
    "cache_put",
    "transaction",
    "close",
    "store",
}


def ok_eval(speedup: float) -> Evaluation:
    return evals.gpu_eval(speedup, eager_us=10.0, seconds=2.0)


async def _build(ws: Workspace) -> dict[str, int]:
    """Two searches; the first with two intents (one pruned), two attempts and one LLM call."""
    store = ws.store
    s = await store.create_search("demo", "softmax", SearchConfig())
    await store.create_search("other", "softmax", SearchConfig())
    rows, exp2 = await apply_intents(
        store, s.id, [IntentSpec(title="rows in registers"), IntentSpec(title="exp2")], "llm:m", 1
    )
    slow = await store.put_candidate(SRC.format("slow"), "triton")
    fast = await store.put_candidate(SRC.format("fast"), "triton")
    a1 = await store.record_attempt(s.id, rows.id, slow.id, ok_eval(1.2), round=1, author="llm:m")
    a2 = await store.record_attempt(s.id, rows.id, fast.id, ok_eval(1.5), round=1, author="llm:m")
    await apply_edits(store, s.id, [{"op": "prune", "node_id": exp2.id, "reason": "no gain"}], "llm:m", 1)
    await store.log_llm_call(search_id=s.id, phase="init", provider="anthropic", model="m", tokens_in=7)
    return {"search": s.id, "rows": rows.id, "exp2": exp2.id, "a1": a1.id, "a2": a2.id}


async def test_every_read_answers_as_the_store_does(bare_ws: Workspace) -> None:
    ids = await _build(bare_ws)
    r, store, sid = bare_ws.records, bare_ws.store, ids["search"]
    assert [s.name for s in await r.list_searches()] == ["demo", "other"]
    assert await r.list_searches() == await store.list_searches()
    best = await r.best_attempt(sid)
    assert best is not None and best.id == ids["a2"] and best == await store.best_attempt(sid)
    totals = await r.llm_totals(sid)
    assert (totals.calls, totals.tokens_in) == (1, 7) and totals == await store.llm_totals(sid)
    edits = await r.list_edits(sid)
    assert [e.op for e in edits][-1] == "prune" and edits == await store.list_edits(sid)
    nodes = await r.list_nodes(sid)
    assert [n.id for n in nodes][1:] == [ids["rows"], ids["exp2"]] and nodes == await store.list_nodes(sid)
    root = await r.root(sid)
    assert root.kind == "root" and root == nodes[0]
    assert (await r.get_node(ids["exp2"])).status.value == "pruned"
    assert await r.node_counts(sid) == {"open": 1, "pruned": 1}
    attempts = await r.list_attempts(sid)
    assert [a.id for a in attempts] == [ids["a1"], ids["a2"]] and attempts == await store.list_attempts(sid)
    assert await r.list_attempts(sid, ids["exp2"]) == []
    assert await r.get_attempt(ids["a1"]) == attempts[0]
    assert dict(await r.attempt_speedups(sid)) == {ids["a1"]: 1.2, ids["a2"]: 1.5}
    cand = await r.get_candidate(attempts[1].candidate_id)
    assert cand.source == SRC.format("fast") and cand.language == "triton"
    # the other search has nothing yet
    other = (await r.list_searches())[1]
    assert await r.best_attempt(other.id) is None and await r.list_attempts(other.id) == []
    assert (await r.llm_totals(other.id)).calls == 0


async def test_a_missing_record_is_not_found(bare_ws: Workspace) -> None:
    ids = await _build(bare_ws)
    r = bare_ws.records
    with pytest.raises(NotFound, match="#999"):
        await r.get_node(999)
    with pytest.raises(NotFound):
        await r.get_attempt(ids["a2"] + 100)
    with pytest.raises(NotFound, match="no candidate 'nope'"):
        await r.get_candidate("nope")
    with pytest.raises(NotFound):
        await r.list_nodes(ids["search"] + 100)


async def test_reads_see_what_was_just_written(bare_ws: Workspace) -> None:
    ids = await _build(bare_ws)
    r = bare_ws.records
    assert await r.node_counts(ids["search"]) == {"open": 1, "pruned": 1}
    await bare_ws.store.set_node_status(ids["rows"], "active")
    assert await r.node_counts(ids["search"]) == {"active": 1, "pruned": 1}
    assert (await r.get_node(ids["rows"])).status.value == "active"


async def test_no_write_is_reachable(bare_ws: Workspace) -> None:
    assert isinstance(bare_ws.records, Records)
    public = {n for n in dir(bare_ws.records) if not n.startswith("_")}
    assert public == READS
    assert not public & WRITES
    assert all(not hasattr(bare_ws.records, w) for w in WRITES)
    with pytest.raises(AttributeError):  # no attribute can be hung on it either (__slots__)
        bare_ws.records.store = bare_ws.store  # type: ignore[attr-defined]
