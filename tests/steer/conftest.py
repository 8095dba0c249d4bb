"""Fixtures for the steering CLI tests: the UI tests' sample search, and a runner for the commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

# The sample search and its helpers live with the UI tests; both suites use the same data.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

import uidata
from uihelp import arun

from ksearch.server.cli import budget as cli_budget
from ksearch.server.cli import exporting as cli_exporting
from ksearch.server.cli import kernels as cli_kernels
from ksearch.server.cli import loop as cli_loop
from ksearch.server.cli import steer as cli_steer
from ksearch.server.cli import ui as cli_ui


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    db = tmp_path / "steer.db"
    return db, arun(uidata.build(db))


@pytest.fixture(scope="session")
def cli() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    cli_steer.register(app)
    cli_exporting.register(app)
    cli_kernels.register(app)
    cli_ui.register(app)
    cli_budget.register(app)
    cli_loop.register(app)
    return app


Ks = Callable[..., Result]


@pytest.fixture
def ks(cli: typer.Typer) -> Ks:
    """ks(*args) → the click Result of `ksearch <args>` (stdout and stderr kept apart)."""
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(cli, [str(a) for a in args])

    return invoke
