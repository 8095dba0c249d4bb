"""get_tree, called as a function: the three views of a search's tree, and a clear NotFound for a search that
does not exist; tree_text, the titled text `ksearch tree` prints."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.get_tree import GetTreeIn, get_tree, tree_text
from ksearch.tools.loop.runs import hold_run, mark_running
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import IntentSpec, Search

pytestmark = pytest.mark.anyio


async def _grown(ws: Workspace) -> tuple[Search, list[int]]:
    s = await create_search(ws, CreateSearchIn(task="row_sum", name="t"))
    a, b = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="t",
            intents=[
                IntentSpec(title="two rows per program", priority=0.9),
                IntentSpec(title="wider blocks"),
            ],
        ),
    )
    [c] = await propose_intents(
        ws, ProposeIntentsIn(search="t", intents=[IntentSpec(title="four rows per program", parent_id=a.id)])
    )
    return s, [a.id, b.id, c.id]


async def test_the_text_view_shows_every_node_within_its_budget(bare_ws: Workspace) -> None:
    s, (a, _b, c) = await _grown(bare_ws)
    out = await get_tree(bare_ws, GetTreeIn(search="t"))
    assert (out.search_id, out.search_name, out.round, out.nodes, out.best_attempt_id) == (
        s.id,
        "t",
        0,
        4,
        None,
    )
    assert out.tree is None and out.best_lost == "" and out.text is not None
    lines = out.text.splitlines()
    assert lines[0].startswith("tree: 4 nodes (3 open); no best yet")
    assert f"  #{a} [open] p0.90 d3 two rows per program" in lines
    assert f"    #{c} [open] p0.50 d3 four rows per program" in lines  # a child is indented under its parent
    small = await get_tree(bare_ws, GetTreeIn(search=s.id, budget_chars=500))
    assert small.text is not None and len(small.text) <= 500


async def test_the_json_view_holds_every_node_and_its_children(bare_ws: Workspace) -> None:
    s, (a, b, c) = await _grown(bare_ws)
    out = await get_tree(bare_ws, GetTreeIn(search=str(s.id), format="json"))  # an id as a digit string
    assert out.text is None and out.tree is not None
    nodes = {n["id"]: n for n in out.tree["nodes"]}
    root = out.tree["root_id"]
    assert set(nodes) == {root, a, b, c} and out.tree["counts"] == {"open": 3}
    assert nodes[root]["children"] == [a, b] and nodes[a]["children"] == [c]
    assert nodes[c]["parent_id"] == a and nodes[a]["priority"] == 0.9


async def test_the_mermaid_view_is_a_flowchart_of_the_tree(bare_ws: Workspace) -> None:
    s, (a, _b, c) = await _grown(bare_ws)
    out = await get_tree(bare_ws, GetTreeIn(search="t", format="mermaid"))
    assert out.text is not None and out.text.startswith("flowchart TD")
    root = (await bare_ws.store.root(s.id)).id
    assert (
        f"n{root} --> n{a}" in out.text
        and f"n{a} --> n{c}" in out.text
        and f"n{root} --> n{c}" not in out.text
    )


async def test_an_unknown_search_is_not_found_naming_those_that_exist(bare_ws: Workspace) -> None:
    await _grown(bare_ws)
    with pytest.raises(NotFound, match=r"no search named 'tt'; existing searches \(id 'name'\): 1 't'"):
        await get_tree(bare_ws, GetTreeIn(search="tt"))
    with pytest.raises(NotFound, match=r"no search with id 7; existing searches \(id 'name'\): 1 't'"):
        await get_tree(bare_ws, GetTreeIn(search=7))


def test_bad_view_arguments_are_refused_by_the_input_model() -> None:
    with pytest.raises(ValidationError, match="'text', 'json' or 'mermaid'"):
        GetTreeIn(search="t", format="dot")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="greater than or equal to 500"):
        GetTreeIn(search="t", budget_chars=10)


async def test_the_titled_text_names_the_search_its_task_round_and_shown_status(bare_ws: Workspace) -> None:
    s, (a, _b, c) = await _grown(bare_ws)
    text = await tree_text(bare_ws, s.id)
    lines = text.splitlines()
    assert lines[0] == "search 't' on row_sum (round 0, new)"
    assert lines[1].startswith("tree: 4 nodes (3 open); no best yet")
    assert f"  #{a} [open] p0.90 d3 two rows per program" in lines
    assert f"    #{c} [open] p0.50 d3 four rows per program" in lines
    async with hold_run(bare_ws, s.id):
        await mark_running(bare_ws, s.id)
        assert (await tree_text(bare_ws, s.id)).startswith("search 't' on row_sum (round 0, running)\n")
    small = await tree_text(bare_ws, s.id, 450)
    assert len(small) <= 450 and small.startswith("search 't' on row_sum")


async def test_the_titled_text_refuses_a_budget_too_small_and_an_unknown_search(bare_ws: Workspace) -> None:
    s, _ = await _grown(bare_ws)
    with pytest.raises(ValueError, match="budget_chars 10 is too small; accepted: at least"):
        await tree_text(bare_ws, s.id, 10)
    with pytest.raises(NotFound, match="no search with id 7"):
        await tree_text(bare_ws, 7)
