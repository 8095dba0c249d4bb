"""Prompt files: every phase renders from its context, for every language, with nothing left unfilled."""

from __future__ import annotations

import pytest

from server.driver.policies.base import AttemptOutcome, InitContext, UpdateContext, WriteContext
from server.driver.policies.llm import schema_for
from server.driver.policies.pricing import price_for
from tests.policies.policy_data import SEED, brief
from tools.prompting import fill, render_prompt


@pytest.mark.parametrize("language", ["triton", "cuda", "cpp_ext"])
def test_every_phase_renders_for_every_language(language: str) -> None:
    task = brief(language=language)
    ctxs = {
        "init": InitContext(task=task, seed_source=SEED, tunables={"BLOCK_SIZE": [256, 512]}),
        "write_code": WriteContext(
            task=task,
            intent_id=4,
            intent_title="split rows",
            base_source=SEED,
            feedback="line 12: error",
            attempt_index=1,
        ),
        "update": UpdateContext(
            task=task,
            round=2,
            intent_id=4,
            intent_title="split rows",
            tree_view="#1 root",
            outcomes=[
                AttemptOutcome(
                    attempt_id=9, status="incorrect", summary="wrong_values at [3, 7]\nmax err 2.0"
                )
            ],
            rejected=["edits.0.node_id: no node 99 in this search"],
        ),
    }
    marker = {"triton": "@triton.jit", "cuda": "from gpu import nvrtc", "cpp_ext": "load_inline"}[language]
    for phase, ctx in ctxs.items():
        system, user = render_prompt(phase, ctx)  # type: ignore[arg-type]
        assert marker in system and "ModelNew" in system
        assert "{{" not in user and "{{" not in system  # every placeholder filled
        assert language in user and "NVIDIA H200" in user
        if phase != "update":
            assert "def get_inputs" in user  # the reference travels with init and write_code


def test_sections_follow_the_context() -> None:
    task = brief()
    first = WriteContext(task=task, intent_id=4, intent_title="split rows", base_source=SEED)
    _, user = render_prompt("write_code", first)
    assert "What the evaluator said" not in user and "Fix what the feedback shows" not in user
    assert "attempt 1)" in user
    later = first.model_copy(update={"feedback": "compile error at line 12", "attempt_index": 2})
    _, user = render_prompt("write_code", later)
    assert "What the evaluator said about attempt 2 of this intent\ncompile error at line 12" in user
    assert "Fix what the feedback shows" in user and "attempt 3)" in user
    # Source is inserted verbatim: its own braces and blank lines are kept.
    assert SEED.rstrip() in user

    upd = UpdateContext(
        task=task,
        round=2,
        intent_id=4,
        intent_title="split rows",
        tree_view="#1 root",
        outcomes=[
            AttemptOutcome(attempt_id=9, status="incorrect", summary="wrong_values at [3, 7]\nmax err 2.0")
        ],
        rejected=["edits.0.node_id: no node 99 in this search"],
    )
    _, user = render_prompt("update", upd)
    assert "- attempt 9: incorrect; vs eager n/a" in user and "    max err 2.0" in user
    assert "not applied" in user and "- edits.0.node_id: no node 99" in user
    _, user = render_prompt("update", upd.model_copy(update={"rejected": []}))
    assert "not applied" not in user


def test_long_feedback_is_clipped_keeping_both_ends() -> None:
    log = "HEAD-LINE\n" + "x" * 50_000 + "\nTAIL-LINE"
    ctx = WriteContext(
        task=brief(), intent_id=4, intent_title="t", base_source=SEED, feedback=log, attempt_index=1
    )
    _, user = render_prompt("write_code", ctx)
    assert "HEAD-LINE" in user and "TAIL-LINE" in user and "characters cut" in user
    assert len(user) < 30_000


def test_template_errors_are_loud() -> None:
    with pytest.raises(KeyError, match="typo"):
        fill("hello {{typo}}", {"name": "x"})
    with pytest.raises(TypeError, match="takes a WriteContext"):
        render_prompt("write_code", InitContext(task=brief(), seed_source=SEED))
    with pytest.raises(ValueError, match="unknown phase"):
        render_prompt("refine", InitContext(task=brief(), seed_source=SEED))  # type: ignore[arg-type]


def test_schemas_are_plain_and_complete() -> None:
    for phase, name in (
        ("init", "submit_analysis"),
        ("write_code", "submit_code"),
        ("update", "submit_tree_update"),
    ):
        s = schema_for(phase)  # type: ignore[arg-type]
        assert s.name == name and s.json_schema["type"] == "object"
        assert "$ref" not in str(s.json_schema)
    ops = schema_for("update").json_schema["properties"]["edits"]["items"]["properties"]["op"]["enum"]
    assert "prune" in ops and "insert" not in ops


def test_prices() -> None:
    assert price_for("claude-sonnet-4-5-20250929") == (3.0, 15.0)
    assert price_for("claude-opus-4-5") == (5.0, 25.0)
    assert price_for("claude-opus-4-1-20250805") == (15.0, 75.0)
    assert price_for("openai/gpt-4o-mini") == (0.15, 0.6)
    assert price_for("claude-opus-4-7") is None  # a version not listed is not guessed from a neighbour
    assert price_for("llama3.1:70b") is None
