"""The MCP server as a host sees it: a real `ksearch serve` subprocess, the real mcp client, over stdio and HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from ksearch.gpu.tasks import load_task
from tests.fixtures import ROW_SUM, SOFTMAX

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KSEARCH_TOKEN", None)  # a token would be demanded on the loopback server too
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    return env


@asynccontextmanager
async def stdio_client(db: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ksearch.server.cli", "serve", "--db", str(db)],
        env=_env(),
        cwd=str(ROOT),
    )
    async with Client(params, read_timeout_seconds=300) as c:
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def http_client(db: Path) -> AsyncIterator[Client]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksearch.server.cli", "serve", "--http", "--port", str(port), "--db", str(db)],
        env=_env(),
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server died"
                time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=300) as c:
            yield c
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def call(c: Client, name: str, args: dict[str, Any] | None = None) -> Any:
    res = await c.call_tool(name, args or {})
    assert not res.is_error, f"{name} failed: {res.content[0].text if res.content else res}"
    data = res.structured_content
    return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data


async def call_error(c: Client, name: str, args: dict[str, Any]) -> str:
    res = await c.call_tool(name, args)
    assert res.is_error, f"{name} should have failed with {args}"
    return res.content[0].text


async def full_flow(c: Client) -> None:
    """create_search → propose_intents → select_action → compile_kernel → run_correctness → benchmark →
    edit_tree → get_tree, on the built-in softmax task, on the CPU."""
    s = await call(c, "create_search", {"task": SOFTMAX, "name": "flow", "seed": 7})
    assert s["task"] == SOFTMAX and s["name"] == "flow"
    nodes = await call(
        c,
        "propose_intents",
        {
            "search": "flow",
            "intents": [
                {
                    "title": "one row per program with a larger block",
                    "rationale": "fewer programs",
                    "priority": 0.9,
                    "difficulty": 1,
                },
                {
                    "title": "online softmax in one pass",
                    "rationale": "read the row once",
                    "priority": 0.4,
                    "difficulty": 3,
                },
            ],
        },
    )
    assert [n["title"] for n in nodes] == [
        "one row per program with a larger block",
        "online softmax in one pass",
    ]
    # the loop asks for the seed's measurement (on the root) before the first round
    msg = await call_error(c, "select_action", {"search": "flow"})
    assert "seed" in msg and '"seed": true' in msg
    tree = await call(c, "get_tree", {"search": "flow", "format": "json"})
    root = next(n["id"] for n in tree["tree"]["nodes"] if n["kind"] == "root")
    seeded = await call(c, "benchmark", {"search": "flow", "node_id": root, "candidate": {"seed": True}})
    assert seeded["evaluation"]["status"] == "ok" and seeded["refine"] is None
    # its structured `next` is the loop's, as its text's last block says (it has none of its own)
    assert seeded["next"].startswith("Phase 1 (select)") or "select_action" in seeded["next"], seeded["next"]
    sel = await call(c, "select_action", {"search": "flow"})
    assert sel["node"]["id"] == nodes[0]["id"], sel
    assert sel["claimed"] and sel["round"] == 1 and sel["base_attempt_id"] == seeded["attempt_id"]
    assert sel["reason"]

    seed = load_task(SOFTMAX).seeds["triton"]
    comp = await call(c, "compile_kernel", {"search": "flow", "candidate": {"source": seed}})
    assert comp["report"]["ok"], comp
    cid = comp["candidate_id"]
    corr = await call(c, "run_correctness", {"search": "flow", "candidate": {"candidate_id": cid}})
    assert corr["evaluation"]["correctness"] and all(r["passed"] for r in corr["evaluation"]["correctness"])
    bench = await call(
        c, "benchmark", {"search": "flow", "node_id": sel["node"]["id"], "candidate": {"candidate_id": cid}}
    )
    assert bench["attempt_id"] is not None
    assert bench["evaluation"]["status"] == "ok", bench["summary"]
    assert bench["evaluation"]["timings"][0]["device"] == "cpu-interpreter"
    # the result carries the loop: attempt 1 of the cap, refine goes on, the intent stays active
    assert bench["refine"]["attempts"] == 1 and not bench["refine"]["over"], bench["refine"]
    assert "Write another implementation" in bench["next"], bench["next"]
    fin = await call(c, "finish_intent", {"search": "flow"})
    assert fin["node"]["status"] == "closed" and fin["node"]["best_attempt_id"] == bench["attempt_id"]
    assert fin["loop"]["phase"] == "update" and "Round 1: reflect on intent" in fin["reflect_prompt"]
    again = await c.call_tool(
        "benchmark", {"search": "flow", "node_id": sel["node"]["id"], "candidate": {"candidate_id": cid}}
    )
    assert again.is_error and "refine phase has ended" in again.content[0].text

    await call(
        c,
        "edit_tree",
        {
            "search": "flow",
            "edits": [
                {"op": "update", "node_id": nodes[1]["id"], "priority": 0.8, "notes": "next: try this"}
            ],
        },
    )
    tree = await call(c, "get_tree", {"search": "flow", "format": "json"})
    assert tree["best_attempt_id"] is None  # CPU-interpreter timings never rank: no search best without a GPU
    text = (await call(c, "get_tree", {"search": "flow"}))["text"]
    assert "online softmax in one pass" in text and "next: try this" in text
    res = await c.read_resource(f"ksearch://attempts/{bench['attempt_id']}")
    att = json.loads(res.contents[0].text)
    assert att["source"] == seed and att["attempt"]["node_id"] == sel["node"]["id"]


@pytest.mark.slow
async def test_stdio_tools_schemas_and_full_flow(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "k.db") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in (
            "create_search",
            "list_searches",
            "list_tasks",
            "get_tree",
            "propose_intents",
            "edit_tree",
            "select_action",
            "finish_intent",
            "final_evaluation",
            "compile_kernel",
            "run_correctness",
            "benchmark",
            "profile_ncu",
            "run_search",
        ):
            assert name in tools, name
            assert tools[name].description
        item = tools["propose_intents"].input_schema["properties"]["intents"]
        assert item["type"] == "array"
        assert tools["get_tree"].annotations.read_only_hint is True
        assert tools["edit_tree"].annotations.destructive_hint is True
        schema = json.dumps(tools["propose_intents"].input_schema)
        assert '"maximum": 1.0' in schema and '"maximum": 5' in schema  # priority and difficulty bounds
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert {"analyse_kernel", "implement_intent", "reflect_and_edit"} <= prompts
        await full_flow(c)
        p = await c.get_prompt("implement_intent", {"search": "flow", "node_id": "2"})
        assert "ModelNew" in p.messages[0].content.text


@pytest.mark.slow
async def test_http_full_flow(tmp_path: Path) -> None:
    async with http_client(tmp_path / "k.db") as c:
        await full_flow(c)


@pytest.mark.slow
async def test_bad_inputs_change_nothing(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "k.db") as c:
        await call(c, "create_search", {"task": SOFTMAX, "name": "b", "seed": 1})
        await call(
            c, "propose_intents", {"search": "b", "intents": [{"title": "vectorize loads", "priority": 0.5}]}
        )
        before = await call(c, "get_tree", {"search": "b", "format": "json"})

        msg = await call_error(c, "get_tree", {"search": "nope"})
        assert "nope" in msg
        msg = await call_error(c, "create_search", {"task": "no-such-task"})
        assert "no-such-task" in msg
        msg = await call_error(
            c, "propose_intents", {"search": "b", "intents": [{"title": "x" * 5, "priority": 2}]}
        )
        assert "priority" in msg
        msg = await call_error(c, "propose_intents", {"search": "b", "intents": [{"priority": 0.3}]})
        assert "title" in msg
        msg = await call_error(c, "edit_tree", {"search": "b", "edits": [{"op": "update", "node_id": 999}]})
        assert "999" in msg
        msg = await call_error(
            c, "edit_tree", {"search": "b", "edits": [{"op": "update", "node_id": 2, "best_attempt_id": 1}]}
        )
        assert "best_attempt_id" in msg
        msg = await call_error(c, "edit_tree", {"search": "b", "edits": [{"op": "prune", "node_id": 1}]})
        assert "root" in msg
        msg = await call_error(
            c, "benchmark", {"search": "b", "candidate": {"source": "def broken(:\n  pass"}}
        )
        assert "does not parse" in msg and "line 1" in msg
        # an attempt on an intent nobody claimed is refused with the way to claim it
        msg = await call_error(
            c, "benchmark", {"search": "b", "node_id": 2, "candidate": {"source": "def broken(:\n  pass"}}
        )
        assert "not being refined" in msg and "select_action" in msg and "node_id=2" in msg
        msg = await call_error(
            c, "propose_intents", {"search": "b", "intents": [{"title": "Vectorize loads!"}]}
        )
        assert "duplicate" in msg.lower()
        # a misspelt argument is refused by name, not dropped (the tool would run without it)
        msg = await call_error(c, "edit_tree", {"search": "b", "edit": [{"op": "prune", "node_id": 2}]})
        assert (
            "unknown argument(s) 'edit' for tool 'edit_tree'" in msg
            and "accepted: author, edits, reason, search" in msg
        )
        msg = await call_error(c, "propose_intents", {"search": "b", "intents": [], "parent": 1, "zz": 2})
        assert "'parent', 'zz'" in msg and "(did you mean 'parent_id' for 'parent'?)" not in msg  # not a field
        msg = await call_error(c, "create_search", {"task": SOFTMAX, "max_attempts": 3})
        assert "(did you mean 'max_attempts_per_intent' for 'max_attempts'?)" in msg, msg

        after = await call(c, "get_tree", {"search": "b", "format": "json"})
        assert after == before
        rows = await call(c, "list_searches")
        assert [r["attempts"] for r in rows] == [0]


@pytest.mark.slow
async def test_run_search_starts_the_driver_and_reports_progress(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "k.db") as c:
        # the built-in row_sum with a 9-row smoke workload: the driver's evaluations take a second each
        await call(c, "create_search", {"task": ROW_SUM, "name": "bg", "seed": 3})
        seen: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(message or "")

        res = await c.call_tool(
            "run_search", {"search": "bg", "rounds": 1, "wait_s": 240}, progress_callback=on_progress
        )
        assert not res.is_error, res.content[0].text
        out = res.structured_content
        assert out["running"] is False and out["message"].startswith("driver finished: 1 round(s) and ")
        assert out["attempts"] >= 2 and out["round"] == 1  # the seed, then one round
        assert seen and all("round" in m for m in seen)
        assert Path(out["log"]).read_text().count("policy: tuner") == 1
