"""benchmark_batch as a host calls it: a real `ksearch serve` over stdio, the real mcp client and workers. Two
implementations of a claimed intent in one call, recorded in order, with progress named per item and a text the
host reads: each item's outcome and the batch's pace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures import SOFTMAX
from tests.mcp.test_mcp import call, call_error, stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.slow, pytest.mark.timeout(300)]
SEED = (Path(SOFTMAX).parent / "seed_triton.py").read_text()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_host_benchmarks_two_implementations_in_one_call(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "k.db") as c:
        await call(c, "create_search", {"task": SOFTMAX, "name": "b", "seed": 7})
        tree = await call(c, "get_tree", {"search": "b", "format": "json"})
        root = next(n["id"] for n in tree["tree"]["nodes"] if n["kind"] == "root")
        await call(c, "benchmark", {"search": "b", "node_id": root, "candidate": {"seed": True}, "trials": 1})
        [intent] = await call(c, "propose_intents", {"search": "b", "intents": [{"title": "two ways"}]})
        await call(c, "select_action", {"search": "b"})
        items = [
            {"candidate": {"source": SEED + "\n# one\n"}, "node_id": intent["id"]},
            {"candidate": {"source": "def broken(:\n"}, "node_id": intent["id"]},
        ]
        seen: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(message or "")

        res = await c.call_tool(
            "benchmark_batch", {"search": "b", "items": items, "trials": 1}, progress_callback=on_progress
        )
        assert not res.is_error, res.content[0].text
        out = res.structured_content
        assert [r["recorded"] for r in out["results"]] == [True, True]
        statuses = [r["result"]["evaluation"]["status"] for r in out["results"]]
        assert statuses == ["ok", "compile_error"]
        first, second = (r["result"]["attempt_id"] for r in out["results"])
        assert second == first + 1  # in the batch's order
        text = "\n".join(b.text for b in res.content if hasattr(b, "text"))
        # each item as benchmark says it (its few lines, its own took line), the batch's pace and wall time: no JSON
        assert "## item 0\n" in text and "## item 1\n" in text and "2 of 2 evaluated in" in text, text
        assert "status: ok" in text and "status: compile_error" in text and '"results"' not in text, text
        assert f"recorded as attempt #{first}" in text and text.count("took ") == 3, text
        assert "for 2 item(s) (each item's own line says where its seconds went" in text, text
        assert any(m.startswith("[1/2] ") for m in seen), seen
        # bad input: named, nothing run
        msg = await call_error(c, "benchmark_batch", {"search": "b", "items": []})
        assert "items" in msg


async def test_a_batched_host_names_its_intents_by_handle(tmp_path: Path) -> None:
    """A host that plans a round before it reads ids: handles in propose_intents, then every later call names the
    intents by them (claim, batch, finish with edits and new intents under a handle), over the real transport."""
    async with stdio_client(tmp_path / "k.db") as c:
        await call(c, "create_search", {"task": SOFTMAX, "name": "h", "seed": 7})
        await call(c, "benchmark", {"search": "h", "node_id": "#1", "candidate": {"seed": True}, "trials": 1})
        one, four = await call(
            c,
            "propose_intents",
            {
                "search": "h",
                "intents": [
                    {"title": "one pass over the row", "handle": "onepass"},
                    {"title": "one pass with four warps", "parent_id": "onepass", "handle": "onepass.w4"},
                ],
            },
        )
        assert (one["handle"], four["parent_id"]) == ("onepass", one["id"])
        sel = await call(c, "select_action", {"search": "h", "node_id": "onepass"})
        assert sel["node"]["id"] == one["id"]
        got = await c.get_prompt("implement_intent", {"search": "h", "node_id": "onepass"})
        assert f"# Implement intent #{one['id']}: one pass over the row" in got.messages[0].content.text
        out = await call(
            c,
            "benchmark_batch",
            {
                "search": "h",
                "items": [{"candidate": {"source": SEED + "\n# a\n"}, "node_id": "onepass"}],
                "trials": 1,
            },
        )
        assert out["results"][0]["recorded"] and out["results"][0]["result"]["evaluation"]["status"] == "ok"
        await call(
            c,
            "finish_intent",
            {
                "search": "h",
                "node_id": "onepass",
                "edits": [{"op": "pin", "node_id": "onepass.w4"}],
                "new_intents": [
                    {"title": "keep the row in registers", "parent_id": "onepass", "handle": "regs"}
                ],
            },
        )
        nxt = await call(c, "select_action", {"search": "h", "claim": False})
        assert nxt["node"]["handle"] == "onepass.w4" and nxt["node"]["pinned"]
        tree = await call(c, "get_tree", {"search": "h"})
        text = tree if isinstance(tree, str) else str(tree)
        assert f"#{one['id']} (onepass) [closed]" in text and "(regs) [open]" in text, text
        msg = await call_error(c, "select_action", {"search": "h", "node_id": "onepas"})
        assert "no node of search" in msg and "goes by handle 'onepas'" in msg and "onepass.w4" in msg
        msg = await call_error(
            c, "propose_intents", {"search": "h", "intents": [{"title": "again", "handle": "regs"}]}
        )
        assert "handle 'regs' is already node #" in msg
