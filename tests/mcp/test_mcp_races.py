"""Three `ksearch serve` processes (stdio, as three hosts start them) and a driver (`ksearch run`, tuner policy)
advance one search on one database at once. Each server orders its own calls, but nothing orders separate
processes: the loop's rules are kept by the database. One lane (one intent being refined at a time), the rounds
started within the round budget, and each intent finished once: a host that comes second is told it was already
finished, by whom."""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from tests.fixtures import SOFTMAX
from tests.fixtures.dbwatch import DbWatch
from tests.mcp.test_mcp import ROOT, call, stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

ROUNDS = 6
HOSTS = 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _host(c: Client, author: str, seconds: float, log: list[dict[str, Any]]) -> None:
    """A host as a model drives one: claim, then finish (its own claim, else the one being refined), again and
    again, until the budget is spent and nothing is being refined."""
    deadline = time.monotonic() + seconds
    spent = False
    while time.monotonic() < deadline:
        mine: int | None = None
        res = await c.call_tool("select_action", {"search": "race"})
        if res.is_error:
            why = res.content[0].text
            spent = "budget is spent" in why
            log.append({"op": "claim", "ok": False, "why": why})
        elif res.structured_content["claimed"]:
            mine = res.structured_content["node"]["id"]
            log.append({"op": "claim", "ok": True, "node": mine, "round": res.structured_content["round"]})
        await anyio.sleep(random.uniform(0, 0.05))
        args: dict[str, Any] = {"search": "race", "author": author, "with_prompt": False}
        if mine is not None:
            args["node_id"] = mine
        res = await c.call_tool("finish_intent", args)
        if res.is_error:
            why = res.content[0].text
            found = re.search(r"intent #(\d+)", why)
            log.append({"op": "finish", "ok": False, "why": why, "node": int(found[1]) if found else None})
            if spent and "no intent is being refined" in why:
                return
        else:
            log.append(
                {"op": "finish", "ok": True, "node": res.structured_content["node"]["id"], "by": author}
            )
        await anyio.sleep(random.uniform(0, 0.05))


def _finish_records(db: Path) -> dict[int, dict[str, Any]]:
    con = sqlite3.connect(db, timeout=30)
    try:
        found = con.execute("SELECT key, value FROM cache WHERE key LIKE 'refine:%'").fetchall()
    finally:
        con.close()
    return {int(k.split(":")[1]): json.loads(v).get("finished") or {} for k, v in found}


@pytest.mark.slow
async def test_three_servers_and_a_driver_keep_one_lane_the_budget_and_one_finish(
    tmp_path: Path,
) -> None:
    db = tmp_path / "k.db"
    log: list[dict[str, Any]] = []
    async with stdio_client(db) as a, stdio_client(db) as b, stdio_client(db) as c:
        await call(a, "create_search", {"task": SOFTMAX, "name": "race", "rounds": ROUNDS, "seed": 3})
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}
        env.pop("ANTHROPIC_API_KEY", None)
        # the driver measures the seed and proposes the first intents (the tuner's); until then every host's
        # claim is refused (the loop's phase 0), after that all four race for the lane
        run = ["run", "--resume", "race", "--db", str(db), "--plain", "--no-final", "--max-attempts", "1"]
        driver = subprocess.Popen(
            [sys.executable, "-m", "ksearch.server.cli", *run],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            with DbWatch(
                db,
                {
                    "active": ("SELECT count(*) FROM nodes WHERE kind = 'intent' AND status = 'active'", ()),
                    "round": ("SELECT max(round) FROM searches", ()),
                },
                interval_s=0.005,
            ) as watch:
                async with anyio.create_task_group() as tg:
                    for i, host in enumerate((a, b, c)):
                        tg.start_soon(_host, host, f"llm:host-{i}", 40.0, log)
                out, _ = await anyio.to_thread.run_sync(lambda: driver.communicate(timeout=60))
        finally:
            if driver.poll() is None:
                driver.kill()
        assert driver.returncode == 0, out
        state = await call(a, "get_tree", {"search": "race", "format": "json"})

    # one lane: never two intents being refined, as the file showed them and as the driver's log says
    assert watch.polls > 20 and watch.most["active"] <= 1, f"{watch.most['active']} intents active at once"
    # rounds: never more started than the budget, and the budget was used
    assert watch.most["round"] <= ROUNDS and state["round"] == ROUNDS, (watch.most["round"], state["round"])
    host_rounds = [e["round"] for e in log if e["op"] == "claim" and e["ok"]]
    driver_rounds = [int(n) for n in re.findall(r"^round (\d+): intent #\d+", out, re.M)]
    claimed = host_rounds + driver_rounds
    # the hosts raced for the lane (on a loaded machine the driver may win every claim: the rules must hold either way)
    assert any(e["op"] == "claim" for e in log), "the hosts never asked for a claim"
    assert claimed and all(1 <= r <= ROUNDS for r in claimed), (host_rounds, driver_rounds)
    if "no round spent" not in out:  # no claim was given back (a declined intent's round is taken again)
        assert len(set(claimed)) == len(claimed), (host_rounds, driver_rounds)
    # each intent finished once: at most one host's finish succeeded on it, and the record of its end names that
    # host (a second finish, by a host or the driver, would have replaced it); every later one was told so
    wins: dict[int, list[str]] = {}
    for e in log:
        if e["op"] == "finish" and e["ok"]:
            wins.setdefault(e["node"], []).append(e["by"])
    records = _finish_records(db)
    assert all(len(by) == 1 and records[n]["by"] == by[0] for n, by in wins.items()), (wins, records)
    late = [e for e in log if e["op"] == "finish" and not e["ok"] and e["node"] in records]
    assert all("already finished" in e["why"] or "is open" in e["why"] for e in late), [
        e["why"] for e in late
    ]
    # a host finished an intent: any host that tried after it was told who did (whether one tried is the race's call)
    told = [
        (e["why"], wins[e["node"]][0]) for e in late if e["node"] in wins and "already finished" in e["why"]
    ]
    assert all(f" by {winner} (" in why for why, winner in told), told
    con = sqlite3.connect(db, timeout=30)
    try:
        assert con.execute("SELECT count(*) FROM nodes WHERE status = 'active'").fetchone() == (0,)
    finally:
        con.close()
