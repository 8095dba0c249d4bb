"""Several processes advance one search at once, each through its own connection to the same database file (as
several MCP servers, a driver and the CLI do): the loop's rules hold across them. At most one intent is being
refined (a host's one lane), the rounds started stay within the round budget, and each claimed intent is finished
exactly once: a second finish is refused, saying it was already finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from tests.fixtures import SOFTMAX
from tests.fixtures.dbwatch import DbWatch

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]

RACER = Path(__file__).with_name("loop_racer.py")
ROOT = Path(__file__).resolve().parents[2]
RACERS = 6
ROUNDS = 5
IDEAS = [
    "online softmax in one pass",
    "two rows per program",
    "vectorized loads of 128 bits",
    "exp2 with a folded log2(e) scale",
    "persistent kernel over the rows",
    "max and sum in registers",
    "autotune the number of warps",
    "fp32 accumulation with bf16 stores",
]


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.slow
async def test_claims_rounds_and_finishes_hold_across_processes(ws: Workspace, tmp_path: Path) -> None:
    s = await create_search(ws, CreateSearchIn(task=SOFTMAX, name="race", rounds=ROUNDS))
    await propose_intents(
        ws,
        ProposeIntentsIn(
            search="race",
            intents=[IntentSpec(title=t, priority=0.5) for t in IDEAS],
        ),
    )
    root = await ws.store.root(s.id)
    await benchmark(  # the seed, measured: the loop claims nothing before
        ws, BenchmarkIn(search="race", node_id=root.id, candidate=CandidateRef(seed=True), trials=1)
    )
    db = ws.store.path
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(RACER), str(db), "race", "40"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(RACERS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and json.loads(p.stdout.readline()) == {"ready": True}
        active = "SELECT count(*) FROM nodes WHERE search_id = ? AND kind = 'intent' AND status = 'active'"
        with DbWatch(db, {"active": (active, (s.id,))}, interval_s=0.001) as watch:
            for p in procs:  # released together: their first claims land at once
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err  # every loser was answered with a refusal, never an error
    answers = [a for out, _ in outs for a in _lines(out)]
    claims = [a for a in answers if a["op"] == "claim" and a["ok"]]
    finishes = [a for a in answers if a["op"] == "finish" and a["ok"]]

    # one lane: never two intents being refined, in the file or in any claim's answer
    assert watch.polls > 10 and watch.most["active"] <= 1, (
        f"{watch.most['active']} intents were active at once"
    )
    assert all(len(a["refining"]) <= 1 for a in claims), [a["refining"] for a in claims]
    # rounds: each claim started its own round, and no more were started than the budget allows
    after = await ws.search(s.id)
    assert sorted(a["round"] for a in claims) == list(range(1, after.round + 1))
    assert after.round == ROUNDS  # the budget was used up, not overrun
    # each claimed intent finished exactly once
    claimed = sorted(a["node"] for a in claims)
    assert sorted(a["node"] for a in finishes) == claimed and len(set(claimed)) == len(claimed)
    # a finish that came second was told so, and by the refusal of a late caller
    late = [a for a in answers if a["op"] == "finish" and not a["ok"] and a["node"] in claimed]
    # whether a racer came late is the race's call (on a loaded machine none may): one more late finish, from
    # this process's own connection, always comes after the winner's
    with pytest.raises(ToolFailure) as again:
        await finish_intent(ws, FinishIntentIn(search="race", node_id=claimed[0], with_prompt=False))
    late.append({"why": str(again.value)})
    assert all("already finished" in a["why"] for a in late), [a["why"] for a in late]
    assert any(
        "still being refined" in a.get("why", "") for a in answers if a["op"] == "claim"
    )  # claims raced
    nodes = {n.id: n for n in await ws.store.list_nodes(s.id)}
    assert all(nodes[n].status.value == "failed" for n in claimed)  # no attempts: failed, once
    assert sum(n.status.value == "active" for n in nodes.values()) == 0
