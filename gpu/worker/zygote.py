"""A worker slot's zygote: a process that has imported what a sandbox worker imports (torch above all, about a
CPU-second on a 2-core machine) and forks each new worker from that state instead of starting a new interpreter.

    python -m ksearch.gpu.worker.zygote SOCKET_FD      (started by ksearch.gpu.sandbox.zygote_client, never by hand)

It runs no candidate code and never initialises CUDA (a process forked after CUDA is initialised cannot use it):
it imports the worker's modules and waits. Each request on its socket (a SOCK_SEQPACKET pair; only the pool holds
the other end) is one JSON message with file descriptors attached: the new process's stdin, stdout, stderr and
any further ones it keeps under given numbers (a jail's control socket). It forks; the child

- puts those descriptors in place and closes every other one (the zygote's socket included, so a candidate
  cannot ask it for anything),
- starts a session of its own (the pool kills a worker by its process group),
- takes the request's environment, working directory and arguments,
- then runs exactly what `python -m ksearch.gpu.worker.main` would, or what `python -m ksearch.gpu.jail.launch ... --
  python -m ksearch.gpu.worker.main` would: the jail (gpu/jail/launch.py) builds its namespaces and root around the
  worker as it does around an exec'd one, the worker running where the exec would have been.

A forked process's command line is the zygote's: `ps` and /proc/PID/comm name it `ksearch-worker` (the jail's
processes around it `ksearch-jail`). Any other command is refused (the pool then starts it the usual way). The zygote answers {"req", "pid"} per
request and {"exit": pid, "status": wait status} when a child ends, as a parent would read it. Its environment
is the slot's worker environment: what libraries read at import (OpenMP's settings, torch's) is the same as in
an exec'd worker; the pool starts a process the usual way when a request's environment differs in anything but
what is read after start (ksearch.gpu.sandbox.zygote_client.RUNTIME_ENV).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

MAX_FDS = 8
EXIT_CHILD_SETUP = 125  # the child could not become the worker (reported on its stderr)
WORKER = ["-m", "ksearch.gpu.worker.main"]
JAIL = ["-m", "ksearch.gpu.jail.launch"]
# what a forked worker and the jail around it are called (/proc/PID/comm; their command line is the zygote's)
WORKER_NAME = "ksearch-worker"
JAIL_NAME = "ksearch-jail"
HOME_PREFIX = "ksearch-zygote-"  # the zygote's own directory (HOME, TMPDIR, working directory)


def command_kind(cmd: list[str]) -> str | None:
    """ "worker" or "jailed" for the two commands a zygote runs (the interpreter's own path first), else None."""
    if len(cmd) < 3 or cmd[0] != sys.executable:
        return None
    if cmd[1:] == WORKER:
        return "worker"
    if cmd[1:3] == JAIL and "--" in cmd:
        rest = cmd[cmd.index("--") + 1 :]
        if rest == [sys.executable, *WORKER]:
            return "jailed"
    return None


def _place_fds(fds: list[int], targets: list[int]) -> None:
    """fds[i] onto targets[i], every other descriptor closed."""
    import fcntl

    floor = max([*targets, *fds, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in fds]  # out of the way of the targets first
    for src, dst in zip(moved, targets, strict=True):
        os.dup2(src, dst, inheritable=True)
    start = 0
    for fd in sorted(set(targets)):
        if (
            start < fd
        ):  # an empty range is not a no-op in CPython 3.11: closerange(0, 0) closes every descriptor
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, max(os.sysconf("SC_OPEN_MAX"), start + 1))


def name(comm: str) -> None:
    """The process's name in `ps` and /proc/PID/comm: its command line stays the zygote's."""
    with open("/proc/self/comm", "w") as f:
        f.write(comm)


def _worker() -> None:
    from ksearch.gpu.worker import main as worker

    name(WORKER_NAME)
    worker.main()


def _child(req: dict[str, Any], fds: list[int], started: int) -> None:
    """The forked child: becomes the worker (or the jail around it). Never returns. `started`: written to once
    it leads a process group of its own, the group the pool kills it by."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        os.write(started, b"s")
        _place_fds(fds, [0, 1, 2, *req["keep"]])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # TMPDIR is this process's scratch now
        os.chdir(req["cwd"])
        sys.path[0] = req["cwd"]  # as `python -m` puts its working directory first
        cmd: list[str] = req["cmd"]
        if command_kind(cmd) == "jailed":
            from ksearch.gpu.jail import launch as jail

            sys.argv = [cmd[0], *cmd[3:]]
            name(JAIL_NAME)  # the launcher, and the jail's init forked from it
            jail.main(cmd[3:], run=_worker)
        else:
            sys.argv = [cmd[0]]
            _worker()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr, flush=True)
        os._exit(code)
    except BaseException:
        with open(2, "w", closefd=False) as err:
            err.write(
                "ksearch.gpu.worker.zygote: the forked worker could not start:\n" + traceback.format_exc()
            )
        os._exit(EXIT_CHILD_SETUP)
    os._exit(0)


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        _leave()  # the pool is gone: so is every reason to stay


def _leave() -> None:
    """Exit, removing this zygote's own directory (its working directory, made for it by the pool) when its
    process ended without removing it."""
    home = os.getcwd()
    if os.path.basename(home).startswith(HOME_PREFIX):
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    os._exit(0)


def serve(sock: socket.socket) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    _send(sock, {"ready": os.getpid()})
    while True:
        try:
            ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            _reap(sock)
        if sock.fileno() in ready:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, MAX_FDS)
            except OSError:
                _leave()
            if not data:
                _leave()  # the pool closed its end (or its process ended without closing anything)
            _serve_one(sock, data, fds)


def _serve_one(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    req: Any = None
    try:
        req = json.loads(data)
        rid = req["req"]
        if command_kind(req["cmd"]) is None:
            raise ValueError(f"not a worker command: {req['cmd'][:4]}")
        if len(fds) != 3 + len(req["keep"]):
            raise ValueError(f"{len(fds)} descriptors for {3 + len(req['keep'])} places")
    except (ValueError, KeyError, TypeError) as e:
        for fd in fds:
            os.close(fd)
        _send(sock, {"req": req.get("req") if isinstance(req, dict) else None, "error": str(e)})
        return
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        sock.close()
        os.close(started_r)
        _child(req, fds, started_w)
    os.close(started_w)
    for fd in fds:
        os.close(fd)
    os.read(started_r, 1)  # its own session first (or its end): the pool may kill its group at once
    os.close(started_r)
    _send(sock, {"req": rid, "pid": pid})


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exit": pid, "status": status})


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[0]))
    # what a worker imports before it answers (gpu/worker/main.py): torch, without initialising CUDA
    import torch  # noqa: F401

    from ksearch.gpu.build import baton  # noqa: F401
    from ksearch.gpu.tasks.draws import input_cache  # noqa: F401
    from ksearch.gpu.worker import main as worker  # noqa: F401
    from ksearch.gpu.worker.state import WorkerState  # noqa: F401

    serve(sock)


if __name__ == "__main__":
    main(sys.argv[1:])
