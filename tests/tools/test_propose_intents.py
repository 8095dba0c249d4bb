"""propose_intents, called as a function: intents added under their parents with an edit-log entry each, or a
batch refused as a whole, every problem named, nothing written."""

from __future__ import annotations

import pytest
from toolkit import Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import IntentSpec

pytestmark = pytest.mark.anyio


async def test_intents_are_added_open_under_their_parents_and_logged(bare_ws: Workspace) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="p"))
    root = await bare_ws.store.root(s.id)
    a, b = await propose_intents(
        bare_ws,
        ProposeIntentsIn(
            search="p",
            intents=[
                IntentSpec(title="two rows per program", priority=0.9, difficulty=2, expected_speedup=1.5),
                IntentSpec(title="wider column blocks", params={"BLOCK_N": 2048}, notes="try 4096 too"),
            ],
            author="llm:claude",
            reason="the reduction is memory-bound",
        ),
    )
    [c] = await propose_intents(
        bare_ws, ProposeIntentsIn(search=s.id, intents=[IntentSpec(title="four rows", parent_id=a.id)])
    )
    assert [(n.parent_id, n.kind, n.status.value, n.author) for n in (a, b, c)] == [
        (root.id, "intent", "open", "llm:claude"),
        (root.id, "intent", "open", "llm:claude"),
        (a.id, "intent", "open", "human"),
    ]
    assert (a.priority, a.difficulty, a.expected_speedup) == (0.9, 2, 1.5)
    assert (b.params, b.notes) == ({"BLOCK_N": 2048}, "try 4096 too")
    assert [n.id for n in await bare_ws.store.list_nodes(s.id)] == [root.id, a.id, b.id, c.id]
    assert await bare_ws.store.get_node(b.id) == b
    inserts = [e for e in await bare_ws.store.list_edits(s.id) if e.node_id != root.id]
    assert [(e.op, e.node_id, e.author, e.reason) for e in inserts] == [
        ("insert", a.id, "llm:claude", "the reduction is memory-bound"),
        ("insert", b.id, "llm:claude", "the reduction is memory-bound"),
        ("insert", c.id, "human", ""),
    ]


async def test_a_batch_with_bad_items_is_refused_whole_naming_each_problem(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="p"))
    other = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="q"))
    [a] = await propose_intents(
        bare_ws, ProposeIntentsIn(search="p", intents=[IntentSpec(title="two rows per program")])
    )
    before = await snapshot()
    foreign_root = (await bare_ws.store.root(other.id)).id
    with pytest.raises(ToolFailure) as e:
        await propose_intents(
            bare_ws,
            ProposeIntentsIn(
                search="p",
                intents=[
                    IntentSpec(title="a fine new idea"),  # valid, but the batch is all or nothing
                    IntentSpec(title="two rows per program!"),
                    IntentSpec(title="split the reduction", parent_id=999),
                    IntentSpec(title="vectorised loads", parent_id=foreign_root),
                ],
            ),
        )
    assert e.value.problems == [
        f"item 1 field 'title': title 'two rows per program!' is a near-duplicate of node #{a.id} "
        f"'two rows per program' (open) under the same parent; accepted: a distinct idea, or update #{a.id} "
        "(priority, notes) instead",
        "item 2 field 'parent_id': parent node #999 does not exist; accepted: the id or handle of a node of this "
        "search, or the handle of an earlier item of the request (the root when omitted)",
        f"item 3 field 'parent_id': parent node #{foreign_root} belongs to search {other.id}; accepted: the id "
        "or handle of a node of this search, or the handle of an earlier item of the request (the root when "
        "omitted)",
    ]
    assert str(e.value).startswith("no intent was added\n- item 1")
    assert await snapshot() == before
    assert s.id != other.id


async def test_a_bad_author_or_an_unknown_search_writes_nothing(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    await create_search(bare_ws, CreateSearchIn(task="row_sum", name="p"))
    before = await snapshot()
    with pytest.raises(
        ToolFailure, match=r"bad author 'llm:\\nx'; accepted: 'human', 'tuner' or 'llm:<model>'"
    ):
        await propose_intents(
            bare_ws, ProposeIntentsIn(search="p", intents=[IntentSpec(title="an idea")], author="llm:\nx")
        )
    with pytest.raises(NotFound, match="no search named 'pp'"):
        await propose_intents(bare_ws, ProposeIntentsIn(search="pp", intents=[IntentSpec(title="an idea")]))
    assert await snapshot() == before
