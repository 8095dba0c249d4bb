"""The `took … s` line: the largest steps by name, the rest summed, and the seconds spent inside them apart."""

from __future__ import annotations

from ksearch.tools.common import SECONDS_NAMED, seconds_text
from ksearch.worldmodel.models import Evaluation


def _ev(steps: dict[str, float]) -> Evaluation:
    return Evaluation(status="ok", seconds=sum(steps.values()), seconds_by_step=steps)


def test_the_largest_steps_are_named_and_the_rest_summed() -> None:
    steps = {
        "load": 0.4,
        "correctness": 6.1,
        "audit": 0.3,
        "timing": 5.2,
        "wait_for_worker": 0.2,
        "baselines": 2.0,
    }
    said = seconds_text(_ev({**steps, "inputs": 0.5}))
    assert said.startswith("took 14.7 s: correctness 6.1, timing 5.2, baselines 2.0, load 0.4, other 0.5"), (
        said
    )
    assert "audit" not in said and "wait for worker" not in said
    assert said.endswith("(drawing inputs 0.5 of them)"), said
    assert len(steps) > SECONDS_NAMED


def test_few_steps_are_all_named_and_tiny_ones_left_out() -> None:
    said = seconds_text(_ev({"correctness": 1.25, "timing": 0.5, "compile": 0.01}))
    assert said == "took 1.8 s: correctness 1.2, timing 0.5", said
