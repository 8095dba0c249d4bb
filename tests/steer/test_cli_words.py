"""The command line advises its own commands: `ksearch status`, `select` and their refusals say the loop's next
step as the ksearch command that takes it (`ksearch select NAME`, `ksearch submit NAME FILE --node N`,
`ksearch final NAME`, `ksearch budget NAME ...`), never as an MCP tool's name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from uihelp import with_store

from ksearch.server.cli.words import TOOL_NAMES, cli_words
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import Budgets, IntentSpec, SearchConfig
from tests.tools.toolkit import TINY_TASK

Ks = Callable[..., Result]


def said(text: str) -> str:
    return " ".join(text.split())


def _no_tool_names(text: str) -> None:
    assert not [t for t in TOOL_NAMES if t in text], text


def test_status_select_and_refusals_speak_ksearch_commands(ks: Ks, tmp_path: Path) -> None:
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    db = tmp_path / "words.db"
    with_store(db, lambda s: s.create_search("w", str(task), SearchConfig(budgets=Budgets(rounds=1))))

    def status() -> str:
        r = ks("status", "w", "--db", db)
        assert r.exit_code == 0, r.stderr
        _no_tool_names(r.stdout)
        return said(r.stdout)

    assert 'Add the first intents with `ksearch intent add w "TITLE" --why "..."`' in status()
    with_store(db, lambda s: apply_intents(s, 1, [IntentSpec(title="wider blocks")], author="human", round=0))
    assert "run `ksearch select w` to claim the next intent" in status()
    r = ks("select", "w", "--db", db)
    assert r.exit_code == 0, r.stderr
    _no_tool_names(r.stdout)
    text = status()
    assert (
        "submit it with `ksearch submit w FILE --node 2`" in text and "run `ksearch finish w` early" in text
    )
    # what the loop is doing now, as the page's banner says it (ksearch.tools.now_doing)
    assert "now: refining intent #2 'wider blocks': 0 of at most 8 attempts made; no run in progress" in text
    r = ks("finish", "w", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # the reflect prompt a model would get only with --prompt
    _no_tool_names(r.stderr)
    assert "`ksearch finish w --prompt` prints the reflect prompt" in said(r.stderr)
    assert "run `ksearch final w`" in said(r.stderr)  # the update phase, with the one round spent
    r = ks("select", "w", "--db", db)  # refused: the round budget is spent
    assert r.exit_code == 2
    _no_tool_names(r.stderr)
    assert said(r.stderr) == (
        "error: The search's budget is spent (round budget reached (1 of 1 rounds started)): no new round starts. "
        "Run `ksearch final w` to re-measure the best candidates on every workload, held-out ones included, or "
        "raise it with `ksearch budget w --more-rounds N` to search further."
    )


def test_every_tool_name_the_loop_advises_has_its_command() -> None:
    texts = [
        "Refine of intent #3 is over: cap. Call finish_intent (search='s', node_id=3) to close it.",
        "The search was over (done) with intents open (#4) and budget left: call select_action (search='s') to "
        "search further; a new final_evaluation is due at its end.",
        "get_tree; to search further, raise its budgets with set_budgets (a spent one stops it) or reopen intents "
        "with edit_tree, then call select_action.",
        "node 4 is vetoed; only an open, unvetoed intent can be claimed (edit_tree op=reopen / unveto first)",
        "claimed intent #4: round 2 started; finish_intent (search='s', node_id=4) ends its refine phase",
        # a submit refused when the phase is over (it said "call finish_intent (node_id=9)" on the CLI)
        "the refine phase of intent #9 is over (the attempt cap was reached (2 of 2)); call finish_intent "
        "(search='s', node_id=9) and reflect",
        "Phase 3 (update) of round 2: applied since intent #4 ended: 1 edit(s), 0 new intent(s). Apply any more "
        "with edit_tree and propose_intents; then call select_action for the next round.",
    ]
    for t in texts:
        out = cli_words(t, "s")
        assert "ksearch " in out, out
    for t in texts[-2:]:  # a refusal and a next step said whole: no tool is left in them
        _no_tool_names(cli_words(t, "s"))
    assert (
        cli_words(texts[0])
        == "Refine of intent #3 is over: cap. Run `ksearch finish s --node 3` to close it."
    )


def test_finish_prints_the_reflect_prompt_only_when_asked(ks: Ks, tmp_path: Path) -> None:
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    db = tmp_path / "finish.db"
    with_store(db, lambda s: s.create_search("f", str(task), SearchConfig()))
    with_store(db, lambda s: apply_intents(s, 1, [IntentSpec(title="wider blocks")], author="human", round=0))
    assert ks("select", "f", "--db", db).exit_code == 0
    r = ks("finish", "f", "--prompt", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert "Round 1: reflect on intent" in r.stdout


@pytest.mark.slow  # the reflect prompt reads the sandbox's hardware facts: a worker starts
def test_finish_applies_an_update_file_with_the_finish_all_or_nothing(ks: Ks, tmp_path: Path) -> None:
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    db = tmp_path / "update.db"
    with_store(db, lambda s: s.create_search("u", str(task), SearchConfig()))
    specs = [IntentSpec(title="wider blocks"), IntentSpec(title="two rows per program")]
    a, b = with_store(db, lambda s: apply_intents(s, 1, specs, author="human", round=0))
    assert ks("select", "u", "--db", db).exit_code == 0
    update = tmp_path / "update.json"
    for text, why in [
        ("{not json", "is not JSON"),
        ('["edits"]', "holds a JSON list"),
        ('{"edit": []}', "has the unknown key(s) 'edit'"),
        ('{"edits": [{"op": "update", "node_id": 3, "priority": 7}]}', "edits.0.priority"),
    ]:
        update.write_text(text)
        r = ks("finish", "u", "--update", update, "--db", db)
        assert r.exit_code == 2 and why in said(r.stderr), (text, r.stderr)
    update.write_text(json.dumps({"edits": [{"op": "reopen", "node_id": b.id}]}))
    r = ks("finish", "u", "--update", update, "--db", db)
    assert r.exit_code == 2
    _no_tool_names(r.stderr)
    assert f"item 0 (node #{b.id}): node #{b.id} is open" in said(r.stderr)
    assert "run `ksearch finish SEARCH --update FILE` again" in said(r.stderr)
    assert with_store(db, lambda s: s.get_node(a.id)).status.value == "active"  # nothing was changed
    changes = {
        "edits": [{"op": "update", "node_id": b.id, "priority": 0.9}],
        "new_intents": [{"title": "keep the row in registers", "parent_id": a.id}],
        "reason": "round 1 taught it",
    }
    update.write_text(json.dumps(changes))
    r = ks("finish", "u", "--update", update, "--db", db)
    assert r.exit_code == 0, r.stderr
    _no_tool_names(r.stderr)
    new = with_store(db, lambda s: s.list_nodes(1))[-1]
    assert (new.title, new.parent_id, new.author) == ("keep the row in registers", a.id, "human")
    assert f"Already applied with `ksearch finish u --update`: 1 edit and the new intent #{new.id}" in said(
        r.stderr
    )
    assert "run `ksearch select u`" in said(r.stderr)
    assert with_store(db, lambda s: s.get_node(b.id)).priority == 0.9
