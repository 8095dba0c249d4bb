"""`ksearch serve --http`: the MCP server over streamable HTTP, behind the bearer-token rule
(ksearch.server.access), and refused to other machines where candidates would run outside the jail.

The SDK's Host/Origin checks (DNS-rebinding protection, on for a loopback bind) stay as the SDK sets them; the
token check runs before them, on every request.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ksearch.server.access import HttpAccess, guarded, listening_socket
from ksearch.worldmodel.errors import KsearchError

if TYPE_CHECKING:
    from ksearch.server.mcp.server import KsearchServer

ALLOW_UNJAILED = "--allow-unjailed"


def is_jailed(isolation: str) -> bool:
    """Whether a sandbox's isolation report (HardwareFacts.isolation) describes the jail."""
    return isolation.startswith("namespaces")


async def candidate_isolation(ks: KsearchServer) -> str:
    """How this server's candidates would be isolated, from the sandbox it will use (no worker is started)."""
    sandbox = await (await ks.ws()).sandbox()
    known = getattr(sandbox, "isolation", None)  # the local sandbox decides it when it is made
    return known if isinstance(known, str) else (await sandbox.hardware()).isolation


def unjailed_exposure(host: str, isolation: str) -> str:
    """What an unjailed server exposes to clients from other machines. The sandbox's isolation report names the
    protections that are missing (gpu/jail/launch.py writes it, so it stays exact as the jail changes)."""
    return (
        f"clients that reach {host!r} from other machines would have their candidates run without the jail, "
        f"and anyone holding the token could run code as this user. What is missing, as the sandbox reports "
        f"it: {isolation}"
    )


async def check_jail(ks: KsearchServer, access: HttpAccess, *, allow_unjailed: bool) -> str | None:
    """Refuse (KsearchError) an exposed server whose candidates would run unjailed, unless allowed; the
    warning to print when it was allowed, else None."""
    if not access.exposed:
        return None
    isolation = await candidate_isolation(ks)
    if is_jailed(isolation):
        return None
    what = unjailed_exposure(access.host, isolation)
    if not allow_unjailed:
        raise KsearchError(
            f"ksearch serve: refusing to start: {what}. Make the jail work here (unprivileged user namespaces; "
            f"KSEARCH_ISOLATION not 'none'), bind 127.0.0.1, or pass {ALLOW_UNJAILED} to serve anyway"
        )
    return f"warning ({ALLOW_UNJAILED}): {what}"


async def serve_http(
    ks: KsearchServer, access: HttpAccess, port: int, *, allow_unjailed: bool = False
) -> None:
    """Serve until cancelled; every check that can refuse runs before the port is bound."""
    import uvicorn

    warning = await check_jail(ks, access, allow_unjailed=allow_unjailed)
    sock = listening_socket(
        access.host, port, "ksearch serve"
    )  # a port in use is refused before "listening on"
    app = guarded(ks.mcp.streamable_http_app(host=access.host), access)
    host = f"[{access.host}]" if ":" in access.host else access.host
    for line in (warning, "ksearch serve: " + access.notice(f"http://{host}:{port}/mcp")):
        if line:
            print(line, file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=access.host, port=port, log_level=ks.mcp.settings.log_level.lower())
    await uvicorn.Server(config).serve(sockets=[sock])
