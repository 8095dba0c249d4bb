"""MCP server latency: ready time of `ksearch serve` over stdio, and tool round trips on a 1,000-node tree.

Usage:  python bench/mcp.py [--nodes 1000] [--reps 60] [--out bench/results/mcp.json]

"Ready" is from spawning the server process to the first `list_tools` answer (process start, imports,
MCP handshake), measured 5 times. Round trips are client-side wall times of `call_tool` for
get_tree (text view), propose_intents (one intent) and edit_tree (one priority update), on a search
whose tree holds `--nodes` nodes, built through the store before the server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This file is named mcp.py: drop its own folder from the path so `import mcp` finds the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from worldmodel.edits import apply_intents  # noqa: E402
from worldmodel.models import IntentSpec  # noqa: E402
from worldmodel.store import Store  # noqa: E402


async def build(db: Path, n: int) -> None:
    store = await Store.open(db)
    s = await store.create_search("bench", "softmax")
    parents = [(await store.root(s.id)).id]
    made = 1
    while made < n:
        batch = [
            IntentSpec(
                title=f"idea {made + k} with block {made + k}",
                priority=((made + k) % 97) / 97,
                difficulty=1 + (made + k) % 5,
                parent_id=parents[(made + k) % len(parents)],
            )
            for k in range(min(50, n - made))
        ]
        nodes = await apply_intents(store, s.id, batch, author="human", round=0)
        parents.extend(x.id for x in nodes[:10])
        made += len(nodes)
    await store.close()


def params(db: Path) -> StdioServerParameters:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return StdioServerParameters(
        command=sys.executable, args=["-m", "server.cli", "serve", "--db", str(db)], env=env, cwd=str(ROOT)
    )


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mcp.json")
    a = ap.parse_args()
    db = Path(tempfile.mkdtemp()) / "bench.db"
    await build(db, a.nodes)

    ready = []
    for _ in range(5):
        t0 = time.perf_counter()
        async with Client(params(db)) as c:
            await c.list_tools()
            ready.append(time.perf_counter() - t0)

    times: dict[str, list[float]] = {"get_tree": [], "propose_intents": [], "edit_tree": []}
    async with Client(params(db)) as c:
        await c.call_tool("get_tree", {"search": "bench"})  # first call opens the store
        for i in range(a.reps):
            for name, args in (
                ("get_tree", {"search": "bench"}),
                (
                    "propose_intents",
                    {
                        "search": "bench",
                        "intents": [{"title": f"bench intent number {i}", "priority": 0.5, "parent_id": 1}],
                    },
                ),
                (
                    "edit_tree",
                    {
                        "search": "bench",
                        "edits": [{"op": "update", "node_id": 2 + i, "priority": (i % 10) / 10}],
                    },
                ),
            ):
                t0 = time.perf_counter()
                r = await c.call_tool(name, args)
                times[name].append(time.perf_counter() - t0)
                assert not r.is_error, (name, r.content)

    out = {
        "what": "MCP over stdio: server ready time (spawn to first list_tools answer) and client-side tool "
        f"round trips on a {a.nodes}-node tree",
        "command": " ".join([sys.executable, *sys.argv]),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "ready_s": {"median": statistics.median(ready), "max": max(ready), "n": len(ready)},
        "round_trip_ms": {
            k: {"p50": 1e3 * pct(v, 0.5), "p90": 1e3 * pct(v, 0.9), "n": len(v)} for k, v in times.items()
        },
        "targets": {"ready_s": 1.5, "tree_tool_p50_ms": 20},
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=2))
    print(f"ready: median {out['ready_s']['median']:.2f}s (max {out['ready_s']['max']:.2f}s)")
    for k, v in out["round_trip_ms"].items():
        print(f"{k:<16} p50 {v['p50']:.1f} ms  p90 {v['p90']:.1f} ms  (n={v['n']})")


if __name__ == "__main__":
    asyncio.run(main())
