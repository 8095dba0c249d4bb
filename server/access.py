"""Who may talk to ksearch's HTTP faces (`ksearch serve --http`, `ksearch ui`): the one bearer-token rule.

A bind address other than loopback can be reached from other machines, so it needs a token (`--token` or
KSEARCH_TOKEN); a loopback bind may take one too. With a token, every HTTP request must carry
`Authorization: Bearer <token>`, compared in constant time; anything else gets the same 401, whether the
token was missing or wrong. The page (`ksearch ui`) also lets a browser, which cannot add that header to a
navigation, trade the token once for a cookie derived from it (`/?token=...`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import urllib.parse
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from ksearch.worldmodel.errors import KsearchError

if TYPE_CHECKING:  # the CLI imports this module for its help text: no web stack at start-up
    from starlette.middleware import Middleware
    from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_ENV = "KSEARCH_TOKEN"
TOKEN_OPTION = "--token"
MIN_TOKEN_CHARS = 16
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
COOKIE = "ksearch_ui"
TOKEN_HELP = (
    f"Bearer token every HTTP request must carry (Authorization: Bearer TOKEN); required for a "
    f"non-loopback --host. Prefer the {TOKEN_ENV} environment variable: a command line is visible to "
    "other users of the machine"
)
# One answer for a missing and a wrong token: it says what is needed and nothing about the server.
NEEDS_TOKEN = "a bearer token is required: send the header Authorization: Bearer <token>"
BROWSER_HINT = "; in a browser, open this address once with ?token=<token>"


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine. A host name other than localhost may
    resolve anywhere, and '' or a wildcard binds every interface, so neither counts."""
    name = host.strip().removeprefix("[").removesuffix("]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HttpAccess(BaseModel):
    """Where an HTTP face listens and the token it demands (None: no token, which only loopback allows)."""

    model_config = ConfigDict(frozen=True)

    host: str
    token: SecretStr | None = Field(default=None, repr=False)

    @field_validator("token")
    @classmethod
    def _usable(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return None
        t = v.get_secret_value()
        # it travels in an HTTP header: printable ASCII without spaces, long enough not to be guessed
        if not t.isascii() or not t.isprintable() or any(c.isspace() for c in t):
            raise ValueError("the token must be printable ASCII without spaces")
        if len(t) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"the token must have at least {MIN_TOKEN_CHARS} characters; make one with {MAKE_TOKEN}"
            )
        return v

    @property
    def exposed(self) -> bool:
        return not is_loopback(self.host)

    def notice(self, url: str) -> str:
        """What a face says at start about who may connect."""
        if self.token is None:
            return f"listening on {url} (loopback only; no token)"
        where = "reachable from other machines" if self.exposed else "loopback"
        return (
            f"listening on {url} ({where}); a bearer token is required: every request must carry "
            f"Authorization: Bearer <the token from {TOKEN_OPTION} or {TOKEN_ENV}>"
        )


def http_access(host: str, token: str | None, command: str) -> HttpAccess:
    """The access rule for a face about to bind `host`; a refusal (KsearchError: the CLI exits 2 with its
    message) comes before anything is bound."""
    try:
        access = HttpAccess(host=host, token=SecretStr(token) if token else None)
    except ValidationError as e:
        reason = "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in e.errors())
        raise KsearchError(f"{command}: unusable token ({TOKEN_OPTION} / {TOKEN_ENV}): {reason}") from None
    if access.exposed and access.token is None:
        raise KsearchError(
            f"{command}: refusing to listen on {host!r} without a token: an address other than loopback can "
            f"be reached from other machines. Give a bearer token with {TOKEN_OPTION} TOKEN or the {TOKEN_ENV} "
            f"environment variable (make one with {MAKE_TOKEN}), or bind 127.0.0.1"
        )
    return access


def listening_socket(host: str, port: int, command: str, *, any_port: bool = False) -> socket.socket:
    """A socket bound to `host`:`port` and listening, for a face to hand to uvicorn; bound before the face says
    where it listens, so a port another process holds is a refusal (KsearchError: the CLI exits 2 with its
    message) instead of a "listening on" followed by uvicorn's traceback. `any_port`: the face takes --port 0."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise KsearchError(
            f"{command}: cannot listen on {host}:{port}: {e.strerror}; pick another --port"
            + (" (0 for any free one)" if any_port else "")
        ) from e
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _digest(value: bytes) -> bytes:
    # equal-length digests: compare_digest then takes the same time whatever the length of the guess
    return hashlib.sha256(value).digest()


def token_matches(given: str | bytes, token: str) -> bool:
    """Constant-time comparison of a presented token with the server's."""
    raw = given.encode("latin-1", "replace") if isinstance(given, str) else given
    return hmac.compare_digest(_digest(raw), _digest(token.encode()))


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def _cookies(raw: bytes | None) -> Iterable[tuple[str, str]]:
    for part in (raw or b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        yield name, value


# A refused request's body is never read, so the connection cannot carry another request: say so, or a client
# that pools connections (Node's fetch) sends its next request on a socket the server is closing.
_UNREAD = [(b"content-length", b"0"), (b"connection", b"close")]


class BearerToken:
    """ASGI middleware: an HTTP or WebSocket request passes only with the right bearer token.

    `browser_login` (the page): a GET whose query carries `token=` with the right token is answered by a
    redirect to the same address without it, setting a cookie derived from the token (HttpOnly, SameSite=Lax;
    the page's writes also need a JSON body and a same-origin Origin); that cookie is then accepted in place
    of the header."""

    def __init__(self, app: ASGIApp, token: str, *, browser_login: bool = False) -> None:
        self.app = app
        self._token = token
        self._browser_login = browser_login
        # a cookie that stands for the token without being it
        self._cookie = hmac.new(token.encode(), b"ksearch ui cookie", hashlib.sha256).hexdigest()
        self._refusal = json.dumps({"error": NEEDS_TOKEN + (BROWSER_HINT if browser_login else "")}).encode()

    def _authorized(self, scope: Scope) -> bool:
        auth = _header(scope, b"authorization")
        if auth is not None:
            scheme, _, given = auth.strip().partition(b" ")
            return scheme.lower() == b"bearer" and token_matches(given.strip(), self._token)
        if self._browser_login:
            for name, value in _cookies(_header(scope, b"cookie")):
                if name == COOKIE and token_matches(value, self._cookie):
                    return True
        return False

    def _login(self, scope: Scope) -> bytes | None:
        """The address to send a browser on to when its query holds the right token, else None."""
        if not self._browser_login or scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
            return None
        query = urllib.parse.parse_qsl(
            scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        given = [v for k, v in query if k == "token"]
        if len(given) != 1 or not token_matches(given[0], self._token):
            return None
        rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "token"])
        # one leading slash: "//host" would send the browser to another site
        path = "/" + urllib.parse.quote(scope.get("path", "/")).lstrip("/")
        return (path + (f"?{rest}" if rest else "")).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)  # the lifespan, or an authorized request
            return
        location = self._login(scope)
        if location is not None:
            cookie = f"{COOKIE}={self._cookie}; Path=/; HttpOnly; SameSite=Lax"
            headers = [(b"location", location), (b"set-cookie", cookie.encode()), *_UNREAD]
            await send({"type": "http.response.start", "status": 303, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", b'Bearer realm="ksearch"'),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(self._refusal)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self._refusal})


def guarded(app: ASGIApp, access: HttpAccess) -> ASGIApp:
    """`app` behind the token check when `access` has a token; as it is otherwise (loopback only)."""
    if access.token is None:
        return app
    return BearerToken(app, access.token.get_secret_value())


def page_middleware(access: HttpAccess | None) -> list[Middleware]:
    """The same check as a Starlette middleware for the page, with its browser login."""
    from starlette.middleware import Middleware

    if access is None or access.token is None:
        return []
    return [Middleware(BearerToken, token=access.token.get_secret_value(), browser_login=True)]
