"""Pairing with a running driver: the guidance knows a run holds the search, and says so in the face's words (the
CLI's commands with the search's name; the tools' calls over MCP); a search no run holds never reads `running`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner
from uihelp import arun, with_store

from ksearch.server.cli import loop as cli_loop
from ksearch.server.cli import tree as cli_tree
from ksearch.server.cli.words import TOOL_NAMES, cli_words
from ksearch.tools.loop.state import loop_state
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.claims import claim_intent
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import Budgets, IntentSpec, SearchConfig
from tests.tools.toolkit import TINY_TASK

Ks = Callable[..., Result]

# Another process's driver run, as `ksearch run` holds it (tools.runs.hold_run), until its stdin closes.
_HOLDER = """
import asyncio, sys
from pathlib import Path
from ksearch.tools.loop.runs import hold_run, mark_running
from ksearch.tools.workspace import Workspace

async def main() -> None:
    ws = await Workspace.open(Path(sys.argv[1]))
    try:
        async with hold_run(ws, int(sys.argv[2])):
            await mark_running(ws, int(sys.argv[2]))
            print("held", flush=True)
            await asyncio.to_thread(sys.stdin.read)
    finally:
        await ws.close()

asyncio.run(main())
"""


@pytest.fixture
def ks() -> Ks:
    app = typer.Typer(pretty_exceptions_enable=False)
    cli_loop.register(app)
    cli_tree.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, int]:
    """A search 'pair' with one intent (#2) claimed by a person, as `ksearch select` or `ksearch submit` does."""
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    db = tmp_path / "pair.db"
    s = with_store(
        db, lambda st: st.create_search("pair", str(task), SearchConfig(budgets=Budgets(rounds=3)))
    )
    with_store(
        db, lambda st: apply_intents(st, s.id, [IntentSpec(title="wider blocks")], author="human", round=0)
    )
    return db, s.id


@pytest.fixture
def held(pair: tuple[Path, int]) -> Iterator[subprocess.Popen[str]]:
    db, search_id = pair
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db), str(search_id)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()  # the run ends as a run does: it releases the search
            proc.wait(timeout=30)


def said(text: str) -> str:
    return " ".join(text.split())


def _no_tool_names(text: str) -> None:
    assert not [t for t in TOOL_NAMES if t in text], text


def test_status_and_searches_say_waiting_when_no_run_holds_a_claimed_search(
    ks: Ks, pair: tuple[Path, int]
) -> None:
    db, _ = pair
    r = ks("select", "pair", "--db", db)  # a person's claim stores the search `running`
    assert r.exit_code == 0, r.stderr
    r = ks("status", "pair", "--db", db)
    assert r.exit_code == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("search 'pair': waiting, phase refine"), r.stdout
    assert "no run holds it: intent #2 is claimed" in said(r.stdout), r.stdout
    r = ks("searches", "--db", db)
    assert r.exit_code == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "pair" in line)
    assert "waiting" in row and "running" not in row, r.stdout


def test_guidance_knows_a_run_holds_the_search_in_each_faces_words(
    ks: Ks, pair: tuple[Path, int], held: subprocess.Popen[str]
) -> None:
    db, search_id = pair
    # a claim by hand while the run selects would take a round from under it: refused, saying why
    r = ks("select", "pair", "--db", db)
    assert r.exit_code == 2, r.stdout
    assert "A driver run holds this search" in said(r.stderr) and "takes the loop's next step itself" in said(
        r.stderr
    ), r.stderr
    _no_tool_names(r.stderr)
    # the run claims #2 (its select_action) and refines it
    got = with_store(db, lambda st: claim_intent(st, search_id, node_id=2))
    assert got.node is not None and got.node.id == 2, got
    r = ks("status", "pair", "--db", db)
    assert r.exit_code == 0, r.stderr
    text = said(r.stdout)
    _no_tool_names(text)
    assert text.startswith("search 'pair': running"), text
    assert "next: A driver run holds this search (pid " in text, text
    assert (
        "is refining intent #2 (0 of at most 8 attempts made)" in text
        and "Wait for it, or add your kernel to #2's refine phase as one more attempt while it lasts: "
        "`ksearch submit pair FILE --node 2`"
        in text
    ), text
    assert "ksearch finish" not in text and "ksearch select" not in text, text
    # a claim by hand is refused with the same words, not advice to end the run's intent
    r = ks("select", "pair", "--db", db)
    assert r.exit_code == 2 and "`ksearch submit pair FILE --node 2`" in said(r.stderr), r.stderr
    _no_tool_names(r.stderr)
    # over MCP the same step is the tool call
    nxt = arun(_next(db))
    assert "benchmark (search='pair', node_id=2, candidate=" in nxt and "finish_intent" not in nxt, nxt
    # the run ends: the person's guidance is the loop's own again
    assert held.stdin is not None
    held.stdin.close()
    held.wait(timeout=30)
    r = ks("status", "pair", "--db", db)
    text = said(r.stdout)
    assert "submit it with `ksearch submit pair FILE --node 2`" in text and "driver run" not in text, text


async def _next(db: Path) -> str:
    ws = await Workspace.open(db)
    try:
        return (await loop_state(ws, "pair")).next
    finally:
        await ws.close()


def test_final_and_finish_texts_name_the_search_and_the_commands() -> None:
    """The tools' texts of a final evaluation without a GPU and of the update phase, in the CLI's words."""
    final = (
        "The search is done. Without a GPU this checked correctness on the smoke workload only (3 workloads "
        "skipped); run final_evaluation (or `ksearch final`) on a GPU machine for speedups on every workload. "
        "Meanwhile, its attempts correct on the CPU interpreter (#11, #9) can be taken out with export_kernel "
        "(search='pair', format='kernelbench', attempt=11)."
    )
    out = cli_words(final)
    _no_tool_names(out)
    assert "run `ksearch final pair` on a GPU machine" in out, out
    assert "can be taken out with `ksearch export pair --kernelbench --attempt 11`" in out, out
    update = (
        "Phase 3 (update) of round 2: reflect on intent #13 (the reflect prompt finish_intent returned, or the "
        "prompt reflect_and_edit) and apply your edits with edit_tree and propose_intents; then call "
        "select_action for the next round. Refused: intent #13 is still being refined (round 2, 1 of at most 2 "
        "attempts): finish it first with finish_intent (search='pair', node_id=13)"
    )
    out = cli_words(update)
    _no_tool_names(out)
    assert "`ksearch finish pair --prompt` prints the reflect prompt" in out, out
    assert "finish it first with `ksearch finish pair --node 13`" in out, out
