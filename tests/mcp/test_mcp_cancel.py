"""A cancelled tool call stops its work: the sandbox job is killed with it, the next call neither waits
for it nor is blamed for it (it runs in the slot's spare process, started ahead, not in a cold-started
one), and nothing is recorded (real server, real client, real worker processes)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from ksearch.gpu.tasks import load_task
from ksearch.server.mcp.server import KsearchServer

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]
SEED = load_task("softmax").seeds["triton"]
# host code that keeps the worker busy for far longer than the test waits
SLOW = SEED.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "    def forward(self, x):\n", "    def forward(self, x):\n        time.sleep(60)\n", 1
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
async def test_a_cancelled_benchmark_stops_and_the_next_call_is_not_blamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSEARCH_SPARE_WORKERS", "1")  # the CPU's default is none
    assert "time.sleep(60)" in SLOW
    ks = KsearchServer(tmp_path / "k.db")
    try:
        async with Client(ks.mcp) as c:
            await c.call_tool("create_search", {"task": "softmax", "name": "s"})
            seeded = await c.call_tool(
                "benchmark", {"search": "s", "node_id": 1, "candidate": {"seed": True}}
            )
            assert not seeded.is_error, seeded.content[0].text
            await c.call_tool("propose_intents", {"search": "s", "intents": [{"title": "one pass"}]})
            sel = await c.call_tool("select_action", {"search": "s"})
            node = sel.structured_content["node"]["id"]
            w = (await (await ks.ws()).sandbox()).pool.workers[0]  # type: ignore[attr-defined]
            assert w.hello is not None
            busy, spare, starts = w.hello["pid"], await w.wait_spare(), w.starts
            assert spare is not None and spare != busy
            with anyio.move_on_after(8) as scope:
                await c.call_tool(
                    "benchmark", {"search": "s", "node_id": node, "candidate": {"source": SLOW}}
                )
            assert scope.cancelled_caught  # still sleeping when the client gave up
            t0 = time.monotonic()
            res = await c.call_tool("run_correctness", {"search": "s", "candidate": {"seed": True}})
            waited = time.monotonic() - t0
            assert not res.is_error, res.content[0].text
            assert res.structured_content["evaluation"]["status"] == "ok"  # not blamed for the sleeper
            assert waited < 30, f"the next call waited {waited:.1f} s behind the cancelled job"
            # the slot was handed its spare as the cancelled job gave it back: no cold start was waited for
            assert w.hello["pid"] == spare and (w.starts, w.spares_taken) == (starts + 1, 1)
            assert not Path(f"/proc/{busy}").exists()  # the sleeper's process is gone (reaped)
            tree = await c.call_tool("get_tree", {"search": "s", "format": "json"})
            att = next(n for n in tree.structured_content["tree"]["nodes"] if n["id"] == node)
            assert att["visits"] == 0  # the cancelled attempt was never recorded
    finally:
        await ks.close()
