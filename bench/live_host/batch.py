"""Run a language model's batch of MCP calls against `ksearch serve --http`, for a host that works in rounds.

A host whose GPU is on another machine cannot call tools one at a time; it writes each round as a small
Python script, and this runner plays it on the GPU machine against a real server over its database:

    python bench/live_host/batch.py --db S.db --script round1.py --out round1.out [--record S.jsonl]
    python bench/live_host/batch.py --manifest jobs.json     # several (db, script, out) in turn

In the script, `info()`, `call(tool, args)`, `prompt(name, args)` and `read(uri)` do what `mcpc.py` does (and print
the same text: a result's text blocks, then its structured content); `call` returns the structured content,
or `{"error": message}` for an error result (a refused `prompt` or `read` returns "error: …"), so the script can use ids it only learns in the round.
A script that raises is stopped there, with its traceback in the output; what it did before is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcpc import info_text, texts_of  # the one-call client beside it: the same texts
from pydantic import BaseModel


class Job(BaseModel):
    db: Path
    script: Path
    out: Path
    record: Path | None = None
    bank: Path | None = None
    timeout_s: float = 900.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(job: Job, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "ksearch.server.cli.main",
        "serve",
        "--http",
        "--port",
        str(port),
        "--db",
        str(job.db),
    ]
    if job.record:
        cmd += ["--record", str(job.record)]
    if job.bank:
        cmd += ["--bank", str(job.bank)]
    fh = log.open("ab")
    return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)


async def _wait_up(url: str, proc: subprocess.Popen[bytes], limit_s: float = 120.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise RuntimeError(f"ksearch serve exited with {proc.returncode} before answering")
        try:
            async with Client(url) as c:
                await c.list_tools()
            return
        except Exception:  # not listening yet: retry until the limit
            await asyncio.sleep(0.5)
    raise RuntimeError(f"ksearch serve did not answer at {url} within {limit_s:.0f} s")


async def _run_job(job: Job) -> int:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    job.out.parent.mkdir(parents=True, exist_ok=True)
    proc = _start_server(job, port, job.out.with_suffix(".server.log"))
    buf = io.StringIO()
    rc = 0
    try:
        await _wait_up(url, proc)
        async with Client(url) as client:
            loop = asyncio.get_running_loop()

            def sync(coro: Any) -> Any:
                return asyncio.run_coroutine_threadsafe(coro, loop).result()

            def call(tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
                t0 = time.monotonic()
                print(f"\n>>> call {tool} {json.dumps(args or {})[:400]}")
                res = sync(client.call_tool(tool, args or {}))
                took = time.monotonic() - t0
                if res.is_error:
                    msg = texts_of(res)
                    print(f"ERROR ({took:.1f} s): {msg}")
                    return {"error": msg}
                print(texts_of(res))
                print(f"STRUCTURED ({took:.1f} s):\n" + json.dumps(res.structured_content, indent=1))
                return dict(res.structured_content or {})

            def prompt(name: str, args: dict[str, Any] | None = None) -> str:
                print(f"\n>>> prompt {name} {json.dumps(args or {})}")
                t0 = time.monotonic()
                try:
                    got = sync(client.get_prompt(name, {k: str(v) for k, v in (args or {}).items()}))
                except MCPError as e:  # refused as a tool call's error is: said, and the round goes on
                    print(f"ERROR ({time.monotonic() - t0:.1f} s): {e}")
                    return f"error: {e}"
                took = time.monotonic() - t0
                text = "\n".join(m.content.text for m in got.messages)
                print(text)
                print(f"PROMPT READ ({took:.2f} s)")
                return text

            def read(uri: str) -> str:
                print(f"\n>>> read {uri}")
                try:
                    res = sync(client.read_resource(uri))
                except MCPError as e:  # said, and the round goes on, as for a refused call
                    print(f"ERROR: {e}")
                    return f"error: {e}"
                text = "\n".join(p.text for p in res.contents if hasattr(p, "text"))
                print(text)
                return text

            def info() -> None:
                print(sync(info_text(client)))

            def play() -> None:
                nonlocal rc
                scope: dict[str, Any] = {
                    "call": call,
                    "prompt": prompt,
                    "read": read,
                    "info": info,
                    "__name__": "__round__",
                }
                with contextlib.redirect_stdout(buf):
                    try:
                        exec(compile(job.script.read_text(), str(job.script), "exec"), scope)
                    except BaseException:
                        print("\n>>> the script stopped here:\n" + traceback.format_exc())
                        rc = 1

            thread = threading.Thread(target=play, daemon=True)
            thread.start()
            t0 = time.monotonic()
            while thread.is_alive():
                if time.monotonic() - t0 > job.timeout_s:
                    buf.write(f"\n>>> stopped: the round ran past its {job.timeout_s:.0f} s limit\n")
                    rc = 2
                    break
                await asyncio.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        job.out.write_text(buf.getvalue())
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--manifest", type=Path, help="JSON list of jobs: {db, script, out, record?, bank?, timeout_s?}"
    )
    ap.add_argument("--db", type=Path)
    ap.add_argument("--script", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--record", type=Path)
    ap.add_argument("--bank", type=Path)
    a = ap.parse_args(argv)
    if a.manifest:
        jobs = [Job.model_validate(j) for j in json.loads(a.manifest.read_text())]
    elif a.db and a.script and a.out:
        jobs = [Job(db=a.db, script=a.script, out=a.out, record=a.record, bank=a.bank)]
    else:
        ap.error("give --manifest FILE, or --db, --script and --out")
    worst = 0
    for job in jobs:
        t0 = time.monotonic()
        rc = asyncio.run(_run_job(job))
        print(f"{job.script} on {job.db}: rc {rc} in {time.monotonic() - t0:.0f} s -> {job.out}", flush=True)
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
