"""A noisy baseline reading is measured again before anything divides by it (gpu/sandbox/steps.py,
`_measure_baseline`): a bimodal first reading (mean and median apart, as a cross-entropy torch.compile baseline read
745 / 769 us on an H200) or a wide one is read up to twice more, the tightest kept and said. The worker is a stand-in
that replays readings (a CPU cannot produce a GPU's); the re-measuring is the sandbox's own code."""

from __future__ import annotations

from typing import Any

import pytest

from ksearch.gpu.sandbox.run import Run
from ksearch.gpu.sandbox.steps import EvalSteps, baseline_reading
from ksearch.gpu.timing.stats import unsteady
from ksearch.worldmodel.models import Candidate, Environment, EvalSettings

pytestmark = pytest.mark.anyio


def result(median: float, mean: float, half: float) -> dict[str, Any]:
    return {
        "device": "NVIDIA H200",
        "median_us": median,
        "mean_us": mean,
        "iqr_us": 2 * half,
        "ci_low_us": median - half,
        "ci_high_us": median + half,
        "n": 200,
        "flags": [],
        "compile_mode": "default",
    }


class Worker:
    """Replays one reply per benchmark call."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.calls = 0
        self.hello = {"gpu_uuid": "GPU-1a2b3c4d-0000-1111-2222-333344445555"}

    async def call(self, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert op == "benchmark" and args["which"] == "compile"
        self.calls += 1
        return {"ok": True, "result": self.replies.pop(0)}


class Cache:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    async def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value


def steps() -> EvalSteps:
    s = EvalSteps()
    s.cache = Cache()
    s.call_timeout_s = 60.0
    s.build_timeout_s = 60.0
    return s


ENV = Environment(device="NVIDIA H200", cpu_mode=False, driver="570", torch="2.9")


async def test_a_bimodal_reading_is_measured_again_and_said() -> None:
    sb = steps()
    w = Worker([result(769.0, 745.0, 3.0), result(754.0, 755.0, 2.0), result(751.0, 750.5, 1.0)])
    run = Run(Candidate.of("# x\n", "triton"), EvalSettings(seed=1))
    got = await sb._measure_baseline(w, run, "ce", "compile", "k", ENV)  # type: ignore[arg-type]
    assert got is not None and w.calls == 2  # the second reading was steady: no third
    assert got["median_us"] == 754.0
    assert got["remeasured"].startswith("first reading bimodal (mean 745.0 / median 769.0 us); read 2 times")
    assert got["gpu_uuid"].startswith("GPU-1a2b") and got["measured_at"] and got["env_key"] == ENV.key()
    (note,) = [f for f in run.flags if "re-measured" in f]
    assert note.startswith(
        "note: torch.compile baseline for ce re-measured: first reading bimodal (mean 745.0"
    )
    assert (await sb.cache.get("k")) == got  # what every later evaluation (and the search's pin) reads
    r = baseline_reading(got, "compile", run.settings)
    assert r is not None and r.remeasured == got["remeasured"] and r.gpu_uuid == w.hello["gpu_uuid"]


async def test_a_wide_reading_is_read_three_times_at_most_and_the_tightest_kept() -> None:
    sb = steps()
    w = Worker([result(500.0, 501.0, 40.0), result(505.0, 504.0, 20.0), result(498.0, 499.0, 30.0)])
    run = Run(Candidate.of("# x\n", "triton"), EvalSettings(seed=1))
    got = await sb._measure_baseline(w, run, "ce", "compile", "k", ENV)  # type: ignore[arg-type]
    assert got is not None and w.calls == 3
    assert got["median_us"] == 505.0  # the narrowest CI of the three
    assert "kept reading 2" in got["remeasured"] and "still noisy" in got["remeasured"]


async def test_a_steady_reading_is_read_once() -> None:
    sb = steps()
    w = Worker([result(683.2, 684.0, 2.0)])
    run = Run(Candidate.of("# x\n", "triton"), EvalSettings(seed=1))
    got = await sb._measure_baseline(w, run, "ce", "compile", "k", ENV)  # type: ignore[arg-type]
    assert got is not None and w.calls == 1 and "remeasured" not in got and not run.flags


def test_unsteady_names_what_is_wrong() -> None:
    assert unsteady(769.0, 769.0, 745.0, 766.0, 772.0) == "bimodal (mean 745.0 / median 769.0 us)"
    assert unsteady(100.0, 100.0, 100.5, 95.0, 104.0) == "wide (95% CI ±5.0% of 100.0 us)"
    assert unsteady(100.0, 100.0, 100.5, 99.0, 101.0) is None
