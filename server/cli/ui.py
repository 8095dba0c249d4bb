"""`ksearch ui`: serve the live web page for a database (127.0.0.1 by default)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import DEFAULT_DB, DbOption, console, err_console, fail, run_async
from ksearch.worldmodel.errors import NotFound


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)


def ui(
    search: Annotated[
        str | None, typer.Argument(help="Search (id or name) to open; the list of searches when omitted")
    ] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port)")] = 8780,
    host: Annotated[
        str,
        typer.Option(
            help="Bind address. The page can steer the search and has no login: "
            "keep it on loopback unless the network is yours"
        ),
    ] = "127.0.0.1",
    db: DbOption = DEFAULT_DB,
) -> None:
    """A local web page: the tree live, each attempt's code, diff and numbers, the score over rounds, and
    steering controls (add intent, priority, pin, veto, prune) that go through the same tools as the CLI."""
    import uvicorn

    from ksearch.server.web.app import LOOPBACK, build_app

    search_id = run_async(check_target(db, search))
    if host not in LOOPBACK:
        err_console.print(
            f"[yellow]warning:[/yellow] serving on {host}: anyone who can reach it can steer "
            "this search (there is no login)"
        )
    app = build_app(db, default_search=search_id, host=host)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    where = f"/s/{search_id}" if search_id is not None else "/"
    # Flushed before serving, so a script that starts the UI can read the address from stdout.
    console.print(
        f"ksearch ui: http://{shown}:{bound}{where} (database {db}; Ctrl-C to stop)", soft_wrap=True
    )
    console.file.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise fail(
            f"cannot listen on {host}:{port}: {e.strerror}; pick another --port (0 for any free one)"
        ) from e
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def check_target(db: Path, search: str | None) -> int | None:
    """Refuse a database that does not exist (rather than create an empty one) or an unknown search."""
    from ksearch.server.cli.steer import workspace

    async with workspace(db) as ws:
        if search is None:
            return None
        try:
            return (await ws.search(search)).id
        except NotFound as e:
            raise fail(str(e)) from e
