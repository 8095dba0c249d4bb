"""Who reaches `ksearch serve --http` (and, for the start-up rule, `ksearch ui`): real processes, real sockets.

Off loopback a bearer token is required, and the refusal comes before anything is bound (the tests ask for
0.0.0.0 and check that the port never opened). With a token every request needs `Authorization: Bearer`; the
accepted case binds 127.0.0.1. An exposed server whose candidates would run unjailed is refused unless
--allow-unjailed. The page's own requests (JSON endpoints, steering) are in tests/web/test_ui_access.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ksearch.server import access
from ksearch.server.access import BearerToken, HttpAccess, http_access, is_loopback, token_matches
from ksearch.server.mcp.http import candidate_isolation, check_jail, is_jailed
from ksearch.server.mcp.server import build_server
from ksearch.worldmodel.errors import KsearchError

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-" + "x7Qp2mZr9LkW4vNs8Bd3"  # what a user would pass; long enough for the rule
WRONG = "tok-" + "x7Qp2mZr9LkW4vNs8Bd4"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KSEARCH_TOKEN", "KSEARCH_ISOLATION")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env | extra


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _ksearch(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def serving(db: Path, *args: str, env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """`ksearch serve --http` on 127.0.0.1; yields its URL and (once stopped) its stderr lines."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ksearch.server.cli",
            "serve",
            "--http",
            "--port",
            str(port),
            "--db",
            str(db),
            *args,
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while not _listening(port):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "server died"
            assert time.monotonic() < deadline, "ksearch serve --http did not listen"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", lines
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
        lines += err.splitlines()


# ---------------------------------------------------------------------------------------------- start-up rule


@pytest.mark.parametrize("command", ["serve", "ui"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "example.com"])
@pytest.mark.slow
def test_non_loopback_without_token_is_refused_before_binding(
    command: str, host: str, tmp_path: Path
) -> None:
    port = _free_port()
    db = tmp_path / "k.db"
    args = ["serve", "--http"] if command == "serve" else ["ui"]
    r = _ksearch([*args, "--host", host, "--port", str(port), "--db", str(db)], _env())
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert "without a token" in said and "--token" in said and "KSEARCH_TOKEN" in said, said
    assert "Traceback" not in r.stderr
    assert not db.exists()  # refused before the database was opened, so before anything was bound
    assert not _listening(port)


@pytest.mark.parametrize("command", ["serve", "ui"])
@pytest.mark.slow
def test_a_short_token_is_refused(command: str, tmp_path: Path) -> None:
    args = ["serve", "--http"] if command == "serve" else ["ui"]
    r = _ksearch(
        [*args, "--host", "0.0.0.0", "--db", str(tmp_path / "k.db")], _env(KSEARCH_TOKEN="abc123xyz")
    )
    assert r.returncode == 2
    assert "at least 16 characters" in r.stderr and "abc123xyz" not in r.stderr


def test_loopback_rule() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.5", "example.com", "localhost.evil"))
    assert http_access("127.0.0.1", None, "x").token is None  # loopback: a token is optional
    assert http_access("127.0.0.1", TOKEN, "x").token is not None
    assert http_access("0.0.0.0", TOKEN, "x").exposed
    assert TOKEN not in repr(http_access("0.0.0.0", TOKEN, "x"))


@pytest.mark.slow
def test_exposed_serve_refuses_unjailed_candidates(tmp_path: Path) -> None:
    """KSEARCH_ISOLATION=none stands for a machine where the jail cannot be built: the refusal names the missing
    protections and the flag, and comes before the port is bound."""
    port = _free_port()
    r = _ksearch(
        ["serve", "--http", "--host", "0.0.0.0", "--port", str(port), "--db", str(tmp_path / "k.db")],
        _env(KSEARCH_TOKEN=TOKEN, KSEARCH_ISOLATION="none"),
    )
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert "refusing to start" in said and "--allow-unjailed" in said
    # the sandbox's own report: why there is no jail, and what candidates could do without it
    assert "isolation='none'" in said and "candidates can read other processes" in said
    assert "write anywhere this user can" in said
    assert TOKEN not in said
    assert not _listening(port)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_jail_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule on its own: loopback needs no jail; off loopback the unjailed case is refused, or allowed by the
    flag with a warning quoting the sandbox's report of what is missing (no real non-loopback bind is made)."""
    monkeypatch.setenv("KSEARCH_ISOLATION", "none")
    ks = build_server(tmp_path / "k.db")
    try:
        assert await check_jail(ks, http_access("127.0.0.1", None, "x"), allow_unjailed=False) is None
        exposed = http_access("0.0.0.0", TOKEN, "x")
        with pytest.raises(KsearchError, match="--allow-unjailed"):
            await check_jail(ks, exposed, allow_unjailed=False)
        warning = await check_jail(ks, exposed, allow_unjailed=True)
        isolation = await candidate_isolation(ks)
        assert not is_jailed(isolation)
        assert warning is not None and "--allow-unjailed" in warning and isolation in warning
    finally:
        await ks.close()


# ------------------------------------------------------------------------------------------------ requests


