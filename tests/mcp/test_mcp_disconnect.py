"""A host that disconnects mid-call: the stdio server ends, every process it started (workers, spares, the zygote)
ends with it, and nothing is recorded half: the benchmark in flight left either a whole attempt or none, and the
database opens and answers afterwards (real server process, real worker processes)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from tests.fixtures import SOFTMAX
from tests.mcp.serve_proc import spawn_serve
from tests.mcp.test_mcp_progress import SEED

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]
# a candidate whose every call sleeps long: the benchmark is still running when the host goes away
STUCK = SEED.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "    def forward(self, x):\n", "    def forward(self, x):\n        time.sleep(60)\n", 1
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def test_a_host_that_disconnects_mid_benchmark_leaves_no_process_and_nothing_half_recorded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "k.db"
    s = await spawn_serve(db, tmp_path / "serve.log", stderr=asyncio.subprocess.DEVNULL)
    proc = s.proc
    try:
        await s.initialize()
        made = await s.request(
            "tools/call", {"name": "create_search", "arguments": {"task": SOFTMAX, "name": "d"}}
        )
        assert not made["result"].get("isError"), made
        await s.send(
            {
                "jsonrpc": "2.0",
                "id": 99,
                "method": "tools/call",
                "params": {
                    "name": "benchmark",
                    "arguments": {"search": "d", "candidate": {"source": STUCK}},
                    "_meta": {"progressToken": "b"},
                },
            }
        )
        # until the candidate is running in a worker (its correctness phase: the sleep is inside it)
        assert proc.stdout is not None
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            assert line, "the server closed stdout before the benchmark ran"
            if b"correctness" in line:
                break
        started = _descendants(proc.pid)
        assert started, "the server started no worker process"
        assert proc.stdin is not None
        proc.stdin.close()  # the host goes away mid-call
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    for _ in range(400):
        left = [p for p in started if _alive(p)]
        if not left:
            break
        await asyncio.sleep(0.05)
    assert not left, f"processes left running after the host disconnected: {left}"
    with sqlite3.connect(db) as con:
        rows = con.execute("select evaluation from attempts").fetchall()
    # the cancelled benchmark recorded nothing, or a whole attempt (its evaluation complete), never a part
    for (ev,) in rows:
        assert ev and '"status"' in ev, ev
