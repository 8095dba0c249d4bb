"""Where no smaller size fits the smoke budget, the derived smoke workload is the cheapest that ran, never
the file's GPU sizes; and the search never fake-runs the sizes near the GPU ones it does not need."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.task import Workload
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.facts import TensorInfo, WorkloadProbe, task_facts
from ksearch.gpu.tasks.rt.runtime import TaskRuntime
from ksearch.gpu.tasks.rt.smoke import SMOKE_ELEMENTS, _SmokeSearch
from ksearch.gpu.tasks.shrink import SizeKnobs

KB = Path(__file__).parent / "fixtures" / "kernelbench"


@pytest.mark.slow
def test_fixed_width_weights_get_the_cheapest_sizes_that_ran() -> None:
    # the constructor's channel widths keep the weights over the budget at any size, and fewer than 16
    # pixels a side break the pooling: the smoke is the smallest image that runs, not the 256x256 copy
    task = load_task(KB / "l3_fixed_width_net.py")
    smoke = task.smoke()
    c = smoke.constants
    note = task.extras["smoke_note"]
    assert c, note
    assert c["height"] == c["width"] == 16, c  # 8 fails the pooling; 16 is the smallest that runs
    assert c["batch_size"] == 8 and c["num_classes"] < 1000
    assert "still over the smoke budget" in note, note
    facts = task_facts(task)
    assert facts.smoke is not None and facts.smoke.verified and facts.smoke.over_budget
    rt = TaskRuntime(task)
    inputs = rt.make_inputs(smoke, 0, "cpu")
    assert list(inputs[0].shape) == [8, 3, 16, 16]
    out = rt.build_reference(smoke, "cpu")(inputs)
    assert out.shape == (8, c["num_classes"]) and torch.isfinite(out).all()


class _Impl:
    def module_for(self, wl: Workload) -> None:
        return None


class _StubProber:
    """A model whose cost is its size `n` (input and output of n elements) plus fixed weights; every
    fake run is recorded, so a test can see which sizes were run."""

    def __init__(self, weights: int = 0, real_fails: Callable[[int], bool] = lambda n: False) -> None:
        self.impl = _Impl()
        self.weights = weights
        self.real_fails = real_fails
        self.fake_sizes: list[int] = []
        self.real_sizes: list[int] = []

    def _n(self, wl: Workload) -> int:
        return int(wl.constants.get("n", 1 << 22))

    def measure(self, wl: Workload, *, fake: bool) -> WorkloadProbe:
        n = self._n(wl)
        (self.fake_sizes if fake else self.real_sizes).append(n)
        t = [TensorInfo(name="x", shape=[n], dtype="float32", bytes=4 * n)]
        return WorkloadProbe(
            workload=wl.name, split=wl.split, method="fake" if fake else "real", inputs=t,
            outputs=[t[0].model_copy(update={"name": "out"})], params_elements=self.weights, flops_counted=0.0,
        )  # fmt: skip

    def run_plain(self, wl: Workload) -> str | None:
        n = self._n(wl)
        self.real_sizes.append(n)
        if self.real_fails(n):
            return f"running the forward in a real CPU run: RuntimeError: fails at {n}"
        return None


def _search(prober: Any, n: int = 1 << 22) -> _SmokeSearch:
    knobs = SizeKnobs(constants={"n": n})
    base = Workload(name="default", params={}, split="search")
    return _SmokeSearch(prober, base, "smoke", knobs, prober.measure(base, fake=True))


def test_the_search_grows_from_the_smallest_sizes_and_stops_before_the_budget_is_left() -> None:
    prober = _StubProber()
    found = _search(prober).run()
    assert found is not None
    report, probe = found
    best = SMOKE_ELEMENTS // 2  # input + output of n elements fill the budget exactly
    assert report.constants == {"n": best} and report.verified and not report.over_budget
    assert probe.elements() == SMOKE_ELEMENTS
    fakes = prober.fake_sizes[1:]  # after the file's own sizes
    assert fakes == sorted(fakes) and fakes[0] == (1 << 22) // 16384
    # the next step would double the cost: predicted over the budget, so never run (nor anything larger)
    assert max(fakes) == best
    assert prober.real_sizes == [best]


def test_nothing_fits_the_cheapest_that_ran_is_used() -> None:
    # weights of twice the budget fit at no size: the sizes are shrunk as far as the model runs, and the
    # cheapest of those is the smoke, never the file's 4M
    prober = _StubProber(weights=2 * SMOKE_ELEMENTS)
    found = _search(prober).run()
    assert found is not None
    report, _ = found
    assert report.constants == {"n": 8} and report.over_budget and report.verified
    assert "the cheapest sizes that ran" in report.note
    # the smallest common factor is over the budget at once: no larger one is run; then n is halved
    assert prober.fake_sizes[1:] == [256, 128, 64, 32, 16, 8]
    assert prober.real_sizes == [8]

    # the cheapest fails for real: the next cheapest is confirmed instead
    picky = _StubProber(weights=2 * SMOKE_ELEMENTS, real_fails=lambda n: n < 16)
    found = _search(picky).run()
    assert found is not None and found[0].constants == {"n": 16} and picky.real_sizes == [8, 16]

    # every real run fails: no smoke is made up, and the file's size is never run for real
    failing = _StubProber(weights=2 * SMOKE_ELEMENTS, real_fails=lambda n: True)
    assert _search(failing).run() is None
    assert failing.real_sizes == [8, 16, 32]


def test_a_candidate_whose_real_run_fails_gives_way_to_the_next_smaller_that_fits() -> None:
    best = SMOKE_ELEMENTS // 2
    prober = _StubProber(real_fails=lambda n: n > best // 2)
    found = _search(prober).run()
    assert found is not None and found[0].constants == {"n": best // 2}
    assert prober.real_sizes == [best, best // 2]
