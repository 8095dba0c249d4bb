"""A passing check's line says its relative error, and plainly when the rule accepted a large one by its absolute
tolerance alone: a live host's softmax kernel, 16% off (outputs ~3e-4 against KernelBench's atol of 1e-4), read
"correct on smoke (3 trials, max abs err 8.61e-05)"."""

from __future__ import annotations

from ksearch.tools.common import summarize
from tests.fixtures import evals


def _line(max_rel_err: float | None) -> str:
    ev = evals.gpu_eval(2.0, max_abs_err=8.61e-5)
    ev.correctness[0].max_rel_err = max_rel_err
    return next(ln for ln in summarize(ev).splitlines() if ln.startswith("correct on"))


def test_a_large_relative_error_that_passed_is_said_plainly() -> None:
    line = _line(0.1647)
    assert "max abs err 8.61e-05, max rel err 16.5% on elements above the absolute tolerance" in line, line
    assert "by its absolute tolerance alone" in line


def test_a_small_relative_error_is_given_as_a_number() -> None:
    line = _line(3e-5)
    assert line == "correct on w (3 trials, max abs err 8.61e-05, max rel err 3e-05)", line
    assert _line(None) == "correct on w (3 trials, max abs err 8.61e-05)"
