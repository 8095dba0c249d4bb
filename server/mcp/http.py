"""`ksearch serve --http`: the MCP server over streamable HTTP, behind the bearer-token rule
(ksearch.server.access), and refused to other machines where candidates would run outside the jail.

The SDK's Host/Origin checks (DNS-rebinding protection, on for a loopback bind) stay as the SDK sets them; the
token check runs before them, on every request.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ksearch.server.access import AccessRefused, HttpAccess, guarded

if TYPE_CHECKING:
    from ksearch.server.mcp.server import KsearchServer

ALLOW_UNJAILED = "--allow-unjailed"
# What the jail (docs/integrity.md) gives a candidate that an unjailed one lacks, and what that lack lets it do.
MISSING_WITHOUT_JAIL = (
    "a PID namespace of its own (without it a candidate sees every process of this user and can read their "
    "environments and command lines: API keys, and this server's token)",
    "a read-only filesystem outside its scratch directory and compiler caches (without it a candidate can write "
    "anywhere this user can: the repository, the database, shell start-up files, ~/.ssh)",
)


def is_jailed(isolation: str) -> bool:
    """Whether a sandbox's isolation report (HardwareFacts.isolation) describes the jail."""
    return isolation.startswith("namespaces")


async def candidate_isolation(ks: KsearchServer) -> str:
    """How this server's candidates would be isolated, from the sandbox it will use (no worker is started)."""
    sandbox = await (await ks.ws()).sandbox()
    known = getattr(sandbox, "isolation", None)  # the local sandbox decides it when it is made
    return known if isinstance(known, str) else (await sandbox.hardware()).isolation


def unjailed_exposure(host: str, isolation: str) -> str:
    """What is missing when candidates would run unjailed for clients on other machines."""
    missing = "; ".join(f"({i}) {m}" for i, m in enumerate(MISSING_WITHOUT_JAIL, 1))
    return (
        f"candidates would run without the jail for clients that reach {host!r} from other machines "
        f"(candidate isolation: {isolation}). Missing: {missing}. Anyone holding the token could run code as "
        "this user"
    )


async def check_jail(ks: KsearchServer, access: HttpAccess, *, allow_unjailed: bool) -> str | None:
    """Refuse (AccessRefused) an exposed server whose candidates would run unjailed, unless allowed; the
    warning to print when it was allowed, else None."""
    if not access.exposed:
        return None
    isolation = await candidate_isolation(ks)
    if is_jailed(isolation):
        return None
    what = unjailed_exposure(access.host, isolation)
    if not allow_unjailed:
        raise AccessRefused(
            f"ksearch serve: refusing to start: {what}. Make the jail work here (unprivileged user namespaces), "
            f"bind 127.0.0.1, or pass {ALLOW_UNJAILED} to serve anyway"
        )
    return f"warning ({ALLOW_UNJAILED}): {what}"


async def serve_http(
    ks: KsearchServer, access: HttpAccess, port: int, *, allow_unjailed: bool = False
) -> None:
    """Serve until cancelled; every check that can refuse runs before the port is bound."""
    import uvicorn

    warning = await check_jail(ks, access, allow_unjailed=allow_unjailed)
    app = guarded(ks.mcp.streamable_http_app(host=access.host), access)
    host = f"[{access.host}]" if ":" in access.host else access.host
    for line in (warning, "ksearch serve: " + access.notice(f"http://{host}:{port}/mcp")):
        if line:
            print(line, file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=access.host, port=port, log_level=ks.mcp.settings.log_level.lower())
    await uvicorn.Server(config).serve()
