"""MCP server latency: ready time of `ksearch serve` over stdio, tool round trips on a 1,000-node tree, the
first call after a cancelled long job, and the bytes of text a benchmark result gives the model to read.

Usage:  python bench/mcp.py [--nodes 1000] [--reps 60] [--cancel-reps 3] [--out FILE]
        (default FILE: bench/results/mcp-cpu.json without a GPU, mcp-gpu.json with one)

"Ready" is from spawning the server process to the first `list_tools` answer (process start, imports,
MCP handshake), measured 5 times. Round trips are client-side wall times of `call_tool` for
get_tree (text view), propose_intents (one intent) and edit_tree (one priority update), on a search
whose tree holds `--nodes` nodes, built through the store before the server starts.

"After a cancel": a benchmark of the softmax seed with `time.sleep(60)` in its forward is cancelled by the
client (notifications/cancelled) once the sandbox reports progress on it, and the very next call, a
run_correctness of the plain seed, is timed; "ordinary" is the same call with nothing cancelled before it
(median of 5). Target: within 1 s of ordinary. The sandbox starts a spare worker process whenever a live
worker is given back and none is waiting (gpu/sandbox/pool.py): the ordinary calls and each cancel start after a
pause of SETTLE_S, so that no spare is still starting under a timed call (a cancel within a few seconds of
the previous one would find the spare still starting). "Text bytes": the UTF-8 bytes of all text blocks
of real benchmark results on a search (the evaluation's lines plus the `next:` block): ok, compile error,
incorrect. Target: under 800.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This file is named mcp.py: drop its own folder from the path so `import mcp` finds the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

from ksearch.gpu.tasks import load_task  # noqa: E402
from ksearch.worldmodel.edits import apply_intents  # noqa: E402
from ksearch.worldmodel.models import IntentSpec  # noqa: E402
from ksearch.worldmodel.store import Store  # noqa: E402


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
    env["KSEARCH_SPARE_WORKERS"] = (
        "1"  # the call after a cancellation is measured in the spare (a GPU's default)
    )
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "ksearch.server.cli", "serve", "--db", str(db)],
        env=env,
        cwd=str(ROOT),
    )


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


SEED = load_task("softmax").seeds["triton"]
SLOW = SEED.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "    def forward(self, x):\n", "    def forward(self, x):\n        time.sleep(60)\n", 1
)
COMPILE_ERROR = SEED.replace("tl.maximum(m, x)", "tl.maxximum(m, x)", 1)
INCORRECT = SEED.replace("tl.exp(x - row_max) / denom", "tl.exp(x - row_max) / (2.0 * denom)", 1)
assert SEED not in (SLOW, COMPILE_ERROR, INCORRECT), "the softmax seed changed shape: update the variants"
ORDINARY = ("run_correctness", {"task": "softmax", "candidate": {"seed": True}})
SETTLE_S = 15.0  # more than a worker's start (imports, the harness's preparation) on a 2-CPU machine


async def timed(c: Client, name: str, args: dict[str, Any]) -> tuple[float, CallToolResult]:
    t0 = time.perf_counter()
    r = await c.call_tool(name, args)
    took = time.perf_counter() - t0
    assert not r.is_error, (name, r.content)
    return took, r


async def cancelled_then_next(c: Client) -> tuple[float, float]:
    """Cancel a sleeping benchmark 2 s after the sandbox says it runs the correctness check (the forward
    sleeps), then time the next, ordinary call. Returns (seconds until the cancel, the next call's s)."""
    running = anyio.Event()

    async def progress(_p: float, _t: float | None, message: str | None) -> None:
        if (message or "").startswith("correctness:"):  # the sandbox calls the candidate's forward now
            running.set()

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:

        async def sleeper() -> None:
            await c.call_tool(
                "benchmark", {"task": "softmax", "candidate": {"source": SLOW}}, progress_callback=progress
            )
            raise AssertionError("the sleeping benchmark finished before it was cancelled")

        tg.start_soon(sleeper)
        with anyio.fail_after(120):
            await running.wait()
        await anyio.sleep(2)
        tg.cancel_scope.cancel()
    cancelled_at = time.perf_counter() - t0
    took, r = await timed(c, *ORDINARY)
    assert r.structured_content["evaluation"]["status"] == "ok", r.content  # not blamed for the sleeper
    return cancelled_at, took


def text_bytes(r: CallToolResult) -> dict[str, int]:
    blocks = [b.text.encode() for b in r.content if b.type == "text"]
    nxt = sum(len(b) for b in blocks if b.startswith(b"next: "))
    total = sum(len(b) for b in blocks)
    return {"total": total, "evaluation": total - nxt, "next": nxt}


async def benchmark_texts(c: Client) -> dict[str, dict[str, int]]:
    """Bytes of text of real benchmark results on a search: the seed on the root, then attempts on a claimed
    intent (a correct one, a compile error, a wrong answer)."""
    await timed(c, "create_search", {"task": "softmax", "name": "texts"})
    out = {}
    _, r = await timed(c, "benchmark", {"search": "texts", "node_id": 1, "candidate": {"seed": True}})
    out["seed_on_root_ok"] = text_bytes(r)
    await timed(c, "propose_intents", {"search": "texts", "intents": [{"title": "one pass over each row"}]})
    _, sel = await timed(c, "select_action", {"search": "texts"})
    node = sel.structured_content["node"]["id"]
    for name, source, expect in (
        ("attempt_ok", "# attempt 1\n" + SEED, "ok"),
        ("attempt_compile_error", COMPILE_ERROR, "compile_error"),
        ("attempt_incorrect", INCORRECT, "incorrect"),
    ):
        _, r = await timed(
            c, "benchmark", {"search": "texts", "node_id": node, "candidate": {"source": source}}
        )
        status = r.structured_content["evaluation"]["status"]
        assert status == expect, (name, status)
        out[name] = text_bytes(r)
    return out


async def cancel_and_text(db: Path, cancel_reps: int) -> dict[str, Any]:
    async with Client(params(db), read_timeout_seconds=600) as c:
        first, r = await timed(c, *ORDINARY)  # starts the sandbox workers
        cpu = bool(r.structured_content["evaluation"]["env"]["cpu_mode"])
        await anyio.sleep(SETTLE_S)
        ordinary = [(await timed(c, *ORDINARY))[0] for _ in range(5)]
        after, cancelled_at, second = [], [], []
        for _ in range(cancel_reps):
            await anyio.sleep(SETTLE_S)
            at, took = await cancelled_then_next(c)
            cancelled_at.append(at)
            after.append(took)
            second.append((await timed(c, *ORDINARY))[0])  # the replacement worker is warm by now
        texts = await benchmark_texts(c)
    base = statistics.median(ordinary)
    excess = [a - base for a in after]
    return {
        "cpu": cpu,
        "after_cancel": {
            "call": "run_correctness softmax seed (task only)",
            "first_call_of_a_fresh_server_s": first,
            "ordinary_s": {"median": base, "all": ordinary},
            "first_after_cancel_s": after,
            "second_after_cancel_s": second,
            "excess_over_ordinary_s": {"median": statistics.median(excess), "max": max(excess)},
            "cancelled_after_s": cancelled_at,
            "settle_before_each_s": SETTLE_S,
            "target_excess_s": 1.0,
            "target_met": max(excess) <= 1.0,
        },
        "benchmark_text_bytes": {
            **texts,
            "max_total": max(v["total"] for v in texts.values()),
            "target": 800,
            "target_met": all(v["total"] < 800 for v in texts.values()),
        },
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--cancel-reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
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

    extra = await cancel_and_text(Path(tempfile.mkdtemp()) / "cancel.db", a.cancel_reps)
    out = {
        "what": "MCP over stdio: server ready time (spawn to first list_tools answer), client-side tool "
        f"round trips on a {a.nodes}-node tree, the first call after a cancelled long job, and the bytes of "
        "text per benchmark result",
        "command": " ".join([sys.executable, *sys.argv]),
        "machine": {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "device": "cpu (Triton interpreter)" if extra["cpu"] else "gpu",
            "load_average_1_5_15": list(os.getloadavg()),
        },
        "ready_s": {"median": statistics.median(ready), "max": max(ready), "n": len(ready)},
        "round_trip_ms": {
            k: {"p50": 1e3 * pct(v, 0.5), "p90": 1e3 * pct(v, 0.9), "n": len(v)} for k, v in times.items()
        },
        "after_cancel": extra["after_cancel"],
        "benchmark_text_bytes": extra["benchmark_text_bytes"],
        "targets": {
            "ready_s": 1.5,
            "tree_tool_p50_ms": 20,
            "after_cancel_excess_s": 1.0,
            "benchmark_text_bytes": 800,
        },
    }
    dest = a.out or ROOT / "bench" / "results" / f"mcp-{'cpu' if extra['cpu'] else 'gpu'}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(f"ready: median {out['ready_s']['median']:.2f}s (max {out['ready_s']['max']:.2f}s)")
    for k, v in out["round_trip_ms"].items():
        print(f"{k:<16} p50 {v['p50']:.1f} ms  p90 {v['p90']:.1f} ms  (n={v['n']})")
    ac = out["after_cancel"]
    print(
        f"ordinary call {ac['ordinary_s']['median']:.2f}s; first after a cancel "
        + ", ".join(f"{x:.2f}s" for x in ac["first_after_cancel_s"])
        + f" (excess median {ac['excess_over_ordinary_s']['median']:.2f}s; target 1 s: "
        + ("met" if ac["target_met"] else "NOT met")
        + ")"
    )
    tb = out["benchmark_text_bytes"]
    print(
        "benchmark text bytes: "
        + ", ".join(f"{k} {v['total']}" for k, v in tb.items() if isinstance(v, dict))
        + f" (target < 800: {'met' if tb['target_met'] else 'NOT met'})"
    )
    print(f"wrote {dest}")


if __name__ == "__main__":
    asyncio.run(main())
