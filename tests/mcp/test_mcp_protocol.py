"""Protocol answers a host can act on: invalid-params codes with the accepted names for unknown prompts,
missing prompt arguments and unknown resources; tool-argument errors in plain wording; no echo of a huge
value (real server object, real client)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from ksearch.server.mcp.server import KsearchServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_protocol_errors_are_invalid_params_with_what_is_accepted(tmp_path: Path) -> None:
    ks = KsearchServer(tmp_path / "k.db")
    try:
        async with Client(ks.mcp) as c:
            with pytest.raises(MCPError) as e:
                await c.get_prompt("nope", {})
            assert e.value.error.code == INVALID_PARAMS and "analyse_kernel" in e.value.error.message
            with pytest.raises(MCPError) as e:
                await c.get_prompt("analyse_kernel", {})
            assert (
                e.value.error.code == INVALID_PARAMS
                and "needs the argument(s) search" in e.value.error.message
            )
            for uri, needle in (
                ("ksearch://tasks/nope", "unknown task 'nope'"),
                ("ksearch://searches/nope/tree", "no search named 'nope'"),
                ("ksearch://attempts/99", "no attempt #99"),
            ):
                with pytest.raises(MCPError) as e:
                    await c.read_resource(uri)
                assert e.value.error.code == INVALID_PARAMS and needle in e.value.error.message, uri
            res = await c.call_tool("get_tree", {"search": {"x": 1}})
            text = res.content[0].text
            assert res.is_error and "search.int" in text and "errors.pydantic.dev" not in text
            res = await c.call_tool("get_tree", {"search": "x" * 1_000_000})
            assert res.is_error and len(res.content[0].text) < 600  # never the whole value echoed
            assert "first 80 of 1000000 characters" in res.content[0].text
            res = await c.call_tool("list_searches", {})
            assert not res.is_error and res.content and res.structured_content == {"result": []}
    finally:
        await ks.close()
