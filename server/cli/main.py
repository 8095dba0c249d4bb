"""`ksearch` command line: every tool is reachable here, so a person can do what an assistant can."""

from __future__ import annotations

import importlib
import signal
import sys
from typing import Any

import typer
import typer.core

from ksearch.server.cli.interrupt import exit_at_once

app = typer.Typer(
    name="ksearch",
    help="LLM-driven GPU kernel search with a persistent world model of optimization intents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    # a group even when one command is added (a command's own run): typer would make a lone command the app itself
    pass


_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "Path": "PATH"}
_ORIGINAL_TYPE = typer.core.TyperOption.display_type_rich


def _value_label(param: typer.core.TyperOption | typer.core.TyperArgument, ctx: Any) -> str | None:
    """What `--help` shows after an option: nothing for a flag or an argument (its name says it), else
    plain words (TEXT, INTEGER, PATH, a|b) rather than typer's `<bool>`, `<str>`."""
    if isinstance(param, typer.core.TyperArgument) or getattr(param, "is_flag", False):
        return None
    label = _ORIGINAL_TYPE(param, ctx)  # "<str>", "<int range>", "<a|b>", or the option's own metavar
    if label is None or not (label.startswith("<") and label.endswith(">")):
        return label
    inner = label[1:-1].removesuffix(" range")  # a range is shown apart, as [x>=1]
    return _WORDS.get(inner, inner.upper() if inner.isidentifier() else inner)


def _plain_help() -> None:
    typer.core.TyperOption.display_type_rich = _value_label  # type: ignore[method-assign,assignment]
    typer.core.TyperArgument.display_type_rich = _value_label  # type: ignore[method-assign,assignment]


# command -> the module of ksearch.server.cli that adds it to the app. A command's run imports its own module only
# (a CLI command starts in about 0.25 CPU-s instead of 0.4: the modules of all fourteen areas are most of a start);
# `ksearch`, `--help` and an unknown name import them all. tests/cli/test_cli_lazy.py checks the table against
# what each module adds.
COMMANDS: dict[str, str] = {
    "run": "run",
    "serve": "run",
    "searches": "tree",
    "tree": "tree",
    "tasks": "tasks",
    "task": "tasks",
    "intent": "steer",
    "pin": "steer",
    "unpin": "steer",
    "veto": "steer",
    "unveto": "steer",
    "prune": "steer",
    "reopen": "steer",
    "submit": "steer",
    "export": "exporting",
    "best": "kernels",
    "attempt": "kernels",
    "budget": "budget",
    "status": "loop",
    "select": "loop",
    "finish": "loop",
    "final": "loop",
    "baselines": "loop",
    "ui": "ui",
    "eval": "sandbox",
    "compile": "compile",
    "bank": "bank",
    "suite": "suite",
    "model": "model",
}
# the order `ksearch --help` lists the areas in
AREAS = (
    "run",
    "tree",
    "tasks",
    "steer",
    "exporting",
    "kernels",
    "budget",
    "loop",
    "ui",
    "sandbox",
    "compile",
    "bank",
    "suite",
    "model",
)


def _register(argv: list[str] | None = None) -> None:
    """Add the commands to the app: only the area of the command `argv` names (argv[1]), else every area."""
    name = argv[1] if argv is not None and len(argv) > 1 else None
    for area in (COMMANDS[name],) if name in COMMANDS else AREAS:
        importlib.import_module(f"ksearch.server.cli.{area}").register(app)


def _quit(signum: int, _frame: object) -> None:
    exit_at_once(128 + signum)


def main() -> None:
    try:
        _plain_help()
        _register(sys.argv)
        app()
    except KeyboardInterrupt:  # Ctrl-C while starting up, before a command runs: nothing to save
        exit_at_once(130)
    finally:
        # From here to the end of the process (interpreter shutdown included) a Ctrl-C ends it at once,
        # without a traceback.
        signal.signal(signal.SIGINT, _quit)


if __name__ == "__main__":
    main()
