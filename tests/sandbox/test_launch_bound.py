"""A call whose host work outlasts its GPU work is timed as its launch cost: the result says so."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ksearch.gpu.timing import measure as timing

pytestmark = pytest.mark.gpu


def _time(fn: Any, inputs: list[Any]) -> timing.TimingResult:
    return timing.time_gpu(
        fn, [inputs], warmup=3, min_reps=10, max_reps=30, budget_s=5.0, target_rel_ci=0.05, preamble=None
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_many_tiny_launches_are_noted_launch_bound() -> None:
    x = torch.zeros(32, device="cuda")

    def tiny(inputs: list[Any]) -> Any:
        t = inputs[0]
        for _ in range(300):  # 300 launches of a 32-element add: microseconds of GPU work each, host-paced
            t = t + 1
        return t

    res = _time(tiny, [x])
    assert res.issue_median_us is not None and res.event_median_synced_us is not None
    assert res.issue_median_us >= timing.LAUNCH_BOUND * res.event_median_synced_us
    [note] = [f for f in res.flags if f.startswith("note: launch_bound:")]
    # a share of the events' time, not an "x" that reads like a speedup
    assert "% of the" in note and "us between CUDA events of one call from an idle GPU" in note, note


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_one_large_matmul_is_not_launch_bound() -> None:
    a = torch.randn(4096, 4096, device="cuda")

    res = _time(lambda inputs: inputs[0] @ inputs[0], [a])
    assert res.issue_median_us is not None and res.event_median_synced_us is not None
    assert res.issue_median_us < 0.5 * res.event_median_synced_us
    assert not any("launch_bound" in f for f in res.flags), res.flags
