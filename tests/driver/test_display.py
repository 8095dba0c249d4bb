"""The run log: the search's best (never a CPU-interpreter number), short round lines, whole lines in a pipe,
and in a terminal a live footer (phase, progress against the budgets, time) whose last state stays on screen."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from ksearch.server.driver.display import Display, Limits, LiveDisplay, duration, first_sentence, short_reason
from ksearch.server.driver.loop import DriverResult
from ksearch.tools.final_eval import FinalRow
from ksearch.worldmodel.models import (
    Attempt,
    Evaluation,
    LLMCallRecord,
    Node,
    Search,
    SearchConfig,
    WorkloadTiming,
)

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


# --------------------------------------------------------------------------- verdicts, in a pipe


def _failed(aid: int, status: str, error: str) -> Attempt:
    ev = Evaluation(status=status, error=error)  # type: ignore[arg-type]
    return Attempt(id=aid, search_id=1, node_id=2, candidate_id="c", evaluation=ev)


def test_each_attempt_line_says_its_verdict_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    d = Display()
    d.start(SEARCH, _Policy())  # type: ignore[arg-type]
    d.attempt(NODE, _failed(3, "compile_error", "\n  line 7: 'acc' undeclared\nnvcc: 1 error"))
    d.attempt(NODE, _failed(4, "incorrect", "max abs err 0.5 at [3, 1]"))
    d.attempt(NODE, _attempt(5, 1.25))
    _, cerr, wrong, ok = _lines(capsys)
    assert cerr.startswith("  attempt 3 on #2: compile_error (line 7: 'acc' undeclared); best so far")
    assert "vs eager" not in cerr  # a failed attempt has no speed to report
    assert wrong.startswith("  attempt 4 on #2: incorrect (max abs err 0.5 at [3, 1]); ")
    assert ok.startswith("  attempt 5 on #2: correct, 1.250x vs eager [NVIDIA H200]; ")


def test_live_display_in_a_pipe_prints_the_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    piped = LiveDisplay(Console(file=io.StringIO(), force_terminal=False, width=60))
    plain = Display(Console(file=io.StringIO(), force_terminal=False, width=60, soft_wrap=True))
    for d in (piped, plain):
        d.start(SEARCH, _Policy(), limits=Limits(rounds=3))  # type: ignore[arg-type]
        d.round(1, NODE, REASON)
        d.attempt(NODE, _attempt(8, 1.5))
        d.event("update: 1 edits, 0 new intents")
        d.close()
    out = piped.console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in out and "\r" not in out
    assert out == plain.console.file.getvalue()  # type: ignore[attr-defined]
    assert "round 1: intent #2" in out and "  attempt 8 on #2: correct, 1.500x" in out


# --------------------------------------------------------------------------- the live footer

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tty() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)


def _screen_tail(c: Console, n: int = 2) -> list[str]:
    """The last `n` lines left on the terminal: the footer's final drawing."""
    raw = c.file.getvalue()  # type: ignore[attr-defined]
    last = raw.rsplit("\x1b[1A\x1b[2K", 1)[-1]  # after the last move up over the previous drawing
    lines = [ln.strip() for ln in ANSI.sub("", last).replace("\r", "\n").splitlines()]
    return [ln for ln in lines if ln.strip()][-n:]


def _footer_text(d: LiveDisplay) -> str:
    c = Console(file=io.StringIO(), width=120, color_system=None)
    c.print(d.footer())
    return c.file.getvalue()  # type: ignore[attr-defined]


def _result(**kw: object) -> DriverResult:
    base: dict[str, object] = dict(
        search_id=1,
        stop_reason="round budget reached (3)",
        rounds_run=1,
        attempts=6,
        best_attempt_id=10,
        best_speedup_vs_eager=1.75,
        device="NVIDIA H200",
        wall_s=12.0,
    )
    return DriverResult.model_validate({**base, **kw})


def test_the_footer_shows_the_phase_progress_and_time() -> None:
    d = LiveDisplay(_tty())
    d.start(
        SEARCH, _Policy(), best=_attempt(7, 1.5), attempts=3, limits=Limits(rounds=3, attempts=20, wall_s=600)
    )  # type: ignore[arg-type]
    try:
        d.phase("select")
        assert "select: choosing the next intent" in _footer_text(d)
        d.round(4, NODE, REASON)
        d.attempt(NODE, _attempt(8, 0.4))
        text = _footer_text(d)
        assert "refine  #2 set BLOCK_N = 4096 (seed: 2048)  attempt 2/8" in text
        assert "rounds 1/3 · attempts 4/20 · best 1.500x (attempt #7)" in text
        d.phase("update", NODE)
        assert "update  #2 set BLOCK_N" in _footer_text(d)
        d.round_done(NODE)
        d.started -= 90  # the first round took a minute and a half
        text = _footer_text(d)
        # 2 rounds left at 90 s a round is sooner than the wall budget's 8m30s: an estimate, marked ~
        assert "1m30s elapsed, ~3m00s left" in text
        assert "#2 set BLOCK_N" not in text  # its round is over: no longer in flight
    finally:
        d.close()


