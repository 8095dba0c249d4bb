"""Helpers for the bad-input tests: a dump of every table (to prove a refusal changed nothing) and the
classes of bad values the doors are fed."""

from __future__ import annotations

import itertools
import json
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

Dump = dict[str, list[tuple[Any, ...]]]


def dump_db(db: Path) -> Dump:
    """Every row of every table, in rowid order: equal dumps mean an unchanged database."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        tables = [
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        ]
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables}
    finally:
        con.close()


# Text that is hard to store or to show: NUL and other C0 controls, lone surrogates (what an undecodable
# command-line byte becomes), right-to-left marks, emoji, combining characters.
NASTY_CHARS = [
    "\x00",
    "\x1b",
    "\x07",
    "\ud800",
    "\udcff",
    "\u202e",
    "\u200b",
    "\U0001f525",
    "e\u0301",
    "\ufeff",
]

nasty_text = st.lists(
    st.one_of(st.sampled_from(NASTY_CHARS), st.text(min_size=1, max_size=3)), min_size=1, max_size=12
).map("".join)

# Strings a control character or a lone surrogate makes unstorable: at least one of them, anywhere.
unstorable_text = st.tuples(
    st.text(max_size=20), st.sampled_from(["\x00", "\ud800", "\udfff", "\udc80"]), st.text(max_size=20)
).map("".join)

# Integers no id can be: not positive, or past SQLite's 64-bit range.
impossible_ids = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=2**63, max_value=2**200),
)

# Numbers where a 0..1 / 1..5 value is expected.
wrong_types = st.one_of(
    st.lists(st.integers(), min_size=0, max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.text(alphabet="abcxyz!?", min_size=1, max_size=8),
)

# Paths a task or file argument must not reach (or that are not tasks at all).
TRAVERSALS = [
    "../../etc/passwd",
    "../../../../../../../../etc/shadow",
    "/etc/passwd",
    "/etc",
    "/",
    "~/.ssh/id_rsa",
    "/proc/self/environ",
    "/dev/zero",
    "softmax/../../../../etc/passwd",
    "file:///etc/passwd",
    "C:\\Windows\\System32\\config\\SAM",
    "\\\\server\\share\\task.py",
    "../" * 40 + "etc/hostname",
    "/etc/passwd\x00.py",
]


class RawStdio:
    """`ksearch serve` spoken to line by line, so that a test can send bytes no MCP client would: broken
    JSON, invalid UTF-8, lone-surrogate escapes. Replies are read on a thread and matched by id."""

    def __init__(self, db: Path, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ksearch.server.cli", "serve", "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=root,
            env=env,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._ids = itertools.count(1)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.proc.stdin.flush()

    def request_raw(self, rid: int, raw: bytes, timeout: float = 30.0) -> dict[str, Any] | None:
        """Send `raw` (a request with id `rid`) and return its response, or None if none came."""
        self.send(raw)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = json.loads(self._lines.get(timeout=left))
            except queue.Empty:
                return None
            if msg.get("id") == rid:
                return msg
        return None

    def call(self, tool: str, arguments: Any, timeout: float = 30.0) -> dict[str, Any] | None:
        rid = next(self._ids) + 1000
        body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return self.request_raw(rid, json.dumps(body).encode(), timeout)

    def initialize(self) -> None:
        rid = next(self._ids)
        init = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        assert self.request_raw(rid, json.dumps(init).encode(), timeout=60) is not None, (
            "no initialize answer"
        )
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
