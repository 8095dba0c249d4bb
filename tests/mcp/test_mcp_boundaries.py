"""Answers at the MCP boundary, over the real in-memory transport (`mcp.client.Client` on the server object):
an oversized `query_bank` text is refused saying the limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client import Client

from ksearch.server.mcp.server import KsearchServer
from ksearch.tools.bank.ops import QUERY_TEXT_CHARS

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    ks = KsearchServer(tmp_path / "k.db")
    try:
        async with Client(ks.mcp) as c:
            yield c
    finally:
        await ks.close()


async def test_query_bank_refuses_a_text_past_its_limit_and_says_it(client: Client) -> None:
    said = await client.call_tool("query_bank", {"text": "x" * 10_000_000})
    text = said.content[0].text  # type: ignore[union-attr]
    assert said.is_error, text
    assert f"at most {QUERY_TEXT_CHARS} characters" in text and "text" in text
    assert len(text) < 2000  # the refusal quotes an excerpt, never the 10 MB back
    ok = await client.call_tool("query_bank", {"text": "x" * QUERY_TEXT_CHARS})
    assert not ok.is_error, ok.content


async def test_an_unknown_candidate_id_names_what_a_host_can_send(client: Client) -> None:
    said = await client.call_tool(
        "benchmark", {"task": "softmax", "candidate": {"candidate_id": "c0123456789abcde"}}
    )
    text = said.content[0].text  # type: ignore[union-attr]
    assert said.is_error, text
    assert "no candidate 'c0123456789abcde'" in text and "`source`" in text
    tools = {t.name for t in (await client.list_tools()).tools}
    named = {w for w in ("compile_kernel", "run_correctness", "benchmark") if w in text}
    assert named and named <= tools, text
    assert "put_candidate" not in text, text  # a store method, no tool


async def test_list_tasks_lists_the_built_ins_create_search_takes(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["list_tasks"].annotations is not None and tools["list_tasks"].annotations.read_only_hint
    assert len(tools["list_tasks"].description or "") < 200  # a short description: hosts read them all
    said = await client.call_tool("list_tasks", {})
    assert not said.is_error, said.content
    assert isinstance(said.structured_content, dict)
    rows = said.structured_content["result"]
    names = [r["name"] for r in rows]
    assert "softmax" in names and all(r["workloads"]["smoke"] for r in rows)
    made = await client.call_tool("create_search", {"task": names[0], "name": "listed"})
    assert not made.is_error, made.content  # a listed name is one create_search takes


@pytest.mark.slow
async def test_a_seed_benchmarked_without_node_id_says_why_it_did_not_count(client: Client) -> None:
    from tests.fixtures import SOFTMAX

    made = await client.call_tool("create_search", {"task": SOFTMAX, "name": "seedless"})
    assert not made.is_error, made.content
    tree = await client.call_tool("get_tree", {"search": "seedless", "format": "json"})
    assert isinstance(tree.structured_content, dict)
    root = tree.structured_content["tree"]["root_id"]
    said = await client.call_tool("benchmark", {"search": "seedless", "candidate": {"seed": True}})
    assert not said.is_error, said.content
    out = said.structured_content
    assert isinstance(out, dict) and out["attempt_id"] is not None
    nxt = out["next"]
    assert f"attempt #{out['attempt_id']} does not count as the seed step" in nxt, nxt
    assert "recorded without node_id" in nxt and "on the root" in nxt, nxt
    assert "measure the task's seed first" in nxt and f"node_id={root}" in nxt, nxt  # and the step still due


@pytest.mark.slow
async def test_a_typo_both_compilers_refuse_reads_as_one_compile_error(client: Client) -> None:
    """`tl.maxx`: the interpreter fails, and so does the GPU compile (a dry run): the answer says compile error
    throughout, never "INCORRECT", and drops the interpreter's "compiled for a GPU it may run"."""
    from ksearch.gpu.tasks import load_task
    from tests.fixtures import SOFTMAX

    seed = load_task(SOFTMAX).seeds["triton"]
    assert "tl.max(" in seed
    said = await client.call_tool(
        "run_correctness", {"task": SOFTMAX, "candidate": {"source": seed.replace("tl.max(", "tl.maxx(", 1)}}
    )
    text = "\n".join(c.text for c in said.content)  # type: ignore[union-attr]
    assert isinstance(said.structured_content, dict)
    ev = said.structured_content["evaluation"]
    assert ev["status"] == "compile_error", text
    assert "COMPILE ERROR on smoke" in text and "INCORRECT" not in text, text
    assert "fails too" in ev["error"], ev["error"]
    everywhere = [ev["error"], *(c["message"] for c in ev["correctness"])]
    everywhere += [d["message"] for d in (ev["compile"] or {}).get("diagnostics", [])]
    assert not [m for m in everywhere if "it may run" in m], everywhere
