"""The web app behind `ksearch ui`: a page per search, small JSON endpoints, steering through tools/.

Reads go through `ksearch.tools.read_search` (server/web/snapshot.py) and `ksearch.tools.now_doing`; writes go
through `ksearch.tools.propose_intents`, `edit_tree`, `set_budgets` and `submit_kernel` (server/web/submissions.py),
the same functions the CLI, the MCP server and the driver use, so a click is validated like any edit.

The page polls `/api/s/{search}/version` (a fingerprint of what it shows) and fetches the fragments
again only when it changed, so another process writing to the same database shows up within a poll.

Safety: everything rendered is escaped (ksearch.server.web.html) and a strict Content-Security-Policy allows
only this origin's own script and style. Writes need a JSON body (so a form on another site cannot
post one without a CORS preflight, which this app never grants), a same-origin `Origin` when one is
sent, and a Host header naming this server (against DNS rebinding). With a token (required off loopback),
every request needs it first (ksearch.server.access).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ksearch.server.access import HttpAccess, page_middleware
from ksearch.server.cli.words import cli_words
from ksearch.server.web import pages
from ksearch.server.web.attempt_html import attempt_detail
from ksearch.server.web.search_html import chart, default_attempt, first_selection, node_detail, summary, tree
from ksearch.server.web.snapshot import SearchView, base_of, find_search, fingerprint, load_view
from ksearch.server.web.submissions import MAX_BODY as MAX_SUBMIT_BODY
from ksearch.server.web.submissions import Submissions, SubmitIn
from ksearch.tools.budgets import SetBudgetsIn, set_budgets
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import describe_validation
from ksearch.tools.list_searches import list_searches
from ksearch.tools.now_doing import now_doing
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.read_search import read_attempt
from ksearch.tools.suites.suite import list_suites, suite_report
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError, NotFound, StoreBusy
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node

log = logging.getLogger("ksearch.ui")

STATIC_DIR = Path(__file__).parent / "static"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
MAX_BODY = 64 * 1024

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


class AddIntentIn(BaseModel):
    """What the page's "add intent" form sends."""

    model_config = ConfigDict(extra="forbid")

    parent_id: int = Field(ge=1)
    title: str
    rationale: str = ""
    priority: float = 0.5
    difficulty: int = 3
    expected_speedup: float | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field("", max_length=2000)


class EditsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    edits: list[EditSpec] = Field(min_length=1, max_length=100)


class HttpError(KsearchError):
    def __init__(self, status: int, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.problems = problems or []


class SecurityHeaders:
    """Adds CSP and friends to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class UiState:
    """The app's workspace and a one-entry-per-search cache of the last full view."""

    def __init__(self, db: Path, default_search: int | None) -> None:
        self.db = db
        self.default_search = default_search
        self._ws: Workspace | None = None
        self._views: dict[int, SearchView] = {}
        self.submissions = Submissions()

    @property
    def ws(self) -> Workspace:
        if self._ws is None:
            raise RuntimeError("the UI's workspace is not open (the app's lifespan did not run)")
        return self._ws

    async def open(self) -> None:
        self._ws = await Workspace.open(self.db)

    async def close(self) -> None:
        await self.submissions.close()  # evaluations still running end before their workspace does
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def view(self, ref: int | str) -> SearchView:
        s = await find_search(self.ws, ref)
        cached = self._views.get(s.id)
        if cached is not None and cached.version == await fingerprint(self.ws, s.id):
            return cached
        v = await load_view(self.ws, s.id)
        self._views[s.id] = v
        return v


def _ref(raw: str) -> int | str:
    return int(raw) if raw.isdigit() else raw


def _int(raw: str, what: str) -> int:
    if not raw.isdigit():
        raise HttpError(404, f"{what} must be a number, got {raw!r}")
    return int(raw)


def _error(status: int, message: str, problems: Sequence[object] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "problems": [str(p) for p in problems or []]}, status_code=status)


Handler = Callable[[Request], Awaitable[Response]]


def _guard(fn: Handler) -> Handler:
    """Turn the tools' and the store's refusals into JSON errors a page can show."""

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except HttpError as e:
            return _error(e.status, str(e), e.problems)
        except KsearchError as e:  # the one place a ksearch refusal becomes an HTTP answer
            first, *_ = str(e).split("\n", 1)  # the problems, when any, go in their own list
            status = 404 if isinstance(e, NotFound) or first.startswith("no search") else 400
            if isinstance(e, StoreBusy):  # not the request's fault: it can simply be sent again
                status = 503
            return _error(status, first, getattr(e, "problems", None))
        except ValidationError as e:
            tf = describe_validation(e, "request")
            return _error(400, "invalid request", tf.problems)
        except Exception as e:
            # A bug or a database problem: the traceback goes to the server's log, the page gets a line.
            log.exception("%s %s failed", request.method, request.url.path)
            return _error(500, f"the ksearch ui server failed: {type(e).__name__}: {e}")

    return wrapped


