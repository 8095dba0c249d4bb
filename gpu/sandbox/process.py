"""One worker's OS process (parent side; never imports torch): started anew or forked from the slot's zygote,
inside the jail where the machine allows it, in its own process group; its line protocol (`call`), its memory
watch, and its end (reaped, killed with its group, or abandoned), each said as a `WorkerError` of its kind.
The slot that owns it, its spare and the pool that hands slots out are in ksearch.gpu.sandbox.pool."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import time
from collections import deque
from pathlib import Path
from typing import Any, Literal

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.link import JailLink
from ksearch.gpu.jail.zygote_client import ForkedProcess, Zygote, ZygoteUnavailable
from ksearch.worldmodel.errors import KsearchError

log = logging.getLogger("ksearch.sandbox")

FaultKind = Literal["crash", "timeout", "memory", "limit", "start", "cancelled", "busy"]
Mode = Literal["candidate", "baseline"]  # a process that runs candidates, or one that measures baselines only
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class WorkerError(KsearchError):
    """The worker could not answer: it crashed, timed out, went over a resource limit (kind "memory" from
    the pool's own watch, "limit" from the jail's: processes, host memory, scratch disk), or never started."""

    def __init__(
        self,
        kind: FaultKind,
        message: str,
        *,
        returncode: int | None = None,
        stderr: str = "",
        output_bytes: int = 0,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.returncode = returncode
        self.stderr = stderr
        self.output_bytes = output_bytes  # what the call printed (stdout and stderr) before it timed out


def _group_rss(pgid: int) -> int:
    """Resident bytes of every process in a process group (the worker and anything it started)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        # fields[0] is state (field 3); pgrp is field 5, rss (pages) field 24
        if len(fields) > 21 and int(fields[2]) == pgid:
            total += int(fields[21]) * _PAGE
    return total


