"""The parent's side of a zygote (gpu/jail/zygote.py): start it, have it fork processes of its program, and hand
each forked one to the caller as a process object with what the sandbox's pool reads of an asyncio subprocess (pid,
pipes, returncode, wait), or, for a task-facts probe, run it to its end (`run_forked`).

One zygote per ksearch process, program and environment (what is read at import: `RUNTIME_ENV` aside), shared by
its callers whatever event loop each runs on: a thread reads the zygote's answers and hands each to the loop that
asked.

A worker's start is mostly its imports (about a CPU-second of torch on a 2-core machine, 6 s on an H200 machine);
forked from the zygote it starts in a few hundredths of a second on the CPU, and in about 0.75 s on a GPU, where the
forked worker creates its own CUDA context (the zygote never touches CUDA). The sandbox forks its workers, and task
probes are forked, unless `KSEARCH_FORK_WORKERS=0`.

Anything that goes wrong with the zygote (it did not start, it died, it refused a request) makes the caller start
processes the usual way from then on, logged once; a forked process's own failures are reported as an exec'd one's
are.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ksearch.gpu.jail.zygote import HOME_PREFIX, WORKER_PROGRAM, command_kind
from ksearch.worldmodel.errors import KsearchError

log = logging.getLogger("ksearch.sandbox")

# what a worker reads only after it starts: a request may differ from the zygote's environment in these alone
# (anything else, OpenMP's settings say, was read when the zygote imported torch)
RUNTIME_ENV = frozenset(
    {
        "HOME",
        "TMPDIR",
        "KSEARCH_WORKER",
        "CUDA_VISIBLE_DEVICES",
        "TRITON_INTERPRET",
        "TRITON_CACHE_DIR",
        "TORCH_EXTENSIONS_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "CUPY_CACHE_DIR",
        "FIB_CACHE_PATH",
    }
)
PIPE_LIMIT = 64 << 20


class ZygoteUnavailable(KsearchError):
    """The zygote cannot fork this process: the pool starts it the usual way (never reaches a caller)."""


class ForkedProcess:
    """A worker forked by a zygote, read as the pool reads an asyncio subprocess (on the loop that asked for it)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.pid = -1
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def _ended(self, returncode: int) -> None:
        if self.returncode is not None:
            return
        self.returncode = returncode
        if not self._exited.done():
            self._exited.set_result(returncode)
        if self.stdin is not None:
            self.stdin.close()
        self._stop_watch()

    def _watch_without_zygote(self) -> None:
        """The zygote that would report this process's end is gone: learn of the end from a pidfd (its status
        cannot be read by a non-parent: reported as killed)."""
        if self.returncode is not None or self.pid <= 0:
            return
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # already gone and reaped
            self._ended(-signal.SIGKILL)
            return
        self.loop.add_reader(self._pidfd, self._ended, -signal.SIGKILL)

    def _stop_watch(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


async def _pipes(p: ForkedProcess, stdin_w: int, stdout_r: int, stderr_r: int) -> None:
    loop = asyncio.get_running_loop()
    readers = []
    for fd in (stdout_r, stderr_r):
        reader = asyncio.StreamReader(limit=PIPE_LIMIT)
        protocol = asyncio.StreamReaderProtocol(reader)
        await loop.connect_read_pipe(_factory(protocol), os.fdopen(fd, "rb", 0))
        readers.append(reader)
    p.stdout, p.stderr = readers
    flow = asyncio.streams.FlowControlMixin()
    transport, _ = await loop.connect_write_pipe(_factory(flow), os.fdopen(stdin_w, "wb", 0))
    p.stdin = asyncio.StreamWriter(transport, flow, None, loop)


def _factory(protocol: asyncio.BaseProtocol) -> Callable[[], Any]:
    return lambda: protocol


def _call(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """`fn(*args)` on `loop`, from the reader thread; a loop closed meanwhile has no one left to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _settle(fut: asyncio.Future[Any], value: Any) -> None:
    if fut.done():
        return
    if isinstance(value, BaseException):
        fut.set_exception(value)
    else:
        fut.set_result(value)


class Zygote:
    """One zygote process: started on first use, forks processes of its program until this process exits (or it
    fails)."""

    def __init__(self, env: Mapping[str, str], start_timeout_s: float, program: str = WORKER_PROGRAM) -> None:
        self.program = program
        self.home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))
        self.env = {**env, "HOME": str(self.home), "TMPDIR": str(self.home)}
        self.start_timeout_s = start_timeout_s
        self.failed: str | None = None  # why it is not used (it did not start, it died)
        self.forks = 0
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()  # its start, and each request's send
        self._ready = threading.Event()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[ForkedProcess, asyncio.Future[ForkedProcess]]] = {}
        self._children: dict[int, ForkedProcess] = {}

    def fits(self, cmd: list[str], env: Mapping[str, str]) -> bool:
        """Whether a process started with `cmd` and `env` can be forked from this zygote."""
        return (
            self.failed is None
            and command_kind(cmd, self.program) is not None
            and import_env(env) == import_env(self.env)
        )

    async def spawn(
        self, cmd: list[str], env: Mapping[str, str], cwd: Path, keep: Iterable[int] = ()
    ) -> ForkedProcess:
        """A new worker forked with `cmd`'s meaning, `env` and `cwd`; `keep`: descriptors it keeps under the
        same numbers (a jail's control socket). Raises ZygoteUnavailable when it cannot."""
        await asyncio.to_thread(self._ensure_started)
        keep = list(keep)
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        p = ForkedProcess()
        fut: asyncio.Future[ForkedProcess] = p.loop.create_future()
        req: dict[str, Any] = {"cmd": cmd, "env": dict(env), "cwd": str(cwd), "keep": keep}
        try:
            with self._lock:
                if self._sock is None or self.failed is not None:
                    raise ZygoteUnavailable(self.failed or "not started")
                req["req"] = rid = next(self._ids)
                self._pending[rid] = (p, fut)
                socket.send_fds(self._sock, [json.dumps(req).encode()], [stdin_r, stdout_w, stderr_w, *keep])
        except (OSError, ZygoteUnavailable) as e:
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            if isinstance(e, OSError):
                self._gone(f"its socket failed: {e}")
            raise ZygoteUnavailable(str(e)) from None
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):  # the child's ends: the zygote passed them on
                os.close(fd)
        try:
            await asyncio.wait_for(asyncio.shield(fut), 30.0)
        except (ZygoteUnavailable, TimeoutError) as e:
            with self._lock:
                self._pending.pop(rid, None)
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            raise ZygoteUnavailable(str(e) or "no answer within 30 s") from None
        await _pipes(p, stdin_w, stdout_r, stderr_r)
        self.forks += 1
        return p

    def _ensure_started(self) -> None:
        with self._lock:
            if self.failed is not None:
                raise ZygoteUnavailable(self.failed)
            if self._proc is None:
                self._launch()
        if not self._ready.wait(self.start_timeout_s):
            self._gone(f"it did not start within {self.start_timeout_s:.0f} s: {self._err_tail()}")
        if self.failed is not None:
            raise ZygoteUnavailable(self.failed)

    def _launch(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(self.home / "zygote.err", "wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ksearch.gpu.jail.zygote", str(theirs.fileno()), self.program],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.home,
                env=self.env,
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )
        theirs.close()
        self._sock = mine
        self.pid = self._proc.pid
        threading.Thread(target=self._read, args=(mine,), name="ksearch-zygote", daemon=True).start()

    def _err_tail(self) -> str:
        try:
            return (self.home / "zygote.err").read_text(errors="replace")[-2000:].strip()
        except OSError:  # never written, or its folder removed meanwhile (the zygote closed as it exited)
            return ""

    def _read(self, sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError as e:
                self._gone(f"its socket failed: {e}")
                return
            if not data:
                tail = self._err_tail()
                self._gone("it exited" + (f": {tail}" if tail else ""))
                return
            self._message(json.loads(data))

    def _message(self, msg: dict[str, Any]) -> None:
        if "ready" in msg:
            self._ready.set()
            return
        with self._lock:
            if "exit" in msg:
                child = self._children.pop(int(msg["exit"]), None)
                if child is not None:
                    _call(child.loop, child._ended, os.waitstatus_to_exitcode(int(msg["status"])))
                return
            p, fut = self._pending.pop(int(msg.get("req", -1)), (None, None))
            if p is None or fut is None:
                return
            if "pid" in msg:
                p.pid = int(msg["pid"])
                self._children[p.pid] = p
                _call(p.loop, _settle, fut, p)
            else:
                _call(p.loop, _settle, fut, ZygoteUnavailable(f"it refused: {msg.get('error')}"))

    def _gone(self, why: str) -> None:
        """Not used from now on; the processes it forked are followed by their pidfds."""
        with self._lock:
            if self.failed is None:
                self.failed = why
                if why != "closed":
                    log.warning(
                        "the zygote of %s is not used any more (%s); its processes start the usual way",
                        self.program,
                        why[:500],
                    )
            self._ready.set()
            for p, fut in self._pending.values():
                _call(p.loop, _settle, fut, ZygoteUnavailable(why))
            self._pending.clear()
            for child in self._children.values():
                _call(child.loop, child._watch_without_zygote)
            self._children.clear()
            sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the reader thread wakes to its end

    def close(self) -> None:
        """Stop the zygote (the workers it forked are their pools' to stop)."""
        self._gone("closed")
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


_runs_loop: asyncio.AbstractEventLoop | None = None
_runs_lock = threading.Lock()


def _runs() -> asyncio.AbstractEventLoop:
    """The event loop `run_forked` runs on: a thread of its own, so a caller on any thread (one with a loop
    running included) can wait for a run as it would for subprocess.run."""
    global _runs_loop
    with _runs_lock:
        if _runs_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ksearch-forked-runs", daemon=True).start()
            _runs_loop = loop
        return _runs_loop


def run_forked(
    zygote: Zygote, cmd: list[str], env: Mapping[str, str], cwd: Path, timeout_s: float
) -> tuple[int, str, str]:
    """Run `cmd` forked from `zygote` to its end, as subprocess.run with captured output would: (returncode,
    stdout, stderr). Past `timeout_s` its process group is killed and TimeoutError raised. Raises
    ZygoteUnavailable when the zygote cannot fork it (the caller then starts it the usual way)."""
    return asyncio.run_coroutine_threadsafe(_run(zygote, cmd, env, cwd, timeout_s), _runs()).result()


async def _run(
    zygote: Zygote, cmd: list[str], env: Mapping[str, str], cwd: Path, timeout_s: float
) -> tuple[int, str, str]:
    p = await zygote.spawn(cmd, env, cwd)
    assert p.stdin is not None and p.stdout is not None and p.stderr is not None
    p.stdin.close()  # as stdin=DEVNULL: a read sees its end
    try:
        out, err, code = await asyncio.wait_for(
            asyncio.gather(p.stdout.read(), p.stderr.read(), p.wait()), timeout_s
        )
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)  # its own session: the group is it and what it started
        await p.wait()
        raise
    return code, out.decode(errors="replace"), err.decode(errors="replace")


def forking() -> bool:
    """Whether workers and probes fork from a zygote: KSEARCH_FORK_WORKERS=1|0, else yes. Raises ValueError for
    any other value, saying what is accepted."""
    v = os.environ.get("KSEARCH_FORK_WORKERS", "").strip()
    if v in ("", "1"):
        return True
    if v == "0":
        return False
    raise ValueError(f"KSEARCH_FORK_WORKERS={v!r}: accepted values are 1 (fork from a zygote) and 0 (exec)")


def import_env(env: Mapping[str, str]) -> dict[str, str]:
    """What of a worker's environment a library may read at import (everything but RUNTIME_ENV)."""
    return {k: v for k, v in env.items() if k not in RUNTIME_ENV}


_zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}
_zygotes_lock = threading.Lock()


def zygote_for(env: Mapping[str, str], start_timeout_s: float, program: str = WORKER_PROGRAM) -> Zygote:
    """This process's zygote for processes of `program` started with `env` (one per program and import-time
    environment)."""
    key = (("", program), *sorted(import_env(env).items()))
    with _zygotes_lock:
        z = _zygotes.get(key)
        if z is None:  # (one that failed stays: its processes start the usual way)
            z = _zygotes[key] = Zygote(env, start_timeout_s, program)
        return z


@atexit.register
def _close_all() -> None:
    with _zygotes_lock:
        for z in _zygotes.values():
            z.close()
        _zygotes.clear()
