"""`ksearch` command line: every tool is reachable here, so a person can do what an assistant can."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ksearch",
    help="LLM-driven GPU kernel search with a persistent world model of optimization intents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Each area owns one module and adds its commands to the app.
    from server.cli import loop, run, sandbox, steer, tasks, tree, ui

    run.register(app)
    tree.register(app)
    tasks.register(app)
    steer.register(app)
    loop.register(app)
    ui.register(app)
    sandbox.register(app)


def main() -> None:
    _register()
    app()


if __name__ == "__main__":
    main()
