"""edit_tree, called as a function: validated edits applied in order and logged, or a batch refused whole
(every problem named with what is accepted), nothing written; results are never editable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from toolkit import Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node, Search

pytestmark = pytest.mark.anyio


async def _tree(ws: Workspace) -> tuple[Search, Node, Node, Node]:
    s = await create_search(ws, CreateSearchIn(task="row_sum", name="e"))
    a, b = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="e", intents=[IntentSpec(title="two rows per program"), IntentSpec(title="wider blocks")]
        ),
    )
    return s, await ws.store.root(s.id), a, b


async def test_edits_apply_in_order_and_each_is_logged(bare_ws: Workspace) -> None:
    s, root, a, b = await _tree(bare_ws)
    out = await edit_tree(
        bare_ws,
        EditTreeIn(
            search="e",
            edits=[
                EditSpec(op="update", node_id=root.id, notes="memory-bound: one read of the input"),
                EditSpec(op="update", node_id=a.id, priority=0.2, rationale="fewer programs"),
                EditSpec(op="move", node_id=b.id, parent_id=a.id, reason="a variant of #a"),
                EditSpec(op="pin", node_id=b.id),  # sees the move before it
            ],
            author="llm:m",
        ),
    )
    assert [n.id for n in out] == [root.id, a.id, b.id, b.id]
    stored = {n.id: n for n in await bare_ws.store.list_nodes(s.id)}
    assert stored[root.id].notes == "memory-bound: one read of the input"
    assert (stored[a.id].priority, stored[a.id].rationale) == (0.2, "fewer programs")
    assert (stored[b.id].parent_id, stored[b.id].pinned, stored[b.id].status.value) == (a.id, True, "open")
    logged = [(e.op, e.node_id, e.author) for e in await bare_ws.store.list_edits(s.id)][-4:]
    assert logged == [
        ("update", root.id, "llm:m"),
        ("update", a.id, "llm:m"),
        ("move", b.id, "llm:m"),
        ("pin", b.id, "llm:m"),
    ]
    # prune closes a subtree for good; reopen brings one node back
    await edit_tree(bare_ws, EditTreeIn(search="e", edits=[EditSpec(op="prune", node_id=a.id)]))
    assert {n.id: n.status.value for n in await bare_ws.store.list_nodes(s.id)} == {
        root.id: "open",
        a.id: "pruned",
        b.id: "pruned",
    }
    [back] = await edit_tree(bare_ws, EditTreeIn(search="e", edits=[EditSpec(op="reopen", node_id=a.id)]))
    assert back.status.value == "open" and (await bare_ws.store.get_node(b.id)).status.value == "pruned"


async def test_an_invalid_batch_is_refused_whole_naming_each_problem(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    _s, root, a, b = await _tree(bare_ws)
    before = await snapshot()
    with pytest.raises(ToolFailure) as e:
        await edit_tree(
            bare_ws,
            EditTreeIn(
                search="e",
                edits=[
                    EditSpec(op="update", node_id=a.id, priority=0.1),  # valid alone
                    EditSpec(op="prune", node_id=root.id),
                    EditSpec(op="move", node_id=a.id, parent_id=a.id),
                    EditSpec(op="update", node_id=999, notes="x"),
                    EditSpec(op="reopen", node_id=b.id),
                ],
            ),
        )
    assert e.value.problems == [
        f"item 1 (node #{root.id}): op 'prune' does not apply to the root (it is not an intent); accepted: op "
        "'update' of the root's notes, rationale or title",
        f"item 2 (node #{a.id}) field 'parent_id': new parent #{a.id} is the node itself: the tree would have a "
        "cycle; accepted: the id or handle of a node of this search that is not pruned, not vetoed and not inside "
        "the moved subtree",
        "item 3 (node #999) field 'node_id': node #999 does not exist; accepted: the id (12 or '#12') or handle of "
        "a node of this search",
        f"item 4 (node #{b.id}): node #{b.id} is open; accepted: reopen of a closed, failed or pruned node",
    ]
    assert str(e.value).startswith("no edit was applied\n- item 1")
    assert await snapshot() == before


async def test_an_unknown_search_or_a_bad_author_writes_nothing(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    _, _, a, _ = await _tree(bare_ws)
    before = await snapshot()
    with pytest.raises(NotFound, match=r"no search named 'f'; existing searches \(id 'name'\): 1 'e'"):
        await edit_tree(bare_ws, EditTreeIn(search="f", edits=[EditSpec(op="pin", node_id=a.id)]))
    with pytest.raises(ToolFailure, match="bad author"):
        await edit_tree(bare_ws, EditTreeIn(search="e", edits=[EditSpec(op="pin", node_id=a.id)], author=" "))
    assert await snapshot() == before


def test_a_result_cannot_be_written_through_an_edit() -> None:
    for smuggled in ({"best_attempt_id": 3}, {"status": "closed"}, {"speedup": 9.0}):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            EditTreeIn.model_validate({"search": "e", "edits": [{"op": "update", "node_id": 2, **smuggled}]})
    with pytest.raises(ValidationError, match="at least 1 item"):
        EditTreeIn(search="e", edits=[])


async def test_a_reason_for_the_whole_batch_goes_with_each_edit_without_its_own(bare_ws: Workspace) -> None:
    s, _, a, b = await _tree(bare_ws)
    await edit_tree(
        bare_ws,
        EditTreeIn(
            search="e",
            edits=[
                EditSpec(op="update", node_id=a.id, priority=0.9),
                EditSpec(op="move", node_id=b.id, parent_id=a.id, reason="a variant of it"),
            ],
            author="llm:m",
            reason="round 1 showed rows in registers win",
        ),
    )
    logged = [(e.op, e.node_id, e.reason) for e in await bare_ws.store.list_edits(s.id)][-2:]
    assert logged == [
        ("update", a.id, "round 1 showed rows in registers win"),
        ("move", b.id, "a variant of it"),
    ]


async def test_once_the_root_holds_the_analysis_the_next_step_is_the_first_intents(ws: Workspace) -> None:
    from pathlib import Path

    from ksearch.tools.loop.state import loop_state

    seedless = Path(__file__).parents[2] / "bench" / "live_host" / "tasks" / "l2_normalize.py"
    s = await create_search(ws, CreateSearchIn(task=str(seedless), name="fresh"))
    before = (await loop_state(ws, s.id)).next
    assert "Read the prompt analyse_kernel" in before
    root = await ws.store.root(s.id)
    await edit_tree(
        ws, EditTreeIn(search="fresh", edits=[{"op": "update", "node_id": root.id, "notes": "bw-bound"}])
    )
    after = (await loop_state(ws, s.id)).next
    assert after.startswith("Phase 0 (init): the root holds your analysis; call propose_intents"), after
    assert "no triton seed kernel" in after  # still said: the first attempt is written from scratch
