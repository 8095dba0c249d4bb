"""Prompt files: every phase renders from its context, for every language, with nothing left unfilled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ksearch.server.cli import steer
from ksearch.server.driver.policies.base import AttemptOutcome, InitContext, UpdateContext, WriteContext
from ksearch.server.driver.policies.llm import schema_for
from ksearch.server.driver.policies.pricing import price_for
from ksearch.tools.prompting.fill import fill, render_prompt
from ksearch.worldmodel.models import EXPECTED_SPEEDUP, EditSpec, IntentSpec, Node
from ksearch.worldmodel.render import render_tree
from tests.policies.policy_data import SEED, brief

ROOT = Path(__file__).resolve().parents[2]


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
    marker = {"triton": "@triton.jit", "cuda": "from ksearch.gpu import nvrtc", "cpp_ext": "load_inline"}[
        language
    ]
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
    later = first.model_copy(
        update={"feedback": "compile error at line 12", "attempt_index": 2, "feedback_attempt_id": 9}
    )
    _, user = render_prompt("write_code", later)
    assert (
        "What the evaluator said about this intent's attempt 2 (attempt #9)\ncompile error at line 12" in user
    )
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
    assert price_for("claude-sonnet-4-5-20250929") == pytest.approx((3.0, 15.0, 3.75, 0.3))
    assert price_for("claude-opus-4-5") == pytest.approx((5.0, 25.0, 6.25, 0.5))
    assert price_for("claude-opus-4-1-20250805") == pytest.approx((15.0, 75.0, 18.75, 1.5))
    # OpenAI: a write costs the input price, a read the listed cached-input price
    assert price_for("openai/gpt-4o-mini") == (0.15, 0.6, 0.15, 0.075)
    assert price_for("claude-opus-4-7") is None  # a version not listed is not guessed from a neighbour
    assert price_for("llama3.1:70b") is None


# Wording that states what an expected speedup is over; only ksearch.worldmodel.models.EXPECTED_SPEEDUP may say it.
_DEFINES = re.compile(r"(expected[_ ]speedup|predicted speedup)[^.\n]{0,80}\bover\b", re.IGNORECASE)


def test_expected_speedup_has_one_definition(init_ctx, write_ctx, update_ctx) -> None:  # type: ignore[no-untyped-def]
    # every prompt that asks for or shows an expected speedup says what it is over, in the same words
    for phase, ctx in (("init", init_ctx), ("write_code", write_ctx), ("update", update_ctx)):
        system, user = render_prompt(phase, ctx)
        assert EXPECTED_SPEEDUP in system, phase
        if "expected_speedup" in user or "Predicted speedup" in user:
            assert EXPECTED_SPEEDUP in user, phase
    seedless = init_ctx.model_copy(update={"seed_source": ""})
    assert render_prompt("init", seedless)[1].count(EXPECTED_SPEEDUP) == 1
    # the schemas a model fills in and the CLI's help use it too
    for spec in (IntentSpec, EditSpec):
        described = spec.model_json_schema()["properties"]["expected_speedup"]["description"]
        assert EXPECTED_SPEEDUP.lower() in described.lower(), spec.__name__
    assert steer._EXPECTED is not None and EXPECTED_SPEEDUP.lower() in steer._EXPECTED.lower()
    # and nothing else defines it: not the prompt files, not the code or text of the tools, the faces or
    # the world model (the definition itself aside)
    roots = [ROOT / "tools", ROOT / "server", ROOT / "worldmodel"]
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for root in roots
        for path in sorted([*root.rglob("*.py"), *root.rglob("*.md")])
        for m in _DEFINES.finditer(path.read_text())
    ]
    assert found == [f"worldmodel/models.py: {_DEFINES.search(EXPECTED_SPEEDUP).group(0)}"], found  # type: ignore[union-attr]


def test_a_tree_cut_by_its_budget_says_how_to_see_the_rest() -> None:
    nodes = [Node(id=1, search_id=1, parent_id=None, kind="root", title="root")]
    nodes += [
        Node(id=i, search_id=1, parent_id=1, kind="intent", title=f"idea {i} " + "x" * 60, notes="n" * 200)
        for i in range(2, 60)
    ]
    text = render_tree(nodes, {}, budget_chars=2000)
    footer = text.splitlines()[-1]
    assert "nodes not shown" in footer and "get_tree with a larger budget_chars" in footer, footer
    assert "ksearch tree SEARCH --budget N" in footer
