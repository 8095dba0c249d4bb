"""`ksearch ui`: serve the live web page for a database (127.0.0.1 by default; elsewhere only with a token)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import (
    DEFAULT_DB,
    BankOption,
    DbOption,
    TokenOption,
    console,
    fail,
    refusals,
    run_async,
    tell,
    use_bank,
)
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
            help="Bind address. The page can steer the search: an address other than loopback needs --token"
        ),
    ] = "127.0.0.1",
    token: TokenOption = None,
    db: DbOption = DEFAULT_DB,
    bank: BankOption = None,
) -> None:
    """A local web page: the tree live, each attempt's code, diff and numbers, the score over rounds, and
    steering controls (add intent, priority, pin, veto, prune) that go through the same tools as the CLI."""
    use_bank(bank)
    import uvicorn

    from ksearch.server.access import http_access, listening_socket
    from ksearch.server.web.app import build_app

    with refusals():  # exit 2 with the refusal's message, before the database is opened or a port bound
        access = http_access(host, token, "ksearch ui")
    search_id = run_async(check_target(db, search))
    app = build_app(db, default_search=search_id, host=host, access=access)
    with refusals():
        sock = listening_socket(host, port, "ksearch ui", any_port=True)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    where = f"/s/{search_id}" if search_id is not None else "/"
    # Flushed before serving, so a script that starts the UI can read the address from stdout.
    console.print(
        f"ksearch ui: http://{shown}:{bound}{where} (database {db}; Ctrl-C to stop)", soft_wrap=True
    )
    if access.token is not None:
        tell(
            "ksearch ui: "
            + access.notice(f"http://{shown}:{bound}")
            + f"; in a browser, open http://{shown}:{bound}{where}?token=<the token> once (the page then keeps "
            "a cookie derived from it)"
        )
    console.file.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


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
