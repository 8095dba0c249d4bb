"""bench/host_flow.py, bench/baseline_repeat.py and bench/candidate_cost.py in their CPU smoke modes: the quickstart
flow against a real `ksearch serve` answers every call within its bound, two fresh processes give the spread fields,
and the cost of new candidates is measured one at a time, in a batch and with the per-candidate process rule off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the Triton interpreter, on any machine: these are the scripts' smoke modes
ENV = {**os.environ, "KSEARCH_CPU_MODE": "1", "PYTHONPATH": str(ROOT)}


def _script(name: str, *args: str) -> None:
    """Run bench/NAME with `args` in its smoke mode; it must exit 0. Budgets leave room for a loaded CI machine
    (the quickstart flow takes about 29 s idle, 54 s under the full suite on 2 cores)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_host_flow_quickstart_smoke_has_no_hang_and_times_every_call(tmp_path: Path) -> None:
    out = tmp_path / "host-flow.json"
    _script("host_flow.py", "--smoke", "--flows", "quickstart", "--budget-s", "150", "--out", str(out),
            "--work", str(tmp_path / "work"))  # fmt: skip
    rep = json.loads(out.read_text())
    assert rep["hangs"] == 0 and rep["smoke"] is True
    (flow,) = rep["flows"]
    assert flow["name"] == "quickstart" and flow["outcome"] == "completed", flow["outcome"]
    calls = flow["calls"]
    assert rep["calls"] == len(calls) >= 10
    for c in calls:
        assert isinstance(c["seconds"], float) and 0 <= c["seconds"] <= c["bound_s"], c
        assert c["within_bound"] and c["outcome"] in ("ok", "error"), c
    by_step = {c["step"]: c for c in calls}
    # the seed's benchmark reports its steps as it goes; the refused claim at the spent budget is an error result
    assert by_step["benchmark seed (root)"]["progress"], "no progress notification for a benchmark"
    assert by_step["select_action (budget spent)"]["outcome"] == "error"
    assert by_step["final_evaluation"]["outcome"] == "ok"
    assert rep["baselines"]["softmax"]["smoke"][0]["eager_us"] > 0


@pytest.mark.slow
def test_baseline_repeat_smoke_reads_each_process_and_the_spread(tmp_path: Path) -> None:
    out = tmp_path / "baseline-repeat.json"
    _script("baseline_repeat.py", "--smoke", "--tasks", "softmax", "--processes", "2", "--budget-s", "120",
            "--out", str(out))  # fmt: skip
    rep = json.loads(out.read_text())
    (task,) = rep["tasks"]
    assert task["task"] == "softmax" and rep["not_run"] == []
    procs = task["processes"]
    assert [p["round"] for p in procs] == [1, 2] and all(p["ok"] for p in procs)
    readings = [p["times_us"]["smoke"]["eager"] for p in procs]
    assert all(r > 0 for r in readings)
    s = task["spread"]["smoke"]["eager"]
    assert s["n"] == 2 and s["min_us"] == min(readings) and s["max_us"] == max(readings)
    assert s["spread"] == pytest.approx((max(readings) - min(readings)) / s["median_us"])
    assert s["flagged"] == (s["spread"] > rep["spread_flag"])
    assert task["worst_spread"] == s["spread"]
    assert task["flagged"] == (["smoke eager"] if s["flagged"] else [])


@pytest.mark.slow
def test_candidate_cost_smoke_measures_singles_a_batch_and_the_floor(tmp_path: Path) -> None:
    out = tmp_path / "candidate-cost.json"
    _script("candidate_cost.py", "--smoke", "--out", str(out))
    rep = json.loads(out.read_text())
    (task,) = rep["tasks"]
    fresh = task["fresh"]
    assert task["task"] == "row_sum triton" and rep["smoke"] is True
    assert fresh["create_search_s"] >= 0 and fresh["first_benchmark"]["status"] == "ok"
    (one,) = fresh["candidates"]
    assert (
        one["status"] == "ok" and one["wall_s"] >= one["evaluation_s"] > 0 and one["steps"]["correctness"] > 0
    )
    assert fresh["wall_s"] == {"n": 1, "p50": one["wall_s"], "p90": one["wall_s"], "max": one["wall_s"]}
    b = fresh["batch"]
    assert b["size"] == 2 and b["statuses"] == ["ok", "ok"]
    assert b["per_minute_batch"] == pytest.approx(120 / b["batch_s"], rel=0.01)
    assert task["floor"]["wall_s"]["n"] == 1 and "batch" not in task["floor"]
    assert set(task["targets"]) == {"p50", "p90"} and task["anchor"] == {"not_run": "--no-anchor"}
