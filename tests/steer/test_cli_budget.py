"""`ksearch budget`: a search's budgets and what is spent, raised past a spent one; a person's own kernel is
measured on an open intent whatever the round budget; bad input is refused with what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from uihelp import REPO, with_store

from ksearch.server.cli.words import TOOL_NAMES
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import Budgets, IntentSpec, SearchConfig

Ks = Callable[..., Result]
SEED = (REPO / "gpu" / "tasks" / "builtin" / "row_sum" / "seed_triton.py").read_text()


def said(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def spent(tmp_path: Path) -> tuple[Path, int]:
    """A row_sum search of one round whose round was started: its budget is spent, one intent is open."""
    db = tmp_path / "budget.db"

    async def build(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("rs", "row_sum", SearchConfig(budgets=Budgets(rounds=1)))
        [a] = await apply_intents(
            store, s.id, [IntentSpec(title="smaller column blocks")], author="human", round=0
        )
        await store.bump_round(s.id)
        return a.id

    return db, with_store(db, build)


def test_the_budget_is_shown_raised_and_bad_input_refused(ks: Ks, spent: tuple[Path, int]) -> None:
    db, _ = spent
    r = ks("budget", "rs", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert "rounds: 1 / 1" in r.stdout and "spent: round budget reached (1 of 1 rounds started)" in said(
        r.stdout
    )
    for args, why in [
        (["--rounds", "3", "--more-rounds", "1"], "give rounds (in all) or more_rounds"),
        (["--lift", "speed"], "'rounds', 'attempts', 'wall_s', 'tokens', 'usd' or 'target_speedup'"),
        ([], None),  # no option: only shows
    ]:
        r = ks("budget", "rs", *args, "--db", db)
        if why is None:
            assert r.exit_code == 0
            continue
        assert r.exit_code == 2 and why in said(r.stderr), (args, r.stderr)
    r = ks("budget", "rs", "--more-rounds", "2", "--tokens", "50000", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert "rounds: 1 -> 3" in r.stdout and "tokens: no limit -> 50000" in r.stdout
    # the next step in the command line's words, as every command says it
    assert "`ksearch submit rs FILE --node N` measures it" in said(r.stdout), r.stdout  # the seed comes first
    assert not [n for n in TOOL_NAMES if n in r.stdout], r.stdout
    assert with_store(db, lambda s: s.get_search("rs")).config.budgets.rounds == 3
    r = ks("budget", "rs", "--db", db)
    assert "rounds: 1 / 3" in r.stdout and "none is spent" in r.stdout


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_person_submits_on_an_open_intent_past_a_spent_round_budget(
    ks: Ks, spent: tuple[Path, int], tmp_path: Path
) -> None:
    db, intent = spent
    mine = tmp_path / "mine.py"
    mine.write_text(SEED.replace("BLOCK_N = 1024", "BLOCK_N = 512"))
    r = ks("submit", "rs", mine, "--node", intent, "--db", db)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert f"claimed intent #{intent}" in r.stderr + r.stdout and "recorded as attempt #" in r.stdout
    atts = with_store(db, lambda s: s.list_attempts(1, intent))
    assert [(a.author, a.evaluation.status) for a in atts] == [("human", "ok")]
