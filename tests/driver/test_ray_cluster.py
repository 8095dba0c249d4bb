"""Suites and sandboxes on a real Ray cluster of two nodes on this machine (a head and a second node, each with one
logical GPU), candidates in the Triton interpreter: a suite spread over both nodes' actors, stopped by Ctrl-C and
resumed; an actor killed mid-evaluation (its evaluation re-run on the other, the event reported); bad addresses
and actor indices refused before anything is written."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import ROW_SUM
from tests.fixtures.cli import ksearch_cli

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("ray_cluster")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    old = os.environ.get("KSEARCH_CPU_MODE")
    os.environ["KSEARCH_CPU_MODE"] = "1"  # the actors' sandboxes run the interpreter, even on a GPU machine
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    c.add_node(num_cpus=1, num_gpus=1)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        if old is None:
            os.environ.pop("KSEARCH_CPU_MODE", None)
        else:
            os.environ["KSEARCH_CPU_MODE"] = old


def _searches(db: Path) -> dict[str, tuple[str, int]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT s.name, s.status, count(a.id) FROM searches s LEFT JOIN attempts a ON a.search_id = s.id "
            "GROUP BY s.id"
        )
        return {name: (status, n) for name, status, n in rows}
    finally:
        con.close()


def test_a_suite_runs_on_both_nodes_stops_on_ctrl_c_and_resumes(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    env = {**os.environ, "KSEARCH_DB": str(db)}
    # row_sum with a 9-row smoke workload (tests/fixtures, by folder: the search keeps its name) is done in seconds,
    # while the built-in softmax is still at work when it is interrupted
    cmd = [sys.executable, "-m", "ksearch.server.cli", "suite", "run", str(Path(ROW_SUM).parent), "softmax",
           "--name", "r", "--ray", cluster.address, "--policy", "tuner", "--rounds", "1", "--max-attempts", "1"]  # fmt: skip
    p = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert p.stderr is not None
    seen: list[str] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if " done " in line and "[1/" in line:  # one task is done: interrupt the others mid-search
            p.send_signal(signal.SIGINT)
            break
    stdout, rest = p.communicate(timeout=300)
    out = "".join(seen) + rest + stdout
    assert p.returncode != 0 and "resume with `ksearch suite run --resume r`" in out, out[-3000:]
    slots = next(x for x in out.splitlines() if x.startswith("slots:"))
    nodes = re.findall(r"Ray actor \d \(node (\w+), GPU", slots)
    assert len(nodes) == 2 and nodes[0] != nodes[1], slots  # one actor per GPU, one on each node
    starts = re.findall(r"start +\d+ \w+ on Ray actor (\d)", out)
    assert sorted(starts) == ["0", "1"], out[-3000:]  # the two searches ran at once, one on each node

    def tasks() -> dict[str, str]:
        got = json.loads(ksearch_cli(tmp_path, "suite", "status", "r", "--json", "--db", str(db)).stdout)
        return {row["task"]: row["status"] for row in got["rows"]}

    done = [t for t, st in tasks().items() if st == "done"]
    assert done and len(done) < 2, tasks()
    first = _searches(db)
    again = ksearch_cli(tmp_path, "suite", "run", "--resume", "r", "--db", str(db))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming, 1 of 2 tasks left" in again.stderr, again.stderr[-3000:]
    assert set(tasks().values()) == {"done"}
    after = _searches(db)
    assert all(n >= 1 for _, n in after.values()), after
    ran_first = [n for n in first if n.endswith(Path(done[0]).name)]
    assert ran_first and all(after[n] == first[n] for n in ran_first)  # done before Ctrl-C: not run again


def test_an_actor_killed_mid_evaluation_has_its_evaluation_rerun_on_another(cluster: Any) -> None:
    from ksearch.gpu.sandbox.ray import RayPool, RaySandbox
    from ksearch.gpu.tasks import load_task
    from ksearch.worldmodel.models import Candidate, EvalSettings

    task = load_task(ROW_SUM)
    seed = task.seeds["triton"]
    # a kernel that takes a few seconds to import: the window in which its actor is killed
    cand = Candidate.of("import time\ntime.sleep(6)\n" + seed, "triton")

    async def go() -> tuple[Any, list[str], list[bool]]:
        pool = RayPool(cluster.address)
        await pool.start()
        sb = RaySandbox(pool, [0])
        job = asyncio.create_task(sb.evaluate(cand, task, EvalSettings(seed=3, workloads=["smoke"])))
        # the evaluation is under way on actor 0 (its worker started, the import sleeping)
        await asyncio.sleep(4)
        assert pool.actors[0].busy == 1
        ray.kill(pool.actors[0].handle)
        ev = await job
        alive = [a.alive for a in pool.actors]
        await pool.close()
        return ev, pool.events, alive

    ev, events, alive = asyncio.run(go())
    assert ev.status == "ok", ev.error
    assert alive == [False, True]
    assert any("Ray actor 0" in e and "died during evaluate" in e for e in events), events
    assert any("re-run on Ray actor 1" in e for e in events), events


def test_bad_clusters_and_actor_indices_are_refused_before_anything_is_written(
    cluster: Any, tmp_path: Path
) -> None:
    db = tmp_path / "k.db"
    for address, said in [
        ("127.0.0.1:9", "cannot join the Ray cluster at '127.0.0.1:9': nothing answers there"),
        ("head-without-port", "give `auto`"),
        ("host:port", "the port must be a number"),
    ]:
        r = ksearch_cli(tmp_path, "suite", "run", "softmax", "--name", "x", "--ray", address, "--db", str(db))
        assert r.returncode == 2 and said in r.stderr, r.stderr[-2000:]
    r = ksearch_cli(
        tmp_path,
        "suite",
        "run",
        "softmax",
        "--name",
        "x",
        "--ray",
        cluster.address,
        "--gpus",
        "5",
        "--db",
        str(db),
    )
    assert (
        r.returncode == 2 and "Ray actor 5 does not exist: the cluster's pool has actors 0 to 1" in r.stderr
    )
    assert not db.exists()  # refused before the database was opened
    r = ksearch_cli(tmp_path, "run", "softmax", "--ray", "127.0.0.1:9", "--rounds", "1", "--db", str(db))
    assert r.returncode == 2 and "nothing answers there" in r.stderr, r.stderr[-2000:]
    assert not _searches(db)  # no search was made


def test_an_mcp_servers_benchmarks_run_on_the_clusters_actors(cluster: Any, tmp_path: Path) -> None:
    from mcp.client import Client

    from ksearch.gpu.sandbox.ray import close_pools
    from ksearch.server.mcp.server import KsearchServer

    async def go() -> tuple[dict[str, Any], list[int]]:
        ks = KsearchServer(tmp_path / "k.db", ray=cluster.address)
        try:
            async with Client(ks.mcp) as c:
                await c.call_tool("create_search", {"task": ROW_SUM, "name": "s"})
                res = await c.call_tool(
                    "benchmark", {"search": "s", "node_id": 1, "candidate": {"seed": True}}
                )
                assert not res.is_error, res.content
                sb = await (await ks.ws()).sandbox()
                busy_ever = [len(a.shipped) for a in sb.pool.actors]  # type: ignore[attr-defined]
                return dict(res.structured_content or {}), busy_ever
        finally:
            await ks.close()
            await close_pools()

    out, shipped = asyncio.run(go())
    assert out["evaluation"]["status"] == "ok", out
    assert sum(shipped) == 1  # the task's files went to the one actor that evaluated the seed
