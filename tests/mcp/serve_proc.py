"""`ksearch serve` over stdio as a test's subprocess, read line by line (every stdout line must be the protocol)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class RawServer:
    """`ksearch serve` over stdio, read line by line: every line it writes on stdout is kept, to be checked."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stdout: list[dict[str, Any]] = []
        self._id = 0

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        await self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 240)
            assert line, "the server closed stdout"
            msg = json.loads(line)  # anything but the protocol on stdout fails here
            assert msg.get("jsonrpc") == "2.0", line
            self.stdout.append(msg)
            if msg.get("id") == self._id:
                return msg

    async def initialize(self) -> None:
        init = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        assert "result" in init, init
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def spawn_serve(db: Path, log: Path, *, stderr: int = asyncio.subprocess.PIPE) -> RawServer:
    """A `ksearch serve --db DB --log LOG` over stdio, from this checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KSEARCH_TOKEN", None)
    env.setdefault("TRITON_INTERPRET", "1")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "ksearch.server.cli", "serve", "--db", str(db), "--log", str(log)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=str(ROOT),
    )
    return RawServer(proc)