@pytest.mark.slow
def test_serve_requires_the_token_on_every_request(tmp_path: Path) -> None:
    with serving(tmp_path / "k.db", env=_env(KSEARCH_TOKEN=TOKEN)) as (url, log):
        answers = [
            httpx.post(url, json=INIT, headers=MCP_HEADERS | extra, timeout=30)
            for extra in (
                {},
                {"authorization": f"Bearer {WRONG}"},
                {"authorization": f"Basic {TOKEN}"},
                {"authorization": "Bearer"},
                {"authorization": f"Bearer {TOKEN}x"},
            )
        ]
        for r in answers:
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json() == answers[0].json()  # the same answer for a missing and a wrong token
            assert "token is required" in r.json()["error"] and TOKEN not in r.text
        get = httpx.get(
            url, headers={"accept": "text/event-stream"}, timeout=30
        )  # the stream, DELETE: the same
        assert get.status_code == 401
        assert httpx.delete(url, timeout=30).status_code == 401
        ok = httpx.post(
            url, json=INIT, headers=MCP_HEADERS | {"authorization": f"bearer {TOKEN}"}, timeout=30
        )
        assert ok.status_code == 200 and "serverInfo" in ok.text
        # the SDK's Host check stays on for a loopback bind, also for a request with the token
        rebound = httpx.post(
            url,
            json=INIT,
            headers=MCP_HEADERS | {"authorization": f"Bearer {TOKEN}", "host": "evil.example"},
            timeout=30,
        )
        assert rebound.status_code in (400, 403, 421)
    said = " ".join(log)
    assert "a bearer token is required" in said and "127.0.0.1" in said and TOKEN not in said


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.slow
async def test_mcp_client_with_and_without_the_token(tmp_path: Path) -> None:
    with serving(tmp_path / "k.db", "--token", TOKEN, env=_env()) as (url, _):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as c,
        ):
            tools = await c.list_tools()
            assert "create_search" in {t.name for t in tools.tools}
            res = await c.call_tool("list_searches", {})
            assert not res.is_error
        for bad in ({}, {"Authorization": f"Bearer {WRONG}"}):
            statuses: list[int] = []

            async def seen(response: Any, statuses: list[int] = statuses) -> None:
                statuses.append(response.status_code)

            with pytest.raises(Exception):  # noqa: B017 - the SDK reports it as an error of its own kind
                async with create_mcp_http_client(headers=bad) as http:
                    http.event_hooks["response"].append(seen)
                    async with Client(
                        streamable_http_client(url, http_client=http), read_timeout_seconds=30
                    ) as c:
                        await c.list_tools()
            assert statuses and set(statuses) == {401}, statuses  # every request it sent was turned away


@pytest.mark.slow
def test_loopback_without_a_token_still_serves(tmp_path: Path) -> None:
    with serving(tmp_path / "k.db", env=_env()) as (url, log):
        assert httpx.post(url, json=INIT, headers=MCP_HEADERS, timeout=30).status_code == 200
    assert "no token" in " ".join(log)


# ------------------------------------------------------------------------------------------ the comparison


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_tokens_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every comparison of a presented token (header, browser query, cookie) goes through hmac.compare_digest,
    on equal-length digests; none through ==."""
    calls: list[tuple[bytes, bytes]] = []
    real = access.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(access.hmac, "compare_digest", spy)
    assert token_matches(TOKEN, TOKEN) and not token_matches(WRONG, TOKEN) and not token_matches("", TOKEN)
    assert len(calls) == 3 and all(len(a) == len(b) == 32 for a, b in calls)

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("reached the app without the token")

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    mw = BearerToken(app, TOKEN, browser_login=True)
    for headers, query in (
        ([(b"authorization", f"Bearer {WRONG}".encode())], b""),
        ([(b"cookie", b"ksearch_ui=0123")], b""),
        ([], f"token={WRONG}".encode()),
    ):
        calls.clear()
        sent.clear()
        scope = {"type": "http", "method": "GET", "path": "/", "headers": headers, "query_string": query}
        await mw(scope, receive, send)
        assert calls, f"no constant-time comparison for {headers or query!r}"
        assert sent[0]["status"] == 401
    body = json.loads(sent[1]["body"])  # type: ignore[arg-type]
    assert body["error"].startswith("a bearer token is required")


def test_the_token_never_reaches_a_worker() -> None:
    from ksearch.gpu.jail.scrub import scrubbed_env

    env = scrubbed_env({"KSEARCH_TOKEN": TOKEN, "PATH": "/usr/bin"}, home=Path("/tmp"))
    assert "KSEARCH_TOKEN" not in env and TOKEN not in json.dumps(env)


def test_http_access_is_the_one_rule() -> None:
    """Both faces take the rule from ksearch.server.access (no second copy of the check)."""
    faces = [
        ROOT / "server" / "mcp" / "http.py",
        ROOT / "server" / "web" / "app.py",
        ROOT / "server" / "cli" / "ui.py",
    ]
    for path in faces:
        text = path.read_text()
        assert "ksearch.server.access" in text, path
        assert "compare_digest" not in text and "authorization" not in text.lower(), path
    assert isinstance(http_access("::1", TOKEN, "x"), HttpAccess)