class Process:
    """One OS process of a worker slot: its pipes, output readers, memory watch and pending calls."""

    def __init__(
        self,
        slot: int,
        scratch: Path,
        mode: Mode,
        memory_limit_bytes: int,
        readable: frozenset[str] = frozenset(),
    ) -> None:
        self.slot = slot
        self.scratch = scratch  # its own directory (cwd and HOME), removed when it is discarded
        self.mode = mode
        self.memory_limit_bytes = memory_limit_bytes
        self.readable = readable  # the task files its jail shows
        self.link: JailLink | None = None  # its jail's limit-check socket (jailed processes only)
        self.hello: dict[str, Any] | None = None
        self.ran_candidate = False  # whether this process has loaded candidate code
        self.candidate_id: str | None = None  # the candidate it last loaded
        self.stray_threads = False  # candidate code left threads running: the next one gets a new process
        self.started: asyncio.Task[None] | None = None  # its start, from `launch`
        self._proc: asyncio.subprocess.Process | ForkedProcess | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stderr: deque[str] = deque(maxlen=300)
        self.output_bytes = 0  # bytes the process wrote to stdout/stderr (print goes to stderr), all told
        self._tasks: list[asyncio.Task[Any]] = []
        self._hello_fut: asyncio.Future[dict[str, Any]] | None = None
        self._death: WorkerError | None = None
        self._killed_for: FaultKind | None = None
        self._verdict: str | None = None  # the jail's resource-limit verdict, once it gave one
        self._group_gone = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._death is None

    @property
    def ready(self) -> bool:
        return self.alive and self.hello is not None

    @property
    def usable(self) -> bool:
        """Ready, or its start still under way."""
        return self.started is not None and (not self.started.done() or self.ready)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ lifecycle
    def launch(
        self,
        cmd: list[str],
        env: dict[str, str],
        timeout_s: float,
        *,
        jailed: bool,
        after: asyncio.Task[None] | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        """Start in the background (`started`); `after`: the old process's end, awaited first (its GPU
        memory freed before this one takes any); `zygote`: the slot's, to fork the process from where it can."""
        self.started = asyncio.create_task(self._spawn(cmd, env, timeout_s, jailed, after, zygote))

    async def _spawn(
        self,
        cmd: list[str],
        env: dict[str, str],
        timeout_s: float,
        jailed: bool,
        after: asyncio.Task[None] | None,
        zygote: Zygote | None,
    ) -> None:
        if after is not None:
            await asyncio.shield(after)
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._hello_fut = asyncio.get_running_loop().create_future()
        keep = self.link.pass_fds() if self.link is not None else ()
        if zygote is not None and zygote.fits(cmd, env):
            with contextlib.suppress(ZygoteUnavailable):  # then the usual way (the zygote logged why)
                self._proc = await zygote.spawn(cmd, env, self.scratch, keep)
        if self._proc is None:
            self._proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.scratch,
                env=env,
                start_new_session=True,
                limit=64 << 20,
                pass_fds=keep,
            )
        if self.link is not None:
            await self.link.handed_over()
        self._tasks = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]
        if not jailed:  # a jail's init watches every process of its namespace itself (gpu/jail/limits.py)
            self._tasks.append(asyncio.create_task(self._watch_memory()))
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello_fut), timeout_s)
            # the PID the host sees (the worker's own is 2 inside its namespace when jailed)
            self.hello = {**hello, "pid": self._proc.pid, "jailed": jailed, "mode": self.mode}
        except TimeoutError:
            await self.kill("start")
            raise WorkerError(
                "start",
                f"the worker did not start within {timeout_s:.0f} s; stderr:\n{self.stderr_tail()}",
            ) from None
        except WorkerError as e:
            raise WorkerError("start", f"the worker failed to start: {e.message}", stderr=e.stderr) from None

    async def reap(self) -> None:
        # the whole group: the worker and whatever it left behind (compiler daemons, candidate children)
        self._signal_group(signal.SIGKILL)
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                await self._proc.wait()
        self._group_gone = True
        for t in self._tasks:
            if not t.done():
                t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        if self.link is not None:
            self.link.close()

    def kill_now(self) -> None:
        """SIGKILL the whole group without waiting."""
        self._signal_group(signal.SIGKILL)

    async def discard(self) -> None:
        """End the process (its start too, if under way) and remove its scratch directory."""
        self.kill_now()
        if self.started is not None and not self.started.done():
            self.started.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.started
        await self.reap()
        shutil.rmtree(self.scratch, ignore_errors=True)

    async def shutdown(self) -> None:
        """Ask a ready process to exit, then make sure its group is gone."""
        if self.started is not None and not self.started.done():
            self.started.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.started
        if self.ready:
            with contextlib.suppress(WorkerError, OSError, ConnectionError):
                await self.call("exit", {}, timeout_s=10.0)
        await self.reap()

    def _signal_group(self, sig: int) -> None:
        if self._proc is None or self._group_gone:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
        if sig == signal.SIGKILL and self._proc.returncode is not None:
            # the leader is reaped and the rest killed: never signal this id again (it may be reused)
            self._group_gone = True

    async def kill(self, reason: FaultKind) -> None:
        """Kill the worker's whole process group (candidate children included)."""
        self._killed_for = self._killed_for or reason
        self._signal_group(signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                await self._proc.wait()

    def abandon(self) -> None:
        """Kill the job in flight at once, without awaiting (the caller is being cancelled): the whole
        process group goes, and the process counts as dead so the slot replaces it."""
        self._killed_for = self._killed_for or "cancelled"
        self.kill_now()
        self._death = WorkerError("cancelled", "the job in flight was cancelled and its worker killed")

    # ------------------------------------------------------------------ I/O
    def stderr_tail(self, n: int = 25) -> str:
        lines = [ln for ln in self._stderr if ln.strip()]
        return "\n".join(lines[-n:])

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            try:
                line = await self._proc.stderr.readline()
            except ValueError:  # a line past the reader's limit, dropped by it: counted, kept only as a mark
                self.output_bytes += 2**16
                self._stderr.append("[sandbox] an output line over 64 KiB was dropped")
                continue
            if not line:
                return
            self.output_bytes += len(line)
            text = line.decode(errors="replace").rstrip()
            self._stderr.append(text[:2000])
            log.debug("worker %s: %s", self.slot, text)

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                self._stderr.append(f"[protocol] unparsable line: {line[:200]!r}")
                continue
            if msg.get("id") == 0 and "hello" in msg:
                if self._hello_fut is not None and not self._hello_fut.done():
                    self._hello_fut.set_result(msg["hello"])
                continue
            fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        await self._on_exit()  # EOF: the process is gone or going

    async def _on_exit(self) -> None:
        assert self._proc is not None
        rc = await self._proc.wait()
        await asyncio.sleep(0.05)  # let the stderr reader drain the last lines
        self._signal_group(signal.SIGKILL)  # orphans of the dead worker (its group) go with it
        self._death = self._death_error(rc)
        for fut in list(self._pending.values()) + ([self._hello_fut] if self._hello_fut else []):
            if not fut.done():
                fut.set_exception(self._death)
        self._pending.clear()

    def _death_error(self, rc: int) -> WorkerError:
        tail = self.stderr_tail()
        verdict = self._verdict or (jail.limit_verdict(tail) if rc == jail.EXIT_RESOURCE_LIMIT else None)
        if verdict is not None:
            return WorkerError("limit", f"{verdict}; the worker was killed", returncode=rc, stderr=tail)
        if self._killed_for == "memory":
            return WorkerError(
                "memory",
                f"resource_limit: host memory: the worker exceeded the host-memory limit of "
                f"{self.memory_limit_bytes / 2**30:.1f} GiB and was killed",
                returncode=rc,
                stderr=tail,
            )
        if self._killed_for == "timeout":
            return WorkerError(
                "timeout", "the worker was killed after the call timed out", returncode=rc, stderr=tail
            )
        if rc < 0:
            try:
                what = signal.Signals(-rc).name
            except ValueError:
                what = f"signal {-rc}"
            hint = {
                "SIGSEGV": " (segmentation fault: a bad host pointer, or a crash inside a native library)",
                "SIGABRT": " (aborted, e.g. a failed assertion in native code)",
                "SIGBUS": " (bus error)",
                "SIGKILL": " (killed: possibly the system's out-of-memory killer)",
                "SIGFPE": " (arithmetic fault)",
                "SIGILL": " (illegal instruction)",
            }.get(what, "")
            return WorkerError(
                "crash", f"the worker process died from {what}{hint}", returncode=rc, stderr=tail
            )
        return WorkerError(
            "crash", f"the worker process exited unexpectedly with status {rc}", returncode=rc, stderr=tail
        )

    async def _watch_memory(self) -> None:
        # per process group: a spare's memory never counts against the process serving the slot
        assert self._proc is not None
        pid = self._proc.pid
        while self._proc.returncode is None:
            await asyncio.sleep(0.25)
            try:
                rss = await asyncio.to_thread(_group_rss, pid)
            except OSError:
                continue
            if rss > self.memory_limit_bytes:
                self._stderr.append(f"[sandbox] worker group RSS {rss / 2**30:.2f} GiB exceeds the limit")
                await self.kill("memory")
                return

    async def call(self, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply. Raises WorkerError if the worker cannot answer."""
        if not self.alive:
            raise self._death or WorkerError("crash", "the worker is not running")
        assert self._proc is not None and self._proc.stdin is not None
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            self._proc.stdin.write(
                (json.dumps({"id": rid, "op": op, "args": args}, default=str) + "\n").encode()
            )
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self._pending.pop(rid, None)
            await self._proc.wait()
            await asyncio.sleep(0.05)
            raise self._death or self._death_error(self._proc.returncode or -1) from None
        t0, written = time.monotonic(), self.output_bytes
        try:
            reply = await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            self._pending.pop(rid, None)
            await self.kill("timeout")
            raise WorkerError(
                "timeout",
                f"no answer within {timeout_s:.0f} s (the worker was killed)",
                stderr=self.stderr_tail(),
                output_bytes=self.output_bytes - written,
            ) from None
        except asyncio.CancelledError:
            # The caller gave up (an MCP client cancelled, a run was interrupted): the job stops with it.
            # A worker left running it would make the next caller wait and be blamed for what it leaves.
            self._pending.pop(rid, None)
            self.abandon()
            raise
        if reply.get("stray_threads"):
            self.stray_threads = True
        if reply.get("fatal"):
            await self._proc.wait()  # the worker leaves by itself after a fatal CUDA error
            self._death = WorkerError("crash", "CUDA context lost", returncode=self._proc.returncode)
        elif op != "exit":
            await self._ask_jail()
        reply.setdefault("seconds", time.monotonic() - t0)
        return reply

    async def _ask_jail(self) -> None:
        """Have the jail measure its limits now (jailed processes only); over one, the process is gone and
        this raises its death, so the reply just read is not used."""
        if self.link is None or self._proc is None:
            return
        verdict = await self.link.ask()
        if verdict is None:
            return
        if verdict:
            self._verdict = verdict
            self._killed_for = "limit"
        try:
            await asyncio.wait_for(self._proc.wait(), 10.0)
        except TimeoutError:
            await self.kill("crash")
        await asyncio.sleep(0.05)  # the stderr reader drains the last lines
        self._death = self._death or self._death_error(self._proc.returncode or -1)
        raise self._death
