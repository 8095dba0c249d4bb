"""`ksearch` command line: every tool is reachable here, so a person can do what an assistant can."""

from __future__ import annotations

import signal
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


def _register() -> None:
    # Each area owns one module and adds its commands to the app.
    from ksearch.server.cli import (
        bank,
        budget,
        exporting,
        kernels,
        loop,
        model,
        run,
        sandbox,
        steer,
        suite,
        tasks,
        tree,
        ui,
    )
    from ksearch.server.cli import compile as compile_cli

    run.register(app)
    tree.register(app)
    tasks.register(app)
    steer.register(app)
    exporting.register(app)
    kernels.register(app)
    budget.register(app)
    loop.register(app)
    ui.register(app)
    sandbox.register(app)
    compile_cli.register(app)
    bank.register(app)
    suite.register(app)
    model.register(app)


def _quit(signum: int, _frame: object) -> None:
    exit_at_once(128 + signum)


def main() -> None:
    try:
        _plain_help()
        _register()
        app()
    except KeyboardInterrupt:  # Ctrl-C while starting up, before a command runs: nothing to save
        exit_at_once(130)
    finally:
        # From here to the end of the process (interpreter shutdown included) a Ctrl-C ends it at once,
        # without a traceback.
        signal.signal(signal.SIGINT, _quit)


if __name__ == "__main__":
    main()
