"""Run by test_fault_disk.py inside a private mount namespace where SCRATCH is a small tmpfs:
`python -m tests.faults.disk_full_scenario SCRATCH DB OUT.json`.

Benchmarks candidates through the tools layer with the sandbox's scratch directory on SCRATCH while
that disk has room, while it is full (twice), and after space returns; then writes to a database that
itself lives on the full disk. What each step returned goes to OUT.json.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from ksearch.worldmodel.store import Store
from tests.faults.faultkit import SEED, attempts
from tests.fixtures import SOFTMAX  # the built-in softmax with a 9-row smoke workload: a second an evaluation


def variant(n: int) -> str:
    """A distinct, correct candidate (a new source means a new file for the worker to write)."""
    return SEED + f"\n# variant {n}\n"


def fill(disk: Path) -> Path:
    """Fill `disk` to the last byte."""
    path = disk / "filler"
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path


async def bench(ws: Workspace, n: int) -> dict[str, Any]:
    try:
        out = await benchmark(
            ws, BenchmarkIn(search="d", candidate=CandidateRef(source=variant(n)), trials=1)
        )
    except Exception as e:  # the test asserts there is none: a full disk is a result, not a crash
        return {"raised": f"{type(e).__name__}: {e}"}
    ev = out.evaluation
    return {"status": ev.status, "error": ev.error or "", "attempt_id": out.attempt_id}


async def main(scratch: Path, db: Path, out: Path) -> None:
    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.tools.workspace import StoreCache

    report: dict[str, Any] = {}
    store = await Store.open(db)
    ws = Workspace(store, LocalSandbox(n_workers=1, scratch_dir=scratch / "sandbox", cache=StoreCache(store)))
    try:
        await create_search(ws, CreateSearchIn(task=SOFTMAX, name="d", seed=9))
        report["with_room"] = await bench(ws, 1)
        report["attempts_before"] = {str(k): list(v) for k, v in attempts(db).items()}

        filler = fill(scratch)
        report["full"] = await bench(ws, 2)
        report["still_full"] = await bench(ws, 3)  # the same worker, still usable, still out of space

        filler.unlink()
        report["room_again"] = await bench(ws, 4)
        report["attempts_after"] = {str(k): list(v) for k, v in attempts(db).items()}

        # a database on a full disk: a write is refused whole, and works once there is room
        small = await Store.open(scratch / "small.db")
        ws2 = Workspace(small)
        await create_search(ws2, CreateSearchIn(task=SOFTMAX, name="s", seed=1))
        filler = fill(scratch)
        try:
            await propose_intents(
                ws2,
                ProposeIntentsIn(
                    search="s",
                    intents=[
                        IntentSpec(title=f"idea number {i} " + "x" * 150, rationale="y" * 3000)
                        for i in range(40)
                    ],
                ),
            )
            report["db_full"] = "accepted"
        except ToolFailure as e:
            report["db_full"] = f"ToolFailure: {e}"
        except Exception as e:
            report["db_full"] = f"{type(e).__name__}: {e}"
        filler.unlink()
        nodes = await small.list_nodes((await small.get_search("s")).id)
        report["db_full_nodes_after"] = len(nodes)
        added = await propose_intents(
            ws2, ProposeIntentsIn(search="s", intents=[IntentSpec(title="after the space")])
        )
        report["db_room_again"] = len(added)
        await small.close()
    finally:
        await ws.close()
        out.write_text(json.dumps(report, default=str))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
