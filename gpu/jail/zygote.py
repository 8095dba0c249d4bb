"""A zygote: a process that has imported what one kind of jailed program imports (torch above all, a CPU-second or
more on a 2-core machine) and forks each new process of that program from that state instead of starting a new
interpreter. Two programs have one: the sandbox's worker (`ksearch.gpu.worker.main`) and the task-facts probe
(`ksearch.gpu.tasks.rt.facts`, which also imports what FakeTensorMode imports).

    python -m ksearch.gpu.jail.zygote SOCKET_FD PROGRAM     (started by ksearch.gpu.jail.zygote_client, never by hand)

It runs no candidate or task code and never initialises CUDA (a process forked after CUDA is initialised cannot use
it): it imports the program's modules and waits. Each request on its socket (a SOCK_SEQPACKET pair; only its
parent holds the other end) is one JSON message with file descriptors attached: the new process's stdin, stdout,
stderr and any further ones it keeps under given numbers (a jail's control socket). It forks; the child

- puts those descriptors in place and closes every other one (the zygote's socket included, so the code it runs
  cannot ask it for anything),
- starts a session of its own (its parent kills it by its process group),
- takes the request's environment, working directory and arguments,
- then runs exactly what `python -m PROGRAM ARGS` would, or what `python -m ksearch.gpu.jail.launch ... -- python -m
  PROGRAM ARGS` would: the jail (gpu/jail/launch.py) builds its namespaces and root around the program as it does
  around an exec'd one, the program running where the exec would have been.

A forked process's command line is the zygote's: `ps` and /proc/PID/comm name it by its program (`ksearch-worker`,
`ksearch-probe`; the jail's processes around it `ksearch-jail`). Any other command is refused (the parent then
starts it the usual way). The zygote answers {"req", "pid"} per request and {"exit": pid, "status": wait status}
when a child ends, as a parent would read it. Its environment is the program's: what libraries read at import
(OpenMP's settings, torch's) is the same as in an exec'd process; the parent starts a process the usual way when a
request's environment differs in anything but what is read after start (ksearch.gpu.jail.zygote_client.RUNTIME_ENV).

The programs are named here as data (module names, imported by name): the jail's room imports none of them.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

from ksearch.gpu.jail import launch as jail

MAX_FDS = 8
EXIT_CHILD_SETUP = 125  # the child could not become its program (reported on its stderr)
WORKER_PROGRAM = "ksearch.gpu.worker.main"
PROBE_PROGRAM = "ksearch.gpu.tasks.rt.facts"
# program -> (what a forked process of it is called in /proc/PID/comm, how many arguments it takes, the modules its
# zygote imports besides the program: what the program imports later but every process of it needs)
PROGRAMS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    WORKER_PROGRAM: (
        "ksearch-worker",
        0,
        (
            "torch",
            "ksearch.gpu.build.baton",
            "ksearch.gpu.tasks.draws.input_cache",
            "ksearch.gpu.worker.state",
        ),
    ),
    # FakeTensorMode's constructor imports torch._dynamo: a second of a started probe's imports on 2 cores
    PROBE_PROGRAM: ("ksearch-probe", 1, ("torch", "torch._dynamo")),
}
JAIL = ["-m", "ksearch.gpu.jail.launch"]
# what a forked worker and the jail around it are called (/proc/PID/comm; their command line is the zygote's)
WORKER_NAME = PROGRAMS[WORKER_PROGRAM][0]
JAIL_NAME = "ksearch-jail"
HOME_PREFIX = "ksearch-zygote-"  # the zygote's own directory (HOME, TMPDIR, working directory)


def command_kind(cmd: list[str], program: str = WORKER_PROGRAM) -> str | None:
    """ "plain" or "jailed" for the two commands a zygote of `program` runs (`python -m PROGRAM ARGS`, or that
    command after the jail's launcher; the interpreter's own path first, ARGS as many as the program takes), else
    None."""
    if program not in PROGRAMS or len(cmd) < 3 or cmd[0] != sys.executable:
        return None
    if _runs(cmd[1:], program):
        return "plain"
    if cmd[1:3] == JAIL and "--" in cmd:
        rest = cmd[cmd.index("--") + 1 :]
        if rest[:1] == [sys.executable] and _runs(rest[1:], program):
            return "jailed"
    return None


def _runs(argv: list[str], program: str) -> bool:
    """`argv` is `-m PROGRAM` and the program's arguments, none of them an option the interpreter would read."""
    nargs = PROGRAMS[program][1]
    return (
        argv[:2] == ["-m", program]
        and len(argv) == 2 + nargs
        and not any(a.startswith("-") for a in argv[2:])
    )


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


def _program(program: str, args: list[str]) -> None:
    """Run `program` as `python -m PROGRAM ARGS` would, in this process; then end it with the program's status."""
    name(PROGRAMS[program][0])
    sys.argv = [sys.executable, *args]
    try:
        code = importlib.import_module(program).main()
    except SystemExit as e:  # as the interpreter ends a process that raised it
        code = e.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except Exception:  # an uncaught exception: its traceback and status 1, as the interpreter would
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0)


def _child(req: dict[str, Any], fds: list[int], started: int, program: str) -> None:
    """The forked child: becomes the program (or the jail around it). Never returns. `started`: written to once
    it leads a process group of its own, the group its parent kills it by."""
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
        if command_kind(cmd, program) == "jailed":
            args = cmd[cmd.index("--") + 4 :]  # after `-- python -m PROGRAM`
            sys.argv = [cmd[0], *cmd[3:]]
            name(JAIL_NAME)  # the launcher, and the jail's init forked from it
            jail.main(cmd[3:], run=lambda: _program(program, args))
        else:
            _program(program, cmd[3:])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr, flush=True)
        os._exit(code)
    except BaseException:
        with open(2, "w", closefd=False) as err:
            err.write(
                f"ksearch.gpu.jail.zygote: the forked {program} could not start:\n" + traceback.format_exc()
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


def serve(sock: socket.socket, program: str) -> None:
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
            jail.drain(wake_r)
            _reap(sock)
        if sock.fileno() in ready:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, MAX_FDS)
            except OSError:
                _leave()
            if not data:
                _leave()  # the pool closed its end (or its process ended without closing anything)
            _serve_one(sock, data, fds, program)


def _serve_one(sock: socket.socket, data: bytes, fds: list[int], program: str) -> None:
    req: Any = None
    try:
        req = json.loads(data)
        rid = req["req"]
        if command_kind(req["cmd"], program) is None:
            raise ValueError(f"not a command of {program}: {req['cmd'][:4]}")
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
        _child(req, fds, started_w, program)
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
    program = argv[1] if len(argv) > 1 else WORKER_PROGRAM
    if program not in PROGRAMS:
        raise SystemExit(f"ksearch.gpu.jail.zygote: no zygote for {program!r}: one of {', '.join(PROGRAMS)}")
    # what a process of the program imports before it answers: torch, without initialising CUDA
    for module in (*PROGRAMS[program][2], program):
        importlib.import_module(module)
    serve(sock, program)


if __name__ == "__main__":
    main(sys.argv[1:])