def test_the_final_state_is_left_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    c = _tty()
    d = LiveDisplay(c)
    d.start(SEARCH, _Policy(), best=_attempt(7, 1.5), attempts=3, limits=Limits(rounds=3))  # type: ignore[arg-type]
    d.round(1, NODE, REASON)
    d.attempt(NODE, _failed(9, "compile_error", "line 3: error: 'x' undeclared\nmore"))
    d.attempt(NODE, _attempt(10, 1.75))
    d.phase("update", NODE)
    d.finish(_result(tokens=1200, usd=0.05))
    head, progress = _screen_tail(c)
    assert head.endswith("finished: round budget reached (3)")
    assert "rounds 1/3 · attempts 6/" not in progress and "rounds 1/3 · attempts 6 · " in progress
    assert "best 1.750x (attempt #10)" in progress and "1,200 tokens $0.05" in progress
    assert "left" not in progress  # the run is over: no time left to estimate
    scrolled = ANSI.sub("", c.file.getvalue())  # type: ignore[attr-defined]
    assert "✗ attempt 9 on #2  compile_error  line 3: error: 'x' undeclared" in scrolled
    assert "✓ attempt 10 on #2  correct  1.750x vs eager [NVIDIA H200]  new best" in scrolled
    assert "score 0.713; best of 7 open intent(s)" in scrolled and "priority 0.63" not in scrolled
    assert capsys.readouterr().out == ""  # everything went to the display's console


def test_an_interrupted_run_leaves_a_stopped_footer_not_a_spinning_one() -> None:
    c = _tty()
    d = LiveDisplay(c)
    d.start(SEARCH, _Policy(), limits=Limits(rounds=3))  # type: ignore[arg-type]
    d.round(1, NODE, REASON)
    d.close()  # Ctrl-C: the driver's cleanup closes the display
    d.close()  # and a second close changes nothing
    head, progress = _screen_tail(c)
    assert head.endswith("stopped: interrupted")
    assert "refine" not in head and progress.startswith("rounds 1/3 · attempts 0")


def test_model_calls_are_counted_in_the_footer_and_listed_with_verbose() -> None:
    rec = LLMCallRecord(
        phase="write_code", provider="anthropic", model="m", tokens_in=900, tokens_out=100, cost_usd=0.02
    )
    quiet, loud = LiveDisplay(_tty()), LiveDisplay(_tty(), verbose=True)
    for d in (quiet, loud):
        d.start(SEARCH, _Policy())  # type: ignore[arg-type]
        d.llm_call(rec)
        d.llm_call(rec.model_copy(update={"error": "rate limited"}))
        assert "2,000 tokens $0.04" in _footer_text(d)
        d.close()
    q = ANSI.sub("", quiet.console.file.getvalue())  # type: ignore[attr-defined]
    v = ANSI.sub("", loud.console.file.getvalue())  # type: ignore[attr-defined]
    assert q.count("anthropic write_code") == 1 and "rate limited" in q  # a failed call always shows
    assert v.count("anthropic write_code") == 2


def test_durations_read_at_a_glance() -> None:
    assert [duration(x) for x in (4.6, 65, 3599, 7380)] == ["4s", "1m05s", "59m59s", "2h03m"]


def test_no_remaining_time_is_guessed_once_the_budgeted_work_is_done() -> None:
    d = Display(Console(file=io.StringIO()))
    d.start(SEARCH, _Policy(), limits=Limits(rounds=1))  # type: ignore[arg-type]
    d.round(1, NODE, REASON)
    d.started -= 30
    assert d.remaining() is None  # no round finished yet: no pace to extrapolate
    d.round_done(NODE)
    assert d.remaining() is None and "left" not in d.progress_text()  # the one round is done
    d.limits = Limits(rounds=3, wall_s=600)
    assert d.remaining() == pytest.approx((60.0, True), abs=1)  # 2 rounds at 30 s, sooner than the wall
    d.phase("final")
    assert d.remaining() is None


def test_a_final_row_timed_on_the_cpu_shows_no_speed(capsys: pytest.CaptureFixture[str]) -> None:
    row = FinalRow(
        attempt_id=2,
        node_id=2,
        status="ok",
        speedup_vs_eager=0.0004,
        speedup_vs_compile=None,
        workloads=["smoke"],
        device="cpu-interpreter",
        summary="",
    )
    d = Display()
    d.start(SEARCH, _Policy())  # type: ignore[arg-type]
    d.finish(_result(best_attempt_id=None, best_speedup_vs_eager=None, device=None, final=[row]))
    lines = _lines(capsys)
    assert "final: attempt 2: correct on smoke [cpu-interpreter: not timed]" in lines
    assert not [ln for ln in lines if "0.000x" in ln]


def test_an_update_line_shows_the_reflections_first_sentence_whole() -> None:
    reflection = (
        "tuner, round 1: 1 attempt(s) on #2; 2 of 2 measured settings ran correctly (0 of them timed on a GPU). "
        "No setting timed on a GPU yet (the CPU interpreter's timings rank nothing), so the open moves keep their "
        "prior order."
    )
    first = first_sentence(reflection)
    assert first == (
        "tuner, round 1: 1 attempt(s) on #2; 2 of 2 measured settings ran correctly (0 of them timed on a GPU)."
    )
    assert first_sentence("  one thought without a full stop ") == "one thought without a full stop"
    assert (
        first_sentence("v1.5 is faster. Keep it.") == "v1.5 is faster."
    )  # a decimal point is no sentence end
