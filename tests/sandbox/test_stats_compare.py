"""Robust timing summaries and the noise-aware `compare`."""

from __future__ import annotations

import random

import pytest

from ksearch.gpu.timing.compare import compare
from ksearch.gpu.timing.stats import median_ci_ranks, summarize
from ksearch.worldmodel.models import Environment, Evaluation, WorkloadTiming


def test_median_ci_covers_the_true_median_at_least_95_percent() -> None:
    rng = random.Random(3)
    hits = 0
    trials = 400
    for _ in range(trials):
        xs = [rng.lognormvariate(0, 0.3) for _ in range(25)]  # true median 1.0
        s = summarize(xs)
        hits += s.ci_low <= 1.0 <= s.ci_high
    assert hits / trials >= 0.93  # 95% nominal; a few percent of slack for 400 draws


def test_small_samples_use_the_range_and_ranks_are_exact() -> None:
    assert median_ci_ranks(5) is None
    assert median_ci_ranks(6) == (0, 5)
    assert median_ci_ranks(20) == (5, 14)  # classic table value: 6th and 15th order statistics
    s = summarize([3.0, 1.0, 2.0])
    assert (s.ci_low, s.median, s.ci_high, s.n) == (1.0, 2.0, 3.0, 3)


def _ev(medians: dict[str, float], rel_ci: float = 0.005, device: str = "NVIDIA H200") -> Evaluation:
    return Evaluation(
        status="ok",
        env=Environment(device=device, cpu_mode=device == "cpu-interpreter"),
        timings=[
            WorkloadTiming(
                workload=w,
                device=device,
                median_us=m,
                iqr_us=m * rel_ci,
                ci_low_us=m * (1 - rel_ci),
                ci_high_us=m * (1 + rel_ci),
                n=50,
            )
            for w, m in medians.items()
        ],
    )


def test_clear_win_is_faster() -> None:
    v = compare(_ev({"a": 80.0, "b": 40.0}), _ev({"a": 100.0, "b": 50.0}))
    assert v.faster and v.ratio == pytest.approx(1.25) and v.ci_low > 1.2
    assert v.per_workload == pytest.approx({"a": 1.25, "b": 1.25})


def test_within_noise_is_not_faster() -> None:
    v = compare(_ev({"a": 99.6}, rel_ci=0.01), _ev({"a": 100.0}, rel_ci=0.01))
    assert not v.faster and "noise" in v.reason


def test_real_but_tiny_gain_is_below_min_gain() -> None:
    v = compare(_ev({"a": 99.0}, rel_ci=0.0005), _ev({"a": 100.0}, rel_ci=0.0005), min_gain=0.02)
    assert not v.faster and "minimum gain" in v.reason
    assert compare(_ev({"a": 99.0}, rel_ci=0.0005), _ev({"a": 100.0}, rel_ci=0.0005), min_gain=0.005).faster


def test_a_loss_on_one_workload_offsets_a_win_on_another() -> None:
    v = compare(_ev({"a": 50.0, "b": 200.0}), _ev({"a": 100.0, "b": 100.0}))
    assert v.ratio == pytest.approx(1.0) and not v.faster


def test_never_compares_cpu_with_gpu() -> None:
    v = compare(_ev({"a": 1.0}, device="cpu-interpreter"), _ev({"a": 100.0}))
    assert not v.faster and v.ratio is None and "different devices" in v.reason


def test_invalid_results() -> None:
    bad = Evaluation(status="incorrect")
    assert not compare(bad, _ev({"a": 1.0})).faster
    assert compare(_ev({"a": 1.0}), bad).faster  # a correct, timed candidate beats a wrong one
    with pytest.raises(ValueError):
        compare(_ev({"a": 1.0}), _ev({"a": 1.0}), confidence=1.5)
