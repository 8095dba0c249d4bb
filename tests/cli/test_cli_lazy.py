"""A command's run imports its own area of the CLI only (ksearch.server.cli.main.COMMANDS); `ksearch`, `--help` and
an unknown name add every area. The table is checked against what each area's module adds to an app."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import typer
import typer.main

cli_main = importlib.import_module(
    "ksearch.server.cli.main"
)  # the package exports its `main` function by that name

CLI = Path(cli_main.__file__).parent


def _added_by(area: str) -> set[str]:
    app = typer.Typer()
    app.callback()(lambda: None)
    importlib.import_module(f"ksearch.server.cli.{area}").register(app)
    group = typer.main.get_command(app)
    return set(group.commands)  # type: ignore[attr-defined]


def test_the_table_names_each_command_with_the_area_that_adds_it() -> None:
    found = {name: area for area in cli_main.AREAS for name in _added_by(area)}
    assert found == cli_main.COMMANDS
    # every module of the CLI that adds commands is an area
    registering = {p.stem for p in CLI.glob("*.py") if "\ndef register(app" in p.read_text()}
    assert registering == set(cli_main.AREAS)


def _areas_imported(argv: list[str]) -> list[str]:
    code = f"""
import importlib, json, sys
m = importlib.import_module("ksearch.server.cli.main")
m._register({argv!r})
print(json.dumps(sorted(a for a in m.AREAS if "ksearch.server.cli." + a in sys.modules)))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(out.stdout))


def test_a_command_imports_its_own_area_and_help_imports_all() -> None:
    for name in ("searches", "serve", "status", "eval", "bank", "model"):
        areas = _areas_imported(["ksearch", name, "--help"])
        assert cli_main.COMMANDS[name] in areas, (name, areas)
        assert len(areas) <= 3, (name, areas)  # its own, and what its module imports of the others
    everything = sorted(cli_main.AREAS)
    assert _areas_imported(["ksearch"]) == everything
    assert _areas_imported(["ksearch", "--help"]) == everything
    assert _areas_imported(["ksearch", "no-such-command"]) == everything


def test_a_lone_area_still_runs_its_command_by_name(tmp_path: Path) -> None:
    """With one area added the app stays a group: `ksearch tasks` runs `tasks`, not the app as that command."""
    out = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", "tasks"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "softmax" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", "tasks", "extra"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "unexpected extra argument" in bad.stderr.lower(), bad.stderr