async def _json_body(request: Request, limit: int = MAX_BODY) -> Any:
    """The request's JSON body (at most `limit` bytes), refusing what a cross-site form or script could send."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise HttpError(415, "send the body as application/json")
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise HttpError(403, f"cross-origin write refused (origin {origin!r})")
    body = await request.body()
    if len(body) > limit:
        raise HttpError(413, f"request body over {limit} bytes")
    try:
        return json.loads(body or b"null")
    except ValueError as e:
        raise HttpError(400, f"the body is not valid JSON: {e}") from e


def _node_json(n: Node) -> dict[str, Any]:
    return n.model_dump(mode="json")


def build_app(
    db: Path, default_search: int | None = None, host: str = "127.0.0.1", access: HttpAccess | None = None
) -> Starlette:
    """The app for one database; `host` is the bind address (it decides which Host headers are accepted);
    `access` the token rule (ksearch.server.access), for every route, the JSON endpoints and writes included."""
    state = UiState(db, default_search)

    async def index(request: Request) -> Response:
        if state.default_search is not None:
            return RedirectResponse(f"/s/{state.default_search}", status_code=307)
        return await searches(request)

    async def searches(request: Request) -> Response:
        """The list of searches, reachable whatever search the UI was started on (the banner links here)."""
        rows = await list_searches(state.ws)  # a search whose run died reads as interrupted
        suites = [
            (x.name, f"{len(x.tasks)} tasks, {sum(t.status == 'done' for t in x.tasks)} done")
            for x in await list_suites(state.ws)
        ]
        return HTMLResponse(
            pages.searches_page(
                [
                    (r.id, r.name, r.task, r.status, r.round, r.attempts, r.best_speedup_vs_eager)
                    for r in rows
                ],
                suites,
            )
        )

    async def suite(request: Request) -> Response:
        """A suite's table, each task's search linked to its page."""
        try:
            report = await suite_report(state.ws, request.path_params["ref"])
        except NotFound as e:
            return HTMLResponse(pages.not_found_page(str(e)), 404)
        ids = {r.name: r.id for r in await list_searches(state.ws)}
        return HTMLResponse(pages.suite_page(report, ids))

    async def page(request: Request) -> Response:
        try:
            s = await find_search(state.ws, _ref(request.path_params["ref"]))
        except NotFound as e:
            return HTMLResponse(pages.not_found_page(str(e)), 404)
        v = await state.view(s.id)
        doing = (await now_doing(state.ws, s.id)).text
        return HTMLResponse(pages.live_page(v, await _first_view(v), doing))

    async def _first_view(v: SearchView) -> pages.FirstView:
        """The node and attempt the page opens on, rendered as the JSON endpoints render them."""
        node, aid = first_selection(v)
        shown = None
        if aid is not None:
            rec = await read_attempt(state.ws, aid)
            shown = attempt_detail(rec.attempt, rec.candidate, base_of(rec.base))
        html = node_detail(v, node, await state.ws.records.list_edits(v.search.id), selected=aid)
        return pages.FirstView(node.id, html, aid, shown)

    async def api_searches(request: Request) -> Response:
        rows = await list_searches(state.ws)  # a search whose run died reads as interrupted
        return JSONResponse([r.model_dump(mode="json") for r in rows])

    async def api_version(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        return JSONResponse({"search_id": s.id, "version": await fingerprint(state.ws, s.id)})

    async def api_view(request: Request) -> Response:
        v = await state.view(_ref(request.path_params["ref"]))
        best = v.best_attempt
        return JSONResponse(
            {
                "version": v.version,
                "search": {
                    "id": v.search.id,
                    "name": v.search.name,
                    "status": v.status,
                    "round": v.search.round,
                    "best_attempt_id": v.search.best_attempt_id,
                    "best_speedup": best.speedup if best else None,
                    "attempts": len(v.attempts),
                    "root_id": v.root.id,
                },
                "doing": (await now_doing(state.ws, v.search.id)).text,
                "summary_html": summary(v),
                "chart_html": chart(v),
                "tree_html": tree(v),
            }
        )

    async def api_node(request: Request) -> Response:
        v = await state.view(_ref(request.path_params["ref"]))
        nid = _int(request.path_params["node"], "node id")
        n = v.by_id.get(nid)
        if n is None:
            raise HttpError(404, f"no node #{nid} in search {v.search.name!r}")
        edits = await state.ws.records.list_edits(v.search.id)
        return JSONResponse(
            {
                "version": v.version,
                "node": _node_json(n),
                "html": node_detail(v, n, edits),
                "default_attempt": default_attempt(v, n),
            }
        )

    async def api_attempt(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        aid = _int(request.path_params["attempt"], "attempt id")
        rec = await read_attempt(state.ws, aid)
        a = rec.attempt
        if a.search_id != s.id:
            raise HttpError(404, f"attempt #{aid} belongs to another search, not {s.name!r}")
        html = attempt_detail(a, rec.candidate, base_of(rec.base))
        return JSONResponse({"attempt_id": a.id, "node_id": a.node_id, "html": html})

    async def api_add_intent(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        body = AddIntentIn.model_validate(await _json_body(request))
        spec = IntentSpec.model_validate(body.model_dump(exclude={"reason"}))
        nodes = await propose_intents(
            state.ws, ProposeIntentsIn(search=s.id, intents=[spec], author="human", reason=body.reason)
        )
        return JSONResponse(
            {
                "ok": True,
                "nodes": [_node_json(n) for n in nodes],
                "version": await fingerprint(state.ws, s.id),
            }
        )

    async def api_budgets(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        raw = await _json_body(request)
        fields = raw if isinstance(raw, dict) else {}
        out = await set_budgets(state.ws, SetBudgetsIn(**{**fields, "search": s.id, "author": "human"}))
        return JSONResponse(
            {
                "ok": True,
                "before": out.before.model_dump(),
                "after": out.after.model_dump(),
                "exhausted": out.exhausted,
                "next": cli_words(out.next, s.name),
                "version": await fingerprint(state.ws, s.id),
            }
        )

    async def api_edits(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        raw = await _json_body(request)
        body = EditsIn.model_validate(raw if isinstance(raw, dict) and "edits" in raw else {"edits": [raw]})
        nodes = await edit_tree(state.ws, EditTreeIn(search=s.id, edits=body.edits, author="human"))
        return JSONResponse(
            {
                "ok": True,
                "nodes": [_node_json(n) for n in nodes],
                "version": await fingerprint(state.ws, s.id),
            }
        )

    async def api_submit(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        body = SubmitIn.model_validate(await _json_body(request, MAX_SUBMIT_BODY))
        job = await state.submissions.start(state.ws, s.id, s.name, body)  # a refusal: nothing recorded
        return JSONResponse(job.model_dump(mode="json"), status_code=202)

    async def api_submission(request: Request) -> Response:
        s = await find_search(state.ws, _ref(request.path_params["ref"]))
        job = state.submissions.get(s.id, request.path_params["job"])
        if job is None:
            raise HttpError(
                404,
                f"no submission {request.path_params['job']!r} to search {s.name!r} on this server (it may have "
                "restarted since)",
            )
        return JSONResponse(job.model_dump(mode="json"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.open()
        try:
            yield
        finally:
            await state.close()

    g = _guard
    routes = [
        Route("/", g(index)),
        Route("/searches", g(searches)),
        Route("/suites/{ref}", g(suite)),
        Route("/s/{ref}", g(page)),
        Route("/api/searches", g(api_searches)),
        Route("/api/s/{ref}/version", g(api_version)),
        Route("/api/s/{ref}/view", g(api_view)),
        Route("/api/s/{ref}/nodes/{node}", g(api_node)),
        Route("/api/s/{ref}/attempts/{attempt}", g(api_attempt)),
        Route("/api/s/{ref}/intents", g(api_add_intent), methods=["POST"]),
        Route("/api/s/{ref}/edits", g(api_edits), methods=["POST"]),
        Route("/api/s/{ref}/budgets", g(api_budgets), methods=["POST"]),
        Route("/api/s/{ref}/submissions", g(api_submit), methods=["POST"]),
        Route("/api/s/{ref}/submissions/{job}", g(api_submission)),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),  # outermost: a 401 gets the same headers as a page
        *page_middleware(access),
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host)),
    ]
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)


def allowed_hosts(host: str) -> list[str]:
    """Host names the app answers to: loopback names, plus the bind address when it is not a wildcard."""
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return sorted({*LOOPBACK, host})
