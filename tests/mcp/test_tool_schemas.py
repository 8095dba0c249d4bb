"""Every tool input a host sees is described: each property of each tool's input schema, nested models
($defs) and inline objects included, carries a non-empty description (real server object, real client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from ksearch.server.mcp.server import KsearchServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def undescribed(schema: Any, where: str) -> list[str]:
    """Paths of properties without a description, anywhere in `schema` (properties, $defs, items, anyOf)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if not (isinstance(prop, dict) and str(prop.get("description", "")).strip()):
                found.append(f"{where}.{name}")
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                for name, prop in value.items():
                    found += undescribed(prop, f"{where}.{name}")
            elif key == "$defs" and isinstance(value, dict):
                for name, d in value.items():
                    found += undescribed(d, f"{where}.$defs.{name}")
            elif isinstance(value, (dict, list)):
                found += undescribed(value, where)
    elif isinstance(schema, list):
        for item in schema:
            found += undescribed(item, where)
    return found


def test_the_walker_finds_what_is_missing() -> None:
    schema = {
        "properties": {"a": {"description": "x"}, "b": {"$ref": "#/$defs/M"}},
        "$defs": {"M": {"properties": {"c": {"description": " "}, "d": {"description": "y"}}}},
    }
    assert undescribed(schema, "t") == ["t.b", "t.$defs.M.c"]


async def test_every_tool_input_property_has_a_description(tmp_path: Path) -> None:
    ks = KsearchServer(tmp_path / "k.db")
    try:
        async with Client(ks.mcp) as c:
            tools = (await c.list_tools()).tools
        assert len(tools) >= 13
        missing = [p for t in tools for p in undescribed(t.input_schema, t.name)]
        assert missing == [], missing
        by_name = {t.name: t.input_schema for t in tools}
        # the nested candidate model is itself described where hosts read it
        for name in ("compile_kernel", "run_correctness", "benchmark", "profile_ncu"):
            assert by_name[name]["$defs"]["CandidateRef"]["properties"]["source"]["description"], name
    finally:
        await ks.close()
