"""Handles: names a caller gives intents in propose_intents, unique in their search, taken wherever a node is named
(parents of new intents, edits' nodes and new parents); refusals name what was wrong and write nothing."""

from __future__ import annotations

import pytest

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.errors import EditRejected
from ksearch.worldmodel.models import Search
from ksearch.worldmodel.render import render_tree
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


async def test_handles_name_parents_in_one_request_and_later(store: Store, search: Search) -> None:
    added = await apply_intents(
        store,
        search.id,
        [
            {"title": "tile the rows", "handle": "tile"},
            {
                "title": "tile of 64 rows",
                "parent_id": "tile",
                "handle": "tile.64",
            },  # an earlier item's handle
            {"title": "no handle here"},
        ],
        "llm:m",
        1,
    )
    tile, t64, plain = added
    assert tile.handle == "tile" and t64.handle == "tile.64" and plain.handle is None
    assert t64.parent_id == tile.id
    [deeper] = await apply_intents(
        store, search.id, [{"title": "unroll it", "parent_id": "tile.64"}], "human", 1
    )
    assert deeper.parent_id == t64.id
    edits = await store.list_edits(search.id)
    inserts = [e.payload for e in edits if e.op == "insert" and e.payload["kind"] == "intent"]
    assert inserts[1]["parent_id"] == tile.id and inserts[1]["handle"] == "tile.64"  # the log holds ids
    assert "handle" not in inserts[2]
    text = render_tree(await store.list_nodes(search.id), {})
    assert f"#{tile.id} (tile) [open]" in text and f"#{plain.id} [open]" in text


async def test_bad_handles_are_refused_with_what_is_accepted(store: Store, search: Search) -> None:
    await apply_intents(store, search.id, [{"title": "tile the rows", "handle": "tile"}], "human", 1)
    before = await store.list_nodes(search.id)
    with pytest.raises(EditRejected) as err:
        await apply_intents(
            store,
            search.id,
            [
                {"title": "again tile", "handle": "tile"},  # 0 taken in the search
                {"title": "first of two", "handle": "twin"},
                {"title": "second of two", "handle": "twin"},  # 2 taken in the request
                {"title": "orphan", "parent_id": "nowhere"},  # 3 names nothing
                {"title": "too early", "parent_id": "later"},  # 4 a later item's handle
                {"title": "the later one", "handle": "later"},
                {"title": "digits first", "handle": "9lives"},  # 6 not a handle
                {"title": "spaced", "handle": "a b"},  # 7 not a handle
            ],
            "human",
            1,
        )
    by = {p.index: p for p in err.value.details}
    assert sorted(by) == [0, 2, 3, 4, 6, 7]
    assert "handle 'tile' is already node #" in by[0].problem and by[0].field == "handle"
    assert "already item 1's" in by[2].problem
    assert "no node of search" in by[3].problem and "its handles: tile" in by[3].problem
    assert by[3].field == "parent_id" and "handle" in by[3].accepted
    assert "given by a later item" in by[4].problem
    assert by[6].field == "handle" and "a letter, then up to 39" in by[6].accepted
    assert by[7].field == "handle"
    assert await store.list_nodes(search.id) == before  # all or nothing


async def test_a_handle_is_the_search_s_own(store: Store, search: Search) -> None:
    other = await store.create_search("other", "t", {})
    [mine] = await apply_intents(store, search.id, [{"title": "tile the rows", "handle": "tile"}], "human", 1)
    [theirs] = await apply_intents(
        store, other.id, [{"title": "tile the rows", "handle": "tile"}], "human", 1
    )
    assert mine.id != theirs.id
    [moved_kid] = await apply_intents(
        store, other.id, [{"title": "a child", "parent_id": "tile"}], "human", 1
    )
    assert moved_kid.parent_id == theirs.id


async def test_edits_take_handles_and_hash_ids(store: Store, search: Search) -> None:
    a, b = await apply_intents(
        store,
        search.id,
        [{"title": "tile the rows", "handle": "tile"}, {"title": "fuse the max"}],
        "human",
        1,
    )
    done = await apply_edits(
        store,
        search.id,
        [
            {"op": "update", "node_id": "tile", "priority": 0.9},
            {"op": "move", "node_id": f"#{b.id}", "parent_id": "tile"},
        ],
        "human",
        1,
    )
    assert done[0].priority == 0.9 and done[1].parent_id == a.id
    log = [e for e in await store.list_edits(search.id) if e.op in ("update", "move")]
    assert [e.node_id for e in log] == [a.id, b.id] and log[1].payload["parent_id"] == a.id
    with pytest.raises(EditRejected) as err:
        await apply_edits(
            store,
            search.id,
            [{"op": "pin", "node_id": "tiel"}, {"op": "move", "node_id": "tile", "parent_id": "nope"}],
            "human",
            1,
        )
    by = {p.index: p for p in err.value.details}
    assert "goes by handle 'tiel'" in by[0].problem and by[0].field == "node_id"
    assert "goes by handle 'nope'" in by[1].problem and by[1].field == "parent_id"
    with pytest.raises(EditRejected) as bad:
        await apply_edits(store, search.id, [{"op": "pin", "node_id": 0}], "human", 1)
    [p] = bad.value.details
    assert p.field == "node_id" and "a node id (a positive integer, or '#12') or a handle" in p.problem
    assert (await store.get_node(a.id)).pinned is False
