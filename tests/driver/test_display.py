"""The run log: the search's best (never a CPU-interpreter number), short round lines, whole lines in a pipe."""

from __future__ import annotations

import pytest

from server.driver.display import Display, short_reason
from worldmodel.models import Attempt, Evaluation, Node, Search, SearchConfig, WorkloadTiming

REASON = (
    "#2: score 0.713 = priority 0.63, difficulty 1 within the cap 4, exploration +0.083 "
    "(branch #2 has 0 of 1 attempts); best of 7 open intent(s)"
)


class _Policy:
    name, model = "tuner", None


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
    return Attempt(id=aid, search_id=1, node_id=2, candidate_id="c", evaluation=ev)


NODE = Node(id=2, search_id=1, parent_id=1, kind="intent", title="set BLOCK_N = 4096 (seed: 2048)")
SEARCH = Search(id=1, name="softmax-1", task="softmax", config=SearchConfig())


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_round_lines_keep_the_formula_for_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    assert short_reason(REASON) == "score 0.713; best of 7 open intent(s)"
    assert short_reason("chosen by the caller") == "chosen by the caller"
    Display().round(1, NODE, REASON)
    Display(verbose=True).round(1, NODE, REASON)
    short, full = _lines(capsys)
    assert (
        short == "round 1: intent #2 set BLOCK_N = 4096 (seed: 2048) — score 0.713; best of 7 open intent(s)"
    )
    assert full.endswith(REASON)


def test_best_so_far_is_the_search_best_and_never_a_cpu_number(capsys: pytest.CaptureFixture[str]) -> None:
    d = Display()
    d.start(SEARCH, _Policy(), best=_attempt(7, 1.5), cpu_correct=0)  # type: ignore[arg-type]
    d.attempt(NODE, _attempt(8, 0.4))  # slower: the search's best stays
    d.attempt(NODE, _attempt(9, 0.001, device="cpu-interpreter"))
    d.attempt(NODE, _attempt(10, 1.75))
    _, slower, cpu, faster = _lines(capsys)
    assert slower.endswith("best so far: 1.500x (attempt #7)")
    assert "0.001x" not in cpu and "cpu-interpreter: correct, not timed" in cpu
    assert faster.endswith("best so far: 1.750x (attempt #10)")

    fresh = Display()
    fresh.start(SEARCH, _Policy(), best=None, cpu_correct=2)  # type: ignore[arg-type]
    fresh.attempt(NODE, _attempt(11, 0.002, device="cpu-interpreter"))
    assert _lines(capsys)[-1].endswith("best so far: none (3 correct, none timed on a GPU)")


def test_a_long_line_stays_whole_in_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    long = "update: " + "the tuner fitted effects on log-speedup for every declared value " * 4
    Display().event(long)
    (line,) = _lines(capsys)
    assert line == f"  · {long}"
