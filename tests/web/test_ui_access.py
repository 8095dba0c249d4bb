"""`ksearch ui` with a token: a real process on 127.0.0.1, real sockets. Every route (the page, the static files,
the JSON endpoints, the steering and submission POSTs) answers 401 without the token or with a wrong one, and works with it in
`Authorization: Bearer`; a browser trades the token once (`?token=`) for a cookie. The start-up rule (no token
off loopback) is tested with `ksearch serve` in tests/mcp/test_http_access.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from uihelp import UiProcess, with_store

TOKEN = "ui-" + "Jf83kQz0pLm2Rt7xWv9c"
WRONG = "ui-" + "Jf83kQz0pLm2Rt7xWv9d"


@pytest.fixture
def guarded_ui(demo: tuple[Path, dict[str, int]]) -> Iterator[UiProcess]:
    db, _ = demo
    proc = UiProcess(db, "softmax-demo", "--token", TOKEN)
    try:
        yield proc
    finally:
        proc.stop()


def _routes(ids: dict[str, int]) -> list[tuple[str, str, dict[str, object] | None]]:
    intent = {"parent_id": ids["root"], "title": "from a stranger", "rationale": "should never land"}
    return [
        ("GET", "/", None),
        ("GET", "/s/1", None),
        ("GET", "/static/app.js", None),
        ("GET", "/api/searches", None),
        ("GET", "/api/s/1/version", None),
        ("GET", "/api/s/1/view", None),
        ("GET", f"/api/s/1/nodes/{ids['root']}", None),
        ("POST", "/api/s/1/intents", intent),
        ("POST", "/api/s/1/edits", {"op": "pin", "node_id": ids["warps"]}),
        ("GET", "/searches", None),
        # a submission the tools refuse once through the door (it defines no ModelNew): nothing is evaluated
        ("POST", "/api/s/1/submissions", {"node_id": ids["root"], "source": "notes\n", "name": "notes.txt"}),
        ("GET", "/api/s/1/submissions/0123456789abcdef", None),
    ]


def test_every_route_needs_the_token(guarded_ui: UiProcess, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    nodes_before = with_store(db, lambda s: s.list_nodes(1))
    edits_before = with_store(db, lambda s: s.list_edits(1))
    with httpx.Client(base_url=guarded_ui.base, timeout=30) as http:
        bodies = set()
        for method, path, body in _routes(ids):
            for headers in ({}, {"Authorization": f"Bearer {WRONG}"}, {"Authorization": TOKEN}):
                r = http.request(method, path, json=body, headers=headers)
                assert r.status_code == 401, (method, path, headers, r.status_code)
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert "content-security-policy" in r.headers  # the page's headers still apply
                assert TOKEN not in r.text
                bodies.add(r.text)
        assert len(bodies) == 1 and "token is required" in bodies.pop()
    # nothing a stranger sent was written
    assert with_store(db, lambda s: s.list_nodes(1)) == nodes_before
    assert with_store(db, lambda s: s.list_edits(1)) == edits_before


def test_the_token_opens_every_route(guarded_ui: UiProcess, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    with httpx.Client(
        base_url=guarded_ui.base, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        for method, path, body in _routes(ids):
            r = http.request(method, path, json=body)
            if "/submissions" in path:  # let in: the tools' refusal, or no such submission
                assert r.status_code == (400 if method == "POST" else 404), (
                    path,
                    r.status_code,
                    r.text[:300],
                )
                assert "notes.txt is no candidate" in r.text or "no submission" in r.text, r.text
                continue
            assert r.status_code in (200, 307), (method, path, r.status_code, r.text[:300])
        # the page's other guards stay: a cross-origin write is refused even with the token
        evil = http.post(
            "/api/s/1/edits",
            json={"op": "veto", "node_id": ids["warps"]},
            headers={"Origin": "http://evil.example"},
        )
        assert evil.status_code == 403
        assert http.get("/api/searches", headers={"Host": "evil.example"}).status_code == 400
    titles = [n.title for n in with_store(db, lambda s: s.list_nodes(1))]
    assert "from a stranger" in titles  # the intent sent with the token landed


def test_it_says_a_token_is_required(guarded_ui: UiProcess) -> None:
    assert guarded_ui.proc.stdout is not None
    notice = guarded_ui.proc.stdout.readline()  # the line after the address
    assert "a bearer token is required" in notice and "Authorization: Bearer" in notice, notice
    assert "?token=" in notice and TOKEN not in notice


def test_a_browser_trades_the_token_for_a_cookie(guarded_ui: UiProcess) -> None:
    with httpx.Client(base_url=guarded_ui.base, timeout=30) as http:
        wrong = http.get(f"/s/1?token={WRONG}")
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        assert not http.cookies
        login = http.get(f"/s/1?token={TOKEN}&x=1")
        assert login.status_code == 303
        assert login.headers["location"] == "/s/1?x=1"  # the token leaves the address bar
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and TOKEN not in cookie
        page = http.get("/s/1")  # the client now holds the cookie, as a browser would
        assert page.status_code == 200 and 'data-search="1"' in page.text
        assert http.get("/api/s/1/version").status_code == 200
    forged = httpx.get(f"{guarded_ui.base}/api/searches", cookies={"ksearch_ui": TOKEN}, timeout=30)
    assert forged.status_code == 401  # the cookie is derived from the token, not the token itself
    away = httpx.get(f"{guarded_ui.base}//evil.example/?token={TOKEN}", timeout=30)
    assert away.status_code == 303 and away.headers["location"] == "/evil.example/"  # never to another site
