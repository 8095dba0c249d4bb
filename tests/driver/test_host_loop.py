"""One loop, two drivers: a scripted MCP host that does only what the tool results tell it, and
`ksearch run` replaying the same decisions, leave the same records (phases, stagnation stops, budgets,
final evaluation). The host's session is recorded by the server (`--record`) and that recording is
what the driver replays.

Real components throughout: the MCP server over the in-memory transport, SQLite, the sandbox worker
(Triton interpreter on the CPU) and the `ksearch` CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from ksearch.gpu.tasks import load_task
from ksearch.server.mcp.server import KsearchServer
from tests.driver.host_script import kernel, scaled_relu_decisions
from tests.fixtures import SOFTMAX

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "scaled_relu.py"
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ScriptedHost:
    """A host whose only knowledge is the tool results: it reads `next`, the loop's phase, and the
    errors, and answers each phase with the next scripted decision."""

    def __init__(self, client: Client, search: str, decisions: list[dict[str, Any]]) -> None:
        self.c = client
        self.search = search
        self.decisions = list(decisions)
        self.log: list[str] = []

    def take(self, phase: str) -> dict[str, Any]:
        d = self.decisions.pop(0)
        assert d["phase"] == phase, f"the loop asked for {phase}, the script has {d['phase']}"
        return d["result"]

    async def call(self, name: str, args: dict[str, Any]) -> tuple[bool, Any, str]:
        res = await self.c.call_tool(name, args)
        text = res.content[0].text if res.content else ""
        data = res.structured_content
        self.log.append(f"{name}: {'ERROR ' + text[:200] if res.is_error else ''}")
        return res.is_error, data, text

    async def run(self) -> dict[str, Any]:
        while True:
            err, sel, text = await self.call("select_action", {"search": self.search})
            if err and '"seed": true' in text:  # the loop asks for the seed's measurement first
                root = await self.root()
                await self.must(
                    "benchmark", {"search": self.search, "node_id": root, "candidate": {"seed": True}}
                )
                continue
            if err and "propose_intents" in text:  # phase 0
                await self.init()
                continue
            if err and "final_evaluation" in text:  # the budget is spent
                _, out, _ = await self.call("final_evaluation", {"search": self.search})
                return out
            assert not err, text
            if sel["node"] is None:  # nothing open: the loop says to end
                _, out, _ = await self.call("final_evaluation", {"search": self.search})
                return out
            await self.refine(sel["node"]["id"])

    async def must(self, name: str, args: dict[str, Any]) -> Any:
        err, data, text = await self.call(name, args)
        assert not err, f"{name}: {text}"
        return data

    async def root(self) -> int:
        tree = await self.must("get_tree", {"search": self.search, "format": "json"})
        return next(n["id"] for n in tree["tree"]["nodes"] if n["kind"] == "root")

    async def init(self) -> None:
        prompt = await self.c.get_prompt("analyse_kernel", {"search": self.search})
        assert "Reference (the task file)" in prompt.messages[0].content.text
        d = self.take("init")
        root = await self.root()
        await self.must(
            "edit_tree",
            {"search": self.search, "edits": [{"op": "update", "node_id": root, "notes": d["analysis"]}]},
        )
        await self.must("propose_intents", {"search": self.search, "intents": d["intents"]})

    async def refine(self, node: int) -> None:
        while True:
            d = self.take("write_code")
            out = await self.must(
                "benchmark", {"search": self.search, "node_id": node, "candidate": {"source": d["source"]}}
            )
            assert out["next"], out
            if "Reflect now" in out["next"]:
                assert out["refine"]["over"]
                break
            assert "Write another implementation" in out["next"]
        fin = await self.must("finish_intent", {"search": self.search, "node_id": node})
        assert fin["loop"]["phase"] == "update" and fin["reflect_prompt"]
        d = self.take("update")
        if d["edits"]:
            await self.must("edit_tree", {"search": self.search, "edits": d["edits"]})
        if d["new_intents"]:
            await self.must(
                "propose_intents",
                {"search": self.search, "intents": d["new_intents"], "reason": d["reflection"]},
            )


class BatchedHost(ScriptedHost):
    """Reflects before it finishes: the update decision goes with finish_intent (`edits`, `new_intents`), not in
    edit_tree / propose_intents calls after it."""

    async def refine(self, node: int) -> None:
        while True:
            d = self.take("write_code")
            out = await self.must(
                "benchmark", {"search": self.search, "node_id": node, "candidate": {"source": d["source"]}}
            )
            if "Reflect now" in out["next"]:
                break
        d = self.take("update")
        args: dict[str, Any] = {"search": self.search, "node_id": node, "edits": d["edits"]}
        if d["new_intents"]:
            args.update(new_intents=d["new_intents"], reason=d["reflection"])
        fin = await self.must("finish_intent", args)
        assert fin["loop"]["phase"] == ("update" if not (d["edits"] or d["new_intents"]) else "select"), fin
        assert bool(fin["applied"]) == bool(d["edits"] or d["new_intents"])


class LenientHost(ScriptedHost):
    """Takes the next decision of the phase asked for, skipping unused code (on a GPU, how many attempts
    an intent gets depends on measured gains)."""

    def take(self, phase: str) -> dict[str, Any]:
        while self.decisions and self.decisions[0]["phase"] != phase:
            self.decisions.pop(0)
        return super().take(phase)


def records(db: Path) -> dict[str, Any]:
    """What a search leaves behind, without authors and times (the two drivers sign differently)."""
    con = sqlite3.connect(db)
    try:
        q = lambda sql: [tuple(r) for r in con.execute(sql)]  # noqa: E731
        return {
            "search": q("SELECT status, round, best_attempt_id FROM searches"),
            "nodes": q(
                "SELECT id, parent_id, kind, title, status, priority, best_attempt_id, visits FROM nodes "
                "ORDER BY id"
            ),
            "attempts": q(
                "SELECT id, node_id, candidate_id, base_attempt_id, round, status FROM attempts ORDER BY id"
            ),
            "edits": q("SELECT op, node_id, round FROM edits ORDER BY id"),
            # the final rows' identity and verdicts (CPU-interpreter timings vary from run to run)
            "final": [
                (r["attempt_id"], r["status"], r["workloads"], r["device"])
                for r in json.loads(q("SELECT value FROM cache WHERE key LIKE 'final:%'")[0][0])["rows"]
            ],
        }
    finally:
        con.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_INTERPRET", "1")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    return env


async def host_then_replay(
    tmp_path: Path,
    task: str,
    decisions: list[dict[str, Any]],
    rounds: int,
    stagnation: int,
    host_kind: type[ScriptedHost] = ScriptedHost,
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    host_db, replay_db, rec = tmp_path / "host.db", tmp_path / "replay.db", tmp_path / "host.jsonl"
    ks = KsearchServer(host_db, record=rec)
    try:
        async with Client(ks.mcp) as c:
            created = await c.call_tool(
                "create_search",
                {"task": task, "name": "h", "seed": 11, "rounds": rounds, "stagnation": stagnation},
            )
            assert not created.is_error, created.content[0].text
            host = host_kind(c, "h", decisions)
            final = await host.run()
            assert not host.decisions, f"unused decisions: {host.decisions}"
            assert final["rows"], final
    finally:
        await ks.close()
    p = subprocess.run(
        [
            sys.executable, "-m", "ksearch.server.cli", "run", task, "--policy", "replay", "--replay", str(rec),
            "--rounds", str(rounds), "--stagnation", str(stagnation), "--seed", "11", "--name", "h",
            "--plain", "--json", "--db", str(replay_db),
        ],
        capture_output=True, text=True, env=_env(), cwd=str(ROOT), timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return records(host_db), records(replay_db), rec


@pytest.mark.cpu
async def test_seedless_kernelbench_task_host_and_driver_run_the_same_loop(tmp_path: Path) -> None:
    decisions = scaled_relu_decisions()
    host, replay, rec = await host_then_replay(tmp_path, str(FIXTURE), decisions, rounds=2, stagnation=2)
    # the recording is the script: the host's decisions, in the order the loop asked for them
    recorded = [json.loads(line) for line in rec.read_text().splitlines()]
    assert [r["phase"] for r in recorded] == [d["phase"] for d in decisions]
    assert [r["result"].get("source") for r in recorded] == [d["result"].get("source") for d in decisions]
    assert host == replay
    # and the records are the K-Search loop's: no seed attempt (seedless), round 1 stopped by the
    # stagnation window after 4 attempts (wrong, fixed, two without a gain), round 2 after 2 on a correct
    # base, then the round budget and the final evaluation
    atts = host["attempts"]
    assert [a[4] for a in atts] == [1, 1, 1, 1, 2, 2]
    assert [a[5] for a in atts] == ["incorrect", "ok", "ok", "ok", "ok", "ok"]
    assert atts[0][3] is None and atts[4][3] == atts[1][0]  # round 2 builds on round 1's first correct code
    assert host["search"][0][:2] == ("stopped", 2)  # the round budget ended it with an intent still open
    statuses = {n[3]: n[4] for n in host["nodes"]}
    assert statuses["one program per 1024-element block"] == "closed"
    assert statuses["two elements per thread with 2048-element blocks"] == "closed"
    assert statuses["persistent programs striding over rows"] == "open"


@pytest.mark.cpu
async def test_a_host_that_sends_its_edits_with_finish_intent_leaves_the_same_records(tmp_path: Path) -> None:
    """The update decisions sent with finish_intent are recorded as the round's update, and the driver that
    replays them leaves the records the host left, edits included."""
    decisions = scaled_relu_decisions()
    host, replay, rec = await host_then_replay(
        tmp_path, str(FIXTURE), decisions, rounds=2, stagnation=2, host_kind=BatchedHost
    )
    recorded = [json.loads(line) for line in rec.read_text().splitlines()]
    updates = [r["result"] for r in recorded if r["phase"] == "update"]
    assert [u["new_intents"][0]["title"] for u in updates[:1]] == [
        "two elements per thread with 2048-element blocks"
    ]
    assert updates[0]["edits"][0]["notes"] == "flat grid already coalesced"
    assert host == replay
    assert [e[0] for e in host["edits"]].count("insert") == 4  # three first intents, one from the reflection


def softmax_decisions() -> list[dict[str, Any]]:
    seed = load_task(SOFTMAX).seeds["triton"]
    w4 = seed.replace("num_warps = 8", "num_warps = 4")
    w2 = seed.replace("num_warps = 8", "num_warps = 2")
    b1 = seed.replace("BLOCK_N = 2048", "BLOCK_N = 1024")
    b4 = seed.replace("BLOCK_N = 2048", "BLOCK_N = 4096")
    return [
        {"phase": "init", "result": {"analysis": "memory-bound row softmax", "intents": [
            {"title": "fewer warps per row", "priority": 0.8, "difficulty": 1},
            {"title": "smaller column block", "priority": 0.6, "difficulty": 1},
        ]}},
        {"phase": "write_code", "result": {"source": w4}},
        {"phase": "write_code", "result": {"source": w2}},
        {"phase": "update", "result": {"reflection": "", "edits": [], "new_intents": []}},
        {"phase": "write_code", "result": {"source": b1}},
        {"phase": "write_code", "result": {"source": "def broken(:\n"}},
        {"phase": "write_code", "result": {"source": b4}},
        {"phase": "update", "result": {"reflection": "", "edits": [], "new_intents": []}},
    ]  # fmt: skip


@pytest.mark.cpu
async def test_softmax_with_its_seed_host_and_driver_run_the_same_loop(tmp_path: Path) -> None:
    host, replay, _ = await host_then_replay(tmp_path, SOFTMAX, softmax_decisions(), rounds=2, stagnation=2)
    assert host == replay
    atts = host["attempts"]
    # the seed on the root first (round 0), then two attempts per round against the seed's correct base
    assert atts[0][1] == 1 and atts[0][4] == 0 and atts[0][5] == "ok"
    assert [a[4] for a in atts[1:]] == [1, 1, 2, 2, 2]
    # an unparseable attempt is an attempt (recorded, toward the cap) but not in the stagnation window: round 2 took
    # a third attempt to fill its window of 2
    assert [a[5] for a in atts[3:]] == ["ok", "compile_error", "ok"]
    assert host["search"][0][:2] == ("done", 2)  # both intents closed: nothing left open


@pytest.mark.gpu
@pytest.mark.timeout(600)
async def test_on_a_gpu_the_host_loop_ranks_by_timing_and_ends_with_a_result(tmp_path: Path) -> None:
    """The same scripted host on a GPU: timings rank there, so the search gets a best, and the final
    evaluation times every workload against eager and torch.compile."""
    ks = KsearchServer(tmp_path / "gpu.db")
    try:
        async with Client(ks.mcp) as c:
            created = await c.call_tool(
                "create_search", {"task": str(FIXTURE), "name": "g", "seed": 3, "rounds": 1, "stagnation": 1}
            )
            assert not created.is_error, created.content[0].text
            # as many implementations as the cap allows: on a GPU a gain beyond noise keeps refine going
            codes = [
                {"phase": "write_code", "result": {"source": kernel(b)}} for b in (1024, 2048, 512, 256, 4096)
            ]
            script = [scaled_relu_decisions()[0], *codes, *codes[:3]]
            script.append({"phase": "update", "result": {"reflection": "", "edits": [], "new_intents": []}})
            host = LenientHost(c, "g", script)
            final = await host.run()
    finally:
        await ks.close()
    rows = final["rows"]
    assert rows and all(r["device"] != "cpu-interpreter" for r in rows)
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and ok[0]["speedup_vs_eager"] is not None and ok[0]["speedup_vs_compile"] is not None
    assert set(ok[0]["workloads"]) == {"4096x8192", "1000x12289"}  # held-out included
    con = sqlite3.connect(tmp_path / "gpu.db")
    try:
        assert con.execute("SELECT best_attempt_id FROM searches").fetchone()[0] is not None
    finally:
        con.close()
