"""A separate process that races the loop's claims and finishes against other processes on one database, for
tests/tools/test_loop_races.py.

    python loop_racer.py DB SEARCH SECONDS

Prints "ready", waits for a line on stdin (the parent releases every racer at once), then for at most SECONDS
alternates select_action (a claim, which starts a round) and finish_intent (its own claim, else the search's one
intent being refined), as several hosts on one search do. It prints one JSON line per answer, flushed at once:

    {"op": "claim", "ok": true, "node": 3, "round": 2, "refining": [3]}
    {"op": "finish", "ok": true, "node": 3, "status": "failed"}
    {"op": "claim" | "finish", "ok": false, "why": "<the refusal>"}

It stops early once a claim is refused because the budget is spent and no intent is being refined. A refusal is
a ToolFailure; anything else ends the process with its traceback (the test reads that as a failure).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ksearch.tools.errors import ToolFailure
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.store import Store


def report(**line: object) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def race(db: str, search: str, seconds: float) -> None:
    ws = Workspace(await Store.open(db, busy_timeout_s=30.0))
    try:
        report(ready=True)
        await asyncio.to_thread(sys.stdin.readline)
        deadline = time.monotonic() + seconds
        mine: int | None = None
        spent = False
        while time.monotonic() < deadline:
            try:
                sel = await select_action(ws, SelectActionIn(search=search))
                refining = [r.node_id for r in sel.loop.refining] if sel.loop else []
                if sel.node is not None:
                    mine = sel.node.id
                report(op="claim", ok=sel.claimed, node=mine, round=sel.round, refining=refining)
            except ToolFailure as e:
                spent = "budget is spent" in str(e)
                report(op="claim", ok=False, why=str(e))
            await asyncio.sleep(random.uniform(0, 0.005))
            try:
                out = await finish_intent(ws, FinishIntentIn(search=search, node_id=mine, with_prompt=False))
                report(op="finish", ok=True, node=out.node.id, status=out.node.status.value)
            except ToolFailure as e:
                report(op="finish", ok=False, node=mine, why=str(e))
                if spent and mine is None and "no intent is being refined" in str(e):
                    return
            mine = None
    finally:
        await ws.close()


if __name__ == "__main__":
    asyncio.run(race(sys.argv[1], sys.argv[2], float(sys.argv[3])))
