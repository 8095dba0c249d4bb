"""The loop over MCP, in memory (the real server object, the real client): every result that touches a
search says the next step, prompts default to the intent in play, the task resource takes a path."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from mcp.client import Client

from ksearch.server.mcp.server import KsearchServer

FIXTURE = Path(__file__).parents[1] / "driver" / "fixtures" / "scaled_relu.py"
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _texts(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.text for c in res.content]


@pytest.mark.slow
async def test_results_carry_next_and_prompts_default_to_the_intent_in_play(tmp_path: Path) -> None:
    ks = KsearchServer(tmp_path / "k.db")
    try:
        async with Client(ks.mcp) as c:
            res = await c.call_tool("create_search", {"task": str(FIXTURE), "name": "s", "rounds": 1})
            assert not res.is_error and _texts(res)[-1].startswith("next: Phase 0 (init)"), _texts(res)
            res = await c.call_tool(
                "propose_intents", {"search": "s", "intents": [{"title": "flat grid over all elements"}]}
            )
            assert not res.is_error and "select_action" in _texts(res)[-1], _texts(res)
            # the structured result is unchanged by the added text
            assert res.structured_content["result"][0]["title"] == "flat grid over all elements"
            with pytest.raises(Exception, match="no intent is being refined"):
                await c.get_prompt("implement_intent", {"search": "s"})
            res = await c.call_tool("select_action", {"search": "s"})
            assert res.structured_content["claimed"] and "Phase 2 (refine)" in _texts(res)[-1]
            prompt = await c.get_prompt("implement_intent", {"search": "s"})
            text = prompt.messages[0].content.text
            assert "Implement intent #2" in text and "No base code" in text
            # the task resource takes the path create_search took, percent-encoded into one segment
            uri = "ksearch://tasks/" + urllib.parse.quote(str(FIXTURE), safe="")
            got = json.loads((await c.read_resource(uri)).contents[0].text)
            assert "class Model" in got["reference_source"] and got["seed_languages"] == []
            # what the reference's run derived beside what the task declares (a host read op "" and bound
            # "unknown" there while the prompt said which op and bound): by now the prompts have derived them
            assert isinstance(got["facts"], dict) and got["facts"]["bound"] != "unknown", got["facts"]
            # the prompts call it by its file's name; the search's name reaches it too
            for name in (FIXTURE.stem, "s"):
                same = json.loads((await c.read_resource(f"ksearch://tasks/{name}")).contents[0].text)
                assert same["reference_source"] == got["reference_source"], name
    finally:
        await ks.close()
