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
    from server import cli_run, cli_sandbox, cli_steer, cli_tasks, cli_tree, cli_ui

    cli_run.register(app)
    cli_tree.register(app)
    cli_tasks.register(app)
    cli_steer.register(app)
    cli_ui.register(app)
    cli_sandbox.register(app)


def main() -> None:
    _register()
    app()


if __name__ == "__main__":
    main()
