"""A scripted HTTP server on 127.0.0.1 for tests: real sockets, real clients, replies from a queue.

    with StubServer([Reply(429, {...}, {"retry-after": "0"}), Reply(200, {...})]) as s:
        ... point a client at s.base_url ...
        assert len(s.requests) == 2

A script entry is a Reply or a function of the Recorded request returning one (to echo what the client
sent, e.g. the forced tool's name). When the script runs out, the server answers 500 saying so, so a test
that expects fewer requests fails loudly rather than hanging.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list: sent as JSON; str/bytes: sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (to provoke client timeouts)

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain; charset=utf-8"
        return json.dumps(self.body if self.body is not None else {}).encode(), "application/json"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived
    client_gone: bool = False  # the client hung up before the reply was written (e.g. it timed out)

    def json(self) -> Any:
        return json.loads(self.body)


Script = Iterable[Reply | Callable[[Recorded], Reply]]


class StubServer:
    def __init__(self, script: Script = ()) -> None:
        self._queue: deque[Reply | Callable[[Recorded], Reply]] = deque(script)
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting

    def push(self, *replies: Reply | Callable[[Recorded], Reply]) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next_reply(self, req: Recorded) -> Reply:
        with self._lock:
            self.requests.append(req)
            item = self._queue.popleft() if self._queue else None
        if item is None:
            return Reply(500, {"error": {"message": "stub script exhausted: no reply left for this request"}})
        return item(req) if callable(item) else item

    # -- lifecycle

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the stub server is not running: use it as a context manager")
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What a client is configured with; subclasses add the API's path prefix where clients expect one."""
        return self.root_url

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                req = Recorded(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                    at=time.monotonic(),
                )
                reply = stub._next_reply(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body, ctype = reply.encoded()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(body)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    req.client_gone = True  # the client gave up first: what a timeout test wants

            do_POST = _handle
            do_GET = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return None  # keep test output clean; requests are in stub.requests

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="stub-http", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
