"""`ksearch searches` and `ksearch tree`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ksearch.server.cli import tree as cli_tree
from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import Evaluation
from ksearch.worldmodel.store import Store


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli_tree.register(app)
    return app


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / ".ksearch" / "ksearch.db"

    async def fill() -> None:
        async with await Store.open(path) as store:
            s = await store.create_search("softmax-run", "softmax")
            await store.create_search("idle", "layernorm")
            root = await store.root(s.id)
            await apply_edits(
                store, s.id, [{"op": "update", "node_id": root.id, "rationale": "memory bound"}], "llm:m", 0
            )
            a, _ = await apply_intents(
                store,
                s.id,
                [{"title": "online softmax", "notes": "one pass"}, {"title": 'warp per "row"'}],
                "llm:m",
                1,
            )
            cand = await store.put_candidate("src", "triton")
            await store.record_attempt(s.id, a.id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.75))
            await store.close_node(a.id, "closed")  # its refine phase ended

    asyncio.run(fill())
    return path


runner = CliRunner()


def test_searches_table_and_json(app: typer.Typer, db: Path) -> None:
    result = runner.invoke(app, ["searches", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "softmax-run" in result.output and "idle" in result.output and "1.750x" in result.output
    result = runner.invoke(app, ["searches", "--db", str(db), "--json"])
    rows = json.loads(result.output)
    assert [(r["name"], r["intents"], r["open"], r["best_speedup"]) for r in rows] == [
        ("softmax-run", 2, 1, 1.75),
        ("idle", 0, 0, None),
    ]


def test_searches_on_a_missing_database_refuses_and_creates_nothing(app: typer.Typer, tmp_path: Path) -> None:
    # a mistyped --db must not answer from a new, empty database
    fresh = tmp_path / "fresh.db"
    for args in (["searches"], ["tree", "1"]):
        result = runner.invoke(app, [*args, "--db", str(fresh)])
        assert result.exit_code == 2 and f"no database at {fresh}" in result.output, result.output
        assert not fresh.exists()


def test_searches_on_an_empty_database(app: typer.Typer, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"

    async def create() -> None:
        await (await Store.open(fresh)).close()

    asyncio.run(create())
    result = runner.invoke(app, ["searches", "--db", str(fresh)])
    assert result.exit_code == 0 and "no searches" in result.output


def test_tree_text_by_name_and_id(app: typer.Typer, db: Path) -> None:
    by_name = runner.invoke(app, ["tree", "softmax-run", "--db", str(db)])
    assert by_name.exit_code == 0, by_name.output
    assert "analysis: memory bound" in by_name.output
    assert re.search(r"#3 \[closed\] p0\.50 d3 best 1\.750x tries 1 <-BEST online softmax", by_name.output)
    assert "notes: one pass" in by_name.output
    by_id = runner.invoke(app, ["tree", "1", "--db", str(db)])
    assert by_id.output == by_name.output


@pytest.mark.slow
def test_tree_budget_json_and_mermaid(app: typer.Typer, db: Path) -> None:
    small = runner.invoke(app, ["tree", "softmax-run", "--db", str(db), "--budget", "450"])
    assert small.exit_code == 0 and len(small.output.rstrip("\n")) <= 450
    as_json = runner.invoke(app, ["tree", "softmax-run", "--db", str(db), "--json"])
    data = json.loads(as_json.output)
    assert data["search"]["name"] == "softmax-run" and data["best_path"] == [1, 3] and len(data["nodes"]) == 3
    mermaid = runner.invoke(app, ["tree", "softmax-run", "--db", str(db), "--mermaid"])
    assert mermaid.output.startswith("flowchart TD") and "#quot;row#quot;" in mermaid.output


def test_env_var_selects_the_database(app: typer.Typer, db: Path) -> None:
    result = runner.invoke(app, ["tree", "idle"], env={"KSEARCH_DB": str(db)})
    assert result.exit_code == 0 and "#2 root" in result.output


def test_unknown_search_and_bad_options_exit_2(app: typer.Typer, db: Path) -> None:
    missing = runner.invoke(app, ["tree", "nope", "--db", str(db)])
    assert missing.exit_code == 2
    assert "no search named 'nope'" in missing.output and "softmax-run" in missing.output
    assert runner.invoke(app, ["tree", "42", "--db", str(db)]).exit_code == 2
    both = runner.invoke(app, ["tree", "idle", "--db", str(db), "--json", "--mermaid"])
    assert both.exit_code == 2 and "exclude each other" in both.output
    tiny = runner.invoke(app, ["tree", "idle", "--db", str(db), "--budget", "10"])
    assert tiny.exit_code == 2 and "at least" in tiny.output


def test_a_foreign_file_is_a_clear_error(app: typer.Typer, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "photos.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE photos (id INTEGER)")
    raw.commit()
    raw.close()
    result = runner.invoke(app, ["searches", "--db", str(path)])
    assert result.exit_code == 2 and "not a ksearch database" in result.output
