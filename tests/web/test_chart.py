"""The score chart: a log axis fitted to the data, CPU-interpreter attempts never drawn as speedups, a person's
attempts in their own colour, and where a policy declined an intent."""

from __future__ import annotations

import re
from datetime import timedelta

from ksearch.server.web.chart import HEIGHT, score_chart
from ksearch.tools.loop.declines import Decline
from ksearch.worldmodel.models import Attempt, Evaluation, WorkloadTiming


def _attempt(aid: int, speedup: float, device: str = "NVIDIA H200") -> Attempt:
    t = WorkloadTiming(
        workload="w",
        device=device,
        median_us=10.0,
        iqr_us=0.1,
        ci_low_us=9.9,
        ci_high_us=10.1,
        n=50,
        speedup_vs_eager=speedup,
    )
    ev = Evaluation(status="ok", speedup_vs_eager=speedup, timings=[t])
    return Attempt(id=aid, search_id=1, node_id=2, round=1, candidate_id="c", evaluation=ev)


def _dots(svg: str) -> dict[int, float]:
    """attempt id -> the y of its dot."""
    return {
        int(a): float(cy)
        for cy, a in re.findall(
            r'class="pt [^"]*" cx="[\d.]+" cy="([\d.]+)" r="3.6" data-attempt="(\d+)"', svg
        )
    }


def test_small_speedups_spread_over_the_plot_on_a_log_axis() -> None:
    svg = str(score_chart([_attempt(1, 0.05), _attempt(2, 0.4), _attempt(3, 0.2)], best_attempt_id=2))
    dots = _dots(svg)
    assert set(dots) == {1, 2, 3}
    # 0.05x and 0.4x are three doublings apart: far apart on the plot, not both on the floor
    assert dots[1] - dots[2] > (HEIGHT - 50) / 3
    assert dots[3] < dots[1] and dots[3] > dots[2]
    ticks = re.findall(r">([\d.]+)x</text>", svg)
    assert "0.1" in ticks and "1" in ticks and "1.25" not in ticks


def test_cpu_interpreter_attempts_are_marks_not_speedups() -> None:
    svg = str(
        score_chart([_attempt(1, 1.5), _attempt(2, 0.001, device="cpu-interpreter")], best_attempt_id=1)
    )
    assert set(_dots(svg)) == {1}
    assert 'class="pt-cpu"' in svg and 'data-attempt="2"' in svg
    assert "correct (CPU interpreter: not timed)" in svg and "0.001x" not in svg


def test_a_persons_attempts_keep_their_colour_whatever_their_kind() -> None:
    timed = _attempt(1, 1.5).model_copy(update={"author": "human"})
    cpu = _attempt(2, 0.001, device="cpu-interpreter").model_copy(update={"author": "human"})
    failed = Attempt(
        id=3,
        search_id=1,
        node_id=2,
        round=1,
        candidate_id="c",
        author="human",
        evaluation=Evaluation(status="crash"),
    )
    tuned = _attempt(4, 1.2).model_copy(update={"author": "tuner"})
    svg = str(score_chart([timed, cpu, failed, tuned], best_attempt_id=1))
    assert re.search(r'class="pt human"[^>]*data-attempt="1"', svg)
    assert re.search(r'class="pt-cpu human"[^>]*data-attempt="2"', svg)
    assert re.search(r'class="pt-fail human"[^>]*data-attempt="3"', svg)
    assert re.search(r'class="pt auto"[^>]*data-attempt="4"', svg)  # the tuner's stays the tuner's


def test_a_declined_intent_is_marked_between_the_attempts_around_it() -> None:
    first, later = _attempt(1, 1.5), _attempt(2, 1.2)
    at = first.created_at + timedelta(seconds=1)
    later = later.model_copy(update={"created_at": at + timedelta(seconds=1), "round": 2})
    d = Decline(node_id=7, round=2, by="tuner", attempts=0, why="it names no parameters to set", at=at)
    svg = str(score_chart([first, later], best_attempt_id=1, declines=[d], titles={7: "wider blocks"}))
    [mark] = re.findall(r'<g class="declined-mark" data-node="7">.*?</g>', svg)
    assert (
        "round 2: intent #7 &#x27;wider blocks&#x27; declined by the tuner policy before any attempt (its round "
        "was given back): it names no parameters to set" in mark
    )
    x = float(re.search(r'<line class="declined-line" x1="([\d.]+)"', mark).group(1))  # type: ignore[union-attr]
    dots = {
        int(a): float(cx)
        for cx, a in re.findall(r'class="pt [^"]*" cx="([\d.]+)"[^>]*data-attempt="(\d+)"', svg)
    }
    assert dots[1] < x < dots[2]
    assert ">intent declined</text>" in svg and ">CPU interpreter: correct, not timed</text>" in svg
