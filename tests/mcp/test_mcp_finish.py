"""finish_intent with the reflection's edits, as a host sends it over stdio to a real `ksearch serve`: a refused
edit changes nothing and says so in edit_tree's words; sent in one turn with select_action, the edits are applied
before the next claim, which follows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp.client import Client

from tests.mcp.test_mcp import call, call_error, stdio_client
from tests.tools.toolkit import TINY_TASK

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _claimed(c: Client, tmp_path: Path) -> list[dict[str, Any]]:
    """A seedless search with three intents, the first claimed (round 1)."""
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    await call(c, "create_search", {"task": str(task), "name": "b", "rounds": 3})
    intents = [
        {"title": "one row per program", "priority": 0.9},
        {"title": "two rows per program", "priority": 0.5},
        {"title": "split the columns", "priority": 0.1},
    ]
    nodes = await call(c, "propose_intents", {"search": "b", "intents": intents})
    sel = await call(c, "select_action", {"search": "b"})
    assert sel["claimed"] and sel["node"]["id"] == nodes[0]["id"]
    return list(nodes)


@pytest.mark.slow  # a server process, and the reflect prompt reads the sandbox's hardware facts (a worker starts)
async def test_finish_with_edits_refused_whole_then_sent_with_the_next_claim_in_one_turn(
    tmp_path: Path,
) -> None:
    """A refused edit changes nothing and says so in edit_tree's words. Sent together (as a host sends several
    calls in one turn), finish_intent's edits are applied before select_action runs: the claim follows them."""
    async with stdio_client(tmp_path / "k.db") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert {"edits", "new_intents", "reason", "author"} <= set(
            tools["finish_intent"].input_schema["properties"]
        )
        a, b, low = await _claimed(c, tmp_path)
        before = await call(c, "get_tree", {"search": "b", "format": "json"})
        bad = [{"op": "update", "node_id": b["id"], "priority": 0.2}, {"op": "reopen", "node_id": b["id"]}]
        msg = await call_error(c, "finish_intent", {"search": "b", "edits": bad})
        line = f"- item 1 (node #{b['id']}): node #{b['id']} is open; accepted: reopen of a closed, failed or pruned node"
        assert "`edits` refused: no edit was applied, and intent #" in msg and line in msg
        assert line in await call_error(c, "edit_tree", {"search": "b", "edits": bad})
        # a field out of its bounds is refused by the arguments' schema, as edit_tree's is
        out_of_bounds = [{"op": "update", "node_id": b["id"], "priority": 2}]
        assert "edits.0.priority" in await call_error(
            c, "finish_intent", {"search": "b", "edits": out_of_bounds}
        )
        assert await call(c, "get_tree", {"search": "b", "format": "json"}) == before  # #a is still active

        finish_args = {
            "search": "b",
            "edits": [
                {"op": "update", "node_id": low["id"], "priority": 0.95, "notes": "now the best bet"},
                {"op": "prune", "node_id": b["id"], "reason": "refuted by round 1"},
            ],
            "new_intents": [{"title": "keep the row in registers", "parent_id": a["id"]}],
            "reason": "what round 1 taught",
            "author": "llm:host",
            "with_prompt": True,  # by default a call that brings its reflection gets no prompt back
        }
        got: dict[str, Any] = {}

        async def send(name: str, args: dict[str, Any]) -> None:
            got[name] = await c.call_tool(name, args)

        async with anyio.create_task_group() as tg:  # both requests are in flight at once
            tg.start_soon(send, "finish_intent", finish_args)
            await anyio.lowlevel.checkpoint()  # finish_intent's request is written first
            tg.start_soon(send, "select_action", {"search": "b"})
        fin, sel = got["finish_intent"], got["select_action"]
        assert not fin.is_error and not sel.is_error, (fin.content, sel.content)
        out = fin.structured_content
        [new_id] = out["applied"]["new_intents"]
        assert out["applied"] == {"edits": 2, "new_intents": [new_id]} and out["node"]["status"] == "failed"
        said = f"Already applied with finish_intent: 2 edits and the new intent #{new_id}; do not send them again."
        assert said in out["reflect_prompt"] and fin.content[-1].text.startswith(f"next: {said}")
        # said once, as the last block (the result's text had said it too)
        assert [ln for b in fin.content for ln in b.text.splitlines() if ln.startswith("next:")] == [
            fin.content[-1].text
        ]
        assert sel.structured_content["claimed"] and sel.structured_content["node"]["id"] == low["id"]
        tree = await call(c, "get_tree", {"search": "b", "format": "json"})
        by_id = {n["id"]: n for n in tree["tree"]["nodes"]}
        assert by_id[b["id"]]["status"] == "pruned" and by_id[new_id]["parent_id"] == a["id"]
