"""The `took … s` line: the largest steps by name, the rest summed, and the seconds spent inside them apart."""

from __future__ import annotations

from ksearch.tools.common import SECONDS_NAMED, seconds_text
from ksearch.worldmodel.models import Evaluation


def _ev(steps: dict[str, float]) -> Evaluation:
    return Evaluation(status="ok", seconds=sum(steps.values()), seconds_by_step=steps)


def test_the_largest_steps_are_named_and_small_ones_summed_where_they_add_up() -> None:
    steps = {
        "load": 0.4,
        "correctness": 6.1,
        "audit": 0.3,
        "timing": 5.2,
        "wait_for_worker": 0.2,
        "baselines": 2.0,
    }
    said = seconds_text(_ev({**steps, "inputs": 0.5}))
    # load, audit and waiting add up to 0.9 s, under a tenth of 14.7 s: not named, not summed
    assert said == "took 14.7 s: correctness 6.1, timing 5.2, baselines 2.0 (drawing inputs 0.5 of them)", (
        said
    )
    said = seconds_text(_ev({**steps, "inputs": 0.5, "reference": 3.2}))  # inside the others: not a step
    assert said.endswith("(drawing inputs 0.5, running the reference 3.2 of them)"), said
    many = {f"step_{i}": 1.0 for i in range(SECONDS_NAMED + 2)}  # each a sixth of the whole
    said = seconds_text(_ev(many))
    assert said.count("step ") == SECONDS_NAMED and said.endswith("other 2.0"), said


def test_few_steps_are_all_named_and_tiny_ones_left_out() -> None:
    said = seconds_text(_ev({"correctness": 1.25, "timing": 0.5, "compile": 0.01}))
    assert said == "took 1.8 s: correctness 1.2, timing 0.5", said


def test_a_quick_evaluation_says_only_how_long_it_took() -> None:
    assert seconds_text(_ev({"timing": 0.4, "correctness": 0.3, "audit": 0.1})) == "took 0.8 s"
