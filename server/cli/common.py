"""Options and helpers shared by every `ksearch` sub-command."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ksearch.server.access import TOKEN_HELP
from ksearch.worldmodel.models import NODE_REF_PATTERN

T = TypeVar("T")

DEFAULT_DB = Path(".ksearch") / "ksearch.db"

DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar="KSEARCH_DB",
        help="SQLite database of the project (must exist: `ksearch run` creates one).",
        show_default=True,
    ),
]
# Only the commands that start searches create a database: anything else with a mistyped path would
# silently answer from a new, empty one.
NewDbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar="KSEARCH_DB",
        help="SQLite database of the project (created if missing).",
        show_default=True,
    ),
]

BANK_HELP = (
    "A shared kernel bank: a ksearch database file (created if missing) whose entries every search reads and "
    "writes. Default: the entries of the --db database's own searches."
)
BankOption = Annotated[
    Path | None,
    typer.Option("--bank", envvar="KSEARCH_BANK", show_envvar=True, help=BANK_HELP, show_default=False),
]

# A Ray cluster whose GPUs run the candidates (`pip install 'ksearch[ray]'`): one sandbox actor per GPU.
RAY_HELP = (
    "Run candidates on a Ray cluster: `auto` (the one `ray start --head` runs on this machine) or a head's "
    "HOST:PORT; one jailed sandbox actor per GPU of the cluster, the database stays here (needs ksearch[ray])"
)
RayOption = Annotated[str | None, typer.Option("--ray", help=RAY_HELP, show_default=False)]

# The bearer token of the HTTP faces (`serve --http`, `ui`); the rule is in ksearch.server.access.
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="KSEARCH_TOKEN", show_envvar=True, help=TOKEN_HELP, show_default=False),
]


def _console(*, stderr: bool = False) -> Console:
    c = Console(stderr=stderr)
    if not c.is_terminal:
        # A pipe or a file: no wrapping at 80 columns, a line stays whole (greppable, copyable).
        c.soft_wrap = True
    return c


console = _console()
err_console = _console(stderr=True)


def say(text: str) -> None:
    """A result line on stdout, verbatim (no markup, no wrapping: it may be parsed)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def tell(text: str) -> None:
    """A progress or side note on stderr, verbatim."""
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_table(table: Table) -> None:
    """A table whose cells are never cut: long cells fold inside a terminal; in a pipe or a file the table
    takes the width it needs."""
    for col in table.columns:
        col.overflow = "fold"
    if console.is_terminal:
        console.print(table)
        return
    wide = console.measure(table, options=console.options.update_width(1 << 20)).maximum
    Console(file=console.file, width=max(console.width, wide), highlight=False).print(table)


def use_bank(bank: Path | None) -> None:
    """Every workspace this process opens uses `bank` (the faces read KSEARCH_BANK)."""
    if bank is not None:
        os.environ["KSEARCH_BANK"] = str(bank)


def default_db() -> Path:
    return Path(os.environ.get("KSEARCH_DB", DEFAULT_DB))


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; Ctrl-C abandons what is in flight (each record is one transaction, so
    nothing is half-written), closes the database and exits 130; a second Ctrl-C exits at once."""
    from ksearch.server.cli.interrupt import Interrupted, run_stoppable

    with refusals():
        try:
            return run_stoppable(coro, stopping="stopping: abandoning what is in flight", hint=lambda: "")
        except Interrupted as e:
            tell(f"stopped: interrupted ({e}) before the command finished")
            raise typer.Exit(e.code) from None


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """The CLI's one conversion of ksearch's errors (worldmodel/errors.py) into a message and an exit code:
    1 for a busy database (the same command can simply be repeated), 2 for a refusal of the input."""
    from pydantic import ValidationError

    from ksearch.server.cli.words import cli_words
    from ksearch.tools.errors import describe_validation
    from ksearch.worldmodel.errors import KsearchError, StoreBusy

    try:
        yield
    except StoreBusy as e:
        raise fail(str(e), code=1) from e
    except KsearchError as e:
        raise fail(cli_words(str(e))) from e  # a tool's advice, said as the command that does it
    except ValidationError as e:
        raise fail(str(describe_validation(e, "arguments"))) from e


def check_new_db(db: Path) -> None:
    """Refuse a database path the project could not mean (a placeholder such as /path/to/project/ksearch.db left
    in), before a server starts and answers nothing: the store creates the file and the one folder that holds it
    (as the default .ksearch/), never a whole missing tree."""
    folder = db.absolute().parent
    if folder.is_dir() or (not folder.exists() and folder.parent.is_dir()):
        return
    if folder.exists():
        raise fail(f"--db {db}: {folder} is not a folder; give a database path inside a folder")
    raise fail(
        f"--db {db}: the folder {folder} does not exist, nor {folder.parent} (a placeholder left in?); give a "
        "database path in an existing folder (ksearch creates the file, and the one folder holding it, as .ksearch/)"
    )


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a user-facing error (what was wrong, what is accepted) and return the exit to raise."""
    # The message quotes user input (names, paths): print it as plain text, never as markup.
    err_console.print(Text.assemble(("error:", "red"), " ", message))
    return typer.Exit(code)


def node_ref(value: str) -> str:
    """A node named on the command line: its id (12 or #12) or the handle it was proposed with."""
    if not re.fullmatch(NODE_REF_PATTERN, value.strip()) or value.strip() in {"0", "#0"}:
        raise typer.BadParameter(
            f"{value!r} names no node; accepted: a node id (12 or #12, as `ksearch tree` shows it) or an intent's "
            "handle (a letter, then up to 39 letters, digits, '_', '.' or '-')"
        )
    return value.strip()


NODE_HELP = "Node id (12 or #12, see `ksearch tree SEARCH`) or the handle it was proposed with"
