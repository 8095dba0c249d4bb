"""An Evaluation never contradicts itself: the cross-field rules refuse contradictions, not absences."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from ksearch.worldmodel.models import CompileReport, Evaluation, WorkloadCorrectness, is_note


def check(workload: str, passed: bool) -> WorkloadCorrectness:
    return WorkloadCorrectness(
        workload=workload, passed=passed, kind="ok" if passed else "wrong_values", trials=1
    )


def report(ok: bool) -> CompileReport:
    return CompileReport(ok=ok, language="triton", seconds=0.1)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"status": "ok", "correctness": [check("a", True), check("b", False)]}, "failed correctness on b"),
        ({"status": "ok", "flags": ["output aliases an input"]}, "cheat flags (output aliases an input)"),
        ({"status": "ok", "compile": report(False)}, "compile report that failed"),
        (
            {"status": "flagged", "flags": ["note: launch_bound: 30 us to issue"]},
            "needs a flag other than a note",
        ),
        ({"status": "flagged"}, "needs a flag other than a note"),
        ({"status": "compile_error", "compile": report(True)}, "compile report that succeeded"),
        ({"status": "ok", "speedup_vs_eager": 0.0}, "speedup_vs_eager must be a positive finite number"),
        ({"status": "ok", "speedup_vs_compile": math.inf}, "speedup_vs_compile must be a positive finite"),
        ({"status": "ok", "roofline_fraction": math.nan}, "roofline_fraction must be a positive finite"),
    ],
)
def test_a_contradiction_is_refused_and_named(fields: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match="inconsistent evaluation") as e:
        Evaluation.model_validate(fields)
    assert says in str(e.value)


def test_every_contradiction_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as e:
        Evaluation(
            status="ok", correctness=[check("a", False)], flags=["reads its input twice"], speedup_vs_eager=-1
        )
    text = str(e.value)
    assert "failed correctness on a" in text and "cheat flags" in text and "speedup_vs_eager" in text


@pytest.mark.parametrize(
    "fields",
    [
        {
            "status": "ok",
            "correctness": [check("a", True)],
            "flags": ["note: launch_bound: x"],
            "compile": report(True),
        },
        {"status": "ok", "flags": ["degenerate_reference: the output is all zeros"], "speedup_vs_eager": 1.5},
        {
            "status": "flagged",
            "flags": ["note: x", "output aliases an input"],
            "correctness": [check("a", True)],
        },
        {"status": "compile_error", "compile": report(False), "error": "line 3: bad"},
        {"status": "compile_error", "error": "nvcc not found"},  # refused before a report existed
        {"status": "incorrect", "correctness": [check("a", False)], "flags": ["output aliases an input"]},
    ],
)
def test_consistent_evaluations_load(fields: dict[str, object]) -> None:
    Evaluation.model_validate(fields)


def test_records_from_before_the_lists_still_load() -> None:
    # An attempt stored by an older version: a status and a speedup, nothing else.
    ev = Evaluation.model_validate_json('{"status": "ok", "speedup_vs_eager": 2.0}')
    assert ev.status == "ok" and ev.correctness == [] and not ev.correct


def test_notes_are_the_only_flags_that_do_not_count() -> None:
    assert is_note("note: timings are from the Triton CPU interpreter")
    assert is_note("degenerate_reference: constant output")
    assert not is_note("tamper_suspect: line 3: sets torch.backends")
