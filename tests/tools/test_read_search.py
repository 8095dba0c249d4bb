"""tools.read_search, called as functions over a real SQLite store: a whole search in one snapshot (history and
sources when asked), a version that changes with what a page shows, and an attempt with what it is diffed
against."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.tools.read_search import attempt_base, read_attempt, read_search, search_version
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import (
    Evaluation,
    FinalOutcome,
    IntentSpec,
    SearchConfig,
)
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

SRC = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass  # {}\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "read.db") as w:
        yield w


def ok_eval(speedup: float) -> Evaluation:
    return evals.gpu_eval(speedup, eager_us=10.0, seconds=2.0)


async def build(ws: Workspace) -> dict[str, int]:
    """A search with a seed on the root, two intents (one pruned), three attempts (two sharing a candidate)
    and one LLM call."""
    store = ws.store
    s = await store.create_search("demo", "softmax", SearchConfig())
    root = await store.root(s.id)
    seed = await store.put_candidate(SRC.format("seed"), "triton")
    a_seed = await store.record_attempt(s.id, root.id, seed.id, ok_eval(1.0), round=0, author="seed")
    rows, exp2 = await apply_intents(
        store,
        s.id,
        [IntentSpec(title="rows in registers", base_attempt_id=a_seed.id), IntentSpec(title="exp2")],
        author="llm:m",
        round=1,
    )
    fast = await store.put_candidate(SRC.format("fast"), "triton")
    a_first = await store.record_attempt(s.id, rows.id, fast.id, ok_eval(1.5), round=1, author="llm:m")
    a_again = await store.record_attempt(
        s.id, rows.id, fast.id, ok_eval(1.6), base_attempt_id=a_first.id, round=1, author="llm:m"
    )
    await apply_edits(store, s.id, [{"op": "prune", "node_id": exp2.id, "reason": "no gain"}], "llm:m", 1)
    await store.log_llm_call(
        search_id=s.id,
        phase="init",
        provider="anthropic",
        model="m",
        tokens_in=100,
        tokens_out=20,
        request="analyse the kernel",
        response="it is memory bound",
    )
    return {
        "search": s.id,
        "root": root.id,
        "rows": rows.id,
        "exp2": exp2.id,
        "seed": a_seed.id,
        "first": a_first.id,
        "again": a_again.id,
    }


async def test_a_snapshot_holds_the_tree_attempts_and_spend(ws: Workspace) -> None:
    ids = await build(ws)
    snap = await read_search(ws, "demo")
    assert snap.search.id == ids["search"] and snap.search.best_attempt_id == ids["again"]
    assert snap.status == "new"
    assert [n.id for n in snap.nodes] == [ids["root"], ids["rows"], ids["exp2"]]
    assert [a.id for a in snap.attempts] == [ids["seed"], ids["first"], ids["again"]]
    assert all(a.evaluation is not None and a.evaluation.status == "ok" for a in snap.attempts)
    assert (snap.llm_totals.calls, snap.llm_totals.tokens_in, snap.llm_totals.tokens_out) == (1, 100, 20)
    # not asked for: no history, no sources
    assert snap.edits == [] and snap.llm_calls == [] and snap.final is None and snap.candidates == {}
    assert snap.version == await search_version(ws, ids["search"])
    assert (await read_search(ws, ids["search"])).model_dump() == snap.model_dump()  # by id, the same


async def test_history_and_sources_when_asked(ws: Workspace) -> None:
    ids = await build(ws)
    full = await read_search(ws, "demo", history=True, sources=True)
    assert [(e.op, e.node_id) for e in full.edits if e.op == "prune"] == [("prune", ids["exp2"])]
    assert [(c.request, c.response) for c in full.llm_calls] == [("analyse the kernel", "it is memory bound")]
    assert full.final is None  # no final evaluation yet
    # one entry per candidate: the two attempts on the intent share theirs
    assert sorted(c.source for c in full.candidates.values()) == [SRC.format("fast"), SRC.format("seed")]
    assert all(a.candidate_id in full.candidates for a in full.attempts)
    slim = await read_search(ws, "demo", history=True, llm_text=False)
    assert [(c.request, c.response, c.tokens_in) for c in slim.llm_calls] == [("", "", 100)]
    assert slim.candidates == {}

    best = ids["again"]
    cand = full.candidates[full.attempts[-1].candidate_id].id
    await ws.store.record_final(
        ids["search"],
        [FinalOutcome(attempt_id=best, candidate_id=cand, passed=False, status="incorrect", why="held-out")],
        [],
    )
    final = (await read_search(ws, "demo", history=True)).final
    assert final is not None and final.best_before == best and final.lost_because


async def test_the_version_changes_with_what_a_page_shows(ws: Workspace, tmp_path: Path) -> None:
    ids = await build(ws)
    sid = ids["search"]
    v0 = await search_version(ws, sid)
    assert await search_version(ws, sid) == v0  # nothing changed
    seen = {v0}

    async def changed() -> None:
        v = await search_version(ws, sid)
        assert v not in seen
        seen.add(v)

    cand = await ws.store.put_candidate(SRC.format("new"), "triton")
    await ws.store.record_attempt(sid, ids["rows"], cand.id, ok_eval(0.9), round=1)
    await changed()
    await apply_edits(ws.store, sid, [{"op": "pin", "node_id": ids["rows"]}], "human", 1)
    await changed()
    await ws.store.log_llm_call(search_id=sid, phase="update", provider="anthropic", model="m", tokens_in=5)
    await changed()
    # a person's claim stores `running` with no run holding it; a driver run taking it over is news (the page
    # says what that run does from then on) though the shown status stays `running`
    await ws.store.set_search_status(sid, "running")
    await changed()
    await runs.claim(ws.store, sid)
    await changed()
    # a run that dies flips the shown status, and with it the version
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    raw = sqlite3.connect(tmp_path / "read.db")
    raw.execute("UPDATE search_runs SET pid = ? WHERE search_id = ?", (dead.pid, sid))
    raw.commit()
    raw.close()
    await changed()
    snap = await read_search(ws, sid)
    assert snap.status == "interrupted" and snap.search.status == "running"


async def test_an_attempt_comes_with_its_candidate_and_base(ws: Workspace) -> None:
    ids = await build(ws)
    seed = await read_attempt(ws, ids["seed"])
    assert seed.attempt.author == "seed" and seed.candidate.source == SRC.format("seed")
    assert seed.base is None  # on the root, on no base
    first = await read_attempt(ws, ids["first"])
    # no recorded base: the code its intent starts from
    assert first.base is not None and first.base.why == "the intent's starting code"
    assert first.base.attempt.id == ids["seed"] and first.base.candidate.source == SRC.format("seed")
    again = await attempt_base(ws, (await read_attempt(ws, ids["again"])).attempt)
    assert again is not None and again.why == "its recorded base" and again.attempt.id == ids["first"]
    with pytest.raises(NotFound):
        await read_attempt(ws, 999)


async def test_an_unknown_search_is_not_found(ws: Workspace) -> None:
    await build(ws)
    with pytest.raises(NotFound, match="demo"):  # the refusal names what exists
        await read_search(ws, "nope")
