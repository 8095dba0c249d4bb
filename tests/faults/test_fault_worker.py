"""A sandbox worker killed from outside in the middle of `benchmark`: that evaluation is reported as a
crash and recorded as such, the pool starts a fresh worker, the next evaluation is fine, and nothing
committed before is touched. Driven through the MCP server (in-process), as an assistant would."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from ksearch.server.mcp.server import build_server
from tests.faults.faultkit import SEED, SLOW_SEED, attempts, integrity, worker_pids
from tests.fixtures import SOFTMAX

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Client, Path, Path]]:
    # The sandbox puts its scratch root under the temp dir: keep it inside this test's directory.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    db = tmp_path / "k.db"
    ks = build_server(db, n_workers=1)
    try:
        async with Client(ks.mcp) as c:
            yield c, db, tmp_path / "tmp" / f"ksearch-sandbox-{os.getuid()}"
    finally:
        await ks.close()


async def _call(c: Client, tool: str, args: dict[str, Any]) -> Any:
    res = await c.call_tool(tool, args)
    assert not res.is_error, res.content[0].text
    return res.structured_content


@pytest.mark.slow
async def test_worker_killed_mid_benchmark_is_a_crash_and_the_next_evaluation_is_fine(
    client: tuple[Client, Path, Path],
) -> None:
    c, db, root = client
    await _call(c, "create_search", {"task": SOFTMAX, "name": "w", "seed": 5})
    nodes = (await _call(c, "propose_intents", {"search": "w", "intents": [{"title": "wider blocks"}]}))[
        "result"
    ]
    # the loop: the seed measured on the root, then the intent claimed (its refine phase runs)
    await _call(
        c, "benchmark", {"search": "w", "node_id": nodes[0]["parent_id"], "candidate": {"seed": True}}
    )
    await _call(c, "select_action", {"search": "w", "node_id": nodes[0]["id"]})
    first = await _call(
        c, "benchmark", {"search": "w", "node_id": nodes[0]["id"], "candidate": {"source": SEED}}
    )
    assert first["evaluation"]["status"] == "ok", first["summary"]
    before = attempts(db)

    def marker() -> Path | None:  # in the worker's own scratch directory (its HOME)
        found = [p for p in root.glob("sessions/*/w*/busy.marker") if p.read_text().strip()]
        return found[0] if found else None

    out: dict[str, Any] = {}

    async def bench() -> None:
        out["res"] = await c.call_tool(
            "benchmark", {"search": "w", "node_id": nodes[0]["id"], "candidate": {"source": SLOW_SEED}}
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(bench)
        for _ in range(2400):  # up to 2 minutes for the worker to start and reach the timed call
            if (seen := marker()) is not None:
                break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("the slow candidate never started running")
        (victim,) = worker_pids(scratch=seen.parent, itself=True)  # its host PID (jailed, it is 2 inside)
        os.kill(victim, signal.SIGKILL)  # from outside: the worker's own pid, as an operator would
    res = out["res"]
    assert not res.is_error, res.content[0].text
    crashed = res.structured_content
    assert crashed["evaluation"]["status"] == "crash", crashed["summary"]
    assert "SIGKILL" in crashed["evaluation"]["error"], crashed["evaluation"]["error"]
    assert crashed["attempt_id"] is not None  # the crash is a result, recorded like any other

    again = await _call(
        c, "benchmark", {"search": "w", "node_id": nodes[0]["id"], "candidate": {"source": SEED}}
    )
    assert again["evaluation"]["status"] == "ok", again["summary"]
    assert not Path(f"/proc/{victim}").exists()  # the killed worker is gone (reaped), a fresh one served

    after = attempts(db)
    assert {k: after[k] for k in before} == before  # what was committed before is untouched
    statuses = [row[7] for row in after.values()]
    assert statuses == ["ok", "ok", "crash", "ok"], statuses  # the seed, then the intent's three
    tree = await _call(c, "get_tree", {"search": "w", "format": "json"})
    if first["evaluation"]["timings"][0]["device"] == "cpu-interpreter":
        assert tree["best_attempt_id"] is None  # interpreter timings never rank: no search best
    else:
        assert tree["best_attempt_id"] in (first["attempt_id"], again["attempt_id"])
    assert integrity(db) == "ok"
