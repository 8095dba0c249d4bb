"""Options and helpers shared by every `ksearch` sub-command."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

T = TypeVar("T")

DEFAULT_DB = Path(".ksearch") / "ksearch.db"

DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar="KSEARCH_DB",
        help="SQLite database of the project (created if missing).",
        show_default=True,
    ),
]

console = Console()
err_console = Console(stderr=True)


def default_db() -> Path:
    return Path(os.environ.get("KSEARCH_DB", DEFAULT_DB))


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a user-facing error (what was wrong, what is accepted) and return the exit to raise."""
    # The message quotes user input (names, paths): print it as plain text, never as markup.
    err_console.print(Text.assemble(("error:", "red"), " ", message))
    return typer.Exit(code)
