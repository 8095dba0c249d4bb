"""Run a command (a worker, nvcc, ncu, a task probe) where candidate code reaches nothing it does not need:
no other process, no network, no file outside its view, no more than its share of the machine.

    python -m ksearch.gpu.jail.launch [--rw DIR]... [--cache DIR]... [--store DIR]... [--ro PATH]... [--dev NODE]...
        [--max-procs N] [--max-memory BYTES] [--max-disk BYTES] [--max-cache-growth BYTES]
        [--control FD] -- COMMAND ARGS...

Linux namespaces, no privileges needed (unprivileged user namespaces):
- new user, mount, PID and network namespaces;
- network: a loopback interface of its own and nothing else, so no address outside the jail can be
  reached, the host's 127.0.0.1 and ::1 included (ncu talks to the process it profiles over the jail's
  own loopback; abstract Unix sockets are per network namespace too);
- filesystem: a new root (tmpfs) holding only gpu/jail/view.py's list (the Python environment, the system's
  libraries and compilers, the CUDA toolkit, the task's files: `--ro`), read-only but the `--rw` directories
  (scratch), the `--cache` directories (compiler caches), the `--store` directories (a store that keeps itself
  within its own budget: the slow input draws, given only to processes that run no candidate code) and a
  private, size-limited /dev/shm; the GPU
  nodes given with `--dev` (a worker's own /dev/nvidiaN) are the only GPUs there;
- its own /proc: the command sees only itself and its children, so the environments of the ksearch
  process and of the user's shell (API keys) are not there to read;
- limits (gpu/jail/limits.py), watched by the jail's init: processes at once, their resident memory, bytes
  written to scratch, growth of the caches. Over a limit every process of the jail is killed and the
  launcher says why on stderr ("ksearch.gpu.jail: resource_limit: <kind>: ...", exit EXIT_RESOURCE_LIMIT).
  `--control FD`: a socket on which a caller (the worker pool) writes "?" after each reply it reads; init
  measures at once (processes, memory, scratch; the caches' growth every few seconds only) and answers "ok",
  or the verdict before killing the jail, so the verdict belongs to the call that went over, never to the
  next candidate;
- a second, nested user + mount namespace just before exec: mounts handed to a less privileged
  namespace are locked, so the command cannot remount them read-write or unmount them; no_new_privs.

Processes: this launcher (outside, waits) -> init (PID 1 inside: builds the root, reaps, watches, reports)
-> COMMAND (PID 2). The launcher ends the way COMMAND ended (same exit code, or killed by the same signal), so
callers read a jailed worker's fate as they would an unjailed one. stdin/stdout/stderr pass straight through.
"""

from __future__ import annotations

import os
import platform
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ksearch.about import IMPORT_ROOT
from ksearch.gpu.jail import root as sc
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.limits import LIMIT_FLAGS, RESOURCE_LIMIT, Limits, Watch, set_command_rlimits

IsolationMode = Literal["auto", "namespaces", "none"]
ISOLATION_MODES: tuple[str, ...] = ("auto", "namespaces", "none")
ISOLATED = (
    "namespaces: own PID and network namespaces (no network, a private loopback); a new root showing only "
    "the Python environment, system libraries, the CUDA toolkit and the task's files, read-only but scratch "
    "and compiler caches; its own GPU only; limits on processes, host memory and scratch disk"
)
# What candidates get where there is no jail (each a protection the jail gives)
MISSING_WITHOUT_JAIL = (
    "a PID namespace of its own (without it a candidate can read other processes' environments: API keys)",
    "a network namespace of its own (without it a candidate reaches the network and services on this "
    "machine's 127.0.0.1 and ::1)",
    "a filesystem of its own (without it a candidate reads every file this user can: the home directory, "
    "other projects, the search database, and writes anywhere this user can)",
    "limits on its processes and scratch disk (a fork bomb or a disk filler reaches the machine; host "
    "memory is still watched)",
    "its own GPU only (without it every GPU of the machine is visible to it)",
)
_EXPOSED = (
    "candidates can read other processes' environments (API keys), reach the network and services on this "
    "machine's 127.0.0.1 and ::1, read every file this user can (the home directory, other projects, the "
    "search database) and write anywhere this user can; nothing limits their processes or scratch disk (host "
    "memory is still watched); every GPU is visible to them"
)

EXIT_SETUP_FAILED = 125  # the launcher could not build the jail (the message is on stderr)
EXIT_RESOURCE_LIMIT = 118  # the jail went over a limit and was killed (the message is on stderr)
POLL_S = 0.05  # how often init counts processes and memory
DISK_EVERY_S = 1.0  # how often it walks the scratch directories (and whenever asked)
CACHES_EVERY_S = 5.0  # how often it walks the compiler caches (a walk of a large cache takes ~0.1 s)
_PREFIX = "ksearch.gpu.jail: "


def _exit_like(status: int) -> None:
    """End this process the way a child with wait status `status` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _command(
    cmd: list[str], limits: Limits, closing: list[int], stores: bool, run: Callable[[], None] | None
) -> None:
    """PID 2: the command itself, in a nested user namespace that locks every mount. With a store, no single
    file is capped at the disk limit (a kept draw may be larger); init's watch of the scratch still holds.
    `run`: the command as a function of this process, in place of the exec (a zygote's forked worker)."""
    for fd in closing:
        os.close(fd)
    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    set_command_rlimits(limits, file_size=not stores)
    sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWNS, "nested user+mount")
    sc.map_ids(0, 0)
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
    if run is not None:
        run()
        os._exit(0)
    os.execvp(cmd[0], cmd)


def drain(fd: int) -> None:
    """Read a non-blocking wake-up pipe (a signal's wakeup fd) empty."""
    while True:
        try:
            if not os.read(fd, 512):
                return
        except BlockingIOError:
            return


def _reap(pid: int) -> int | None:
    """Reap every finished child (init adopts the jail's orphans); COMMAND's wait status once it ended."""
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            os._exit(EXIT_SETUP_FAILED)
        if done == 0:
            return None
        if done == pid:
            return status


def _supervise(pid: int, report_fd: int, ctl: int | None, watch: Watch) -> None:
    """init's loop: reap, answer the caller's checks, end the jail over a limit."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    next_disk = time.monotonic() + DISK_EVERY_S
    next_caches = time.monotonic() + CACHES_EVERY_S
    while True:
        status = _reap(pid)
        if status is not None:
            os.write(report_fd, f"status {status}\n".encode())
            os._exit(0)
        ready, _, _ = select.select([wake_r] + ([ctl] if ctl is not None else []), [], [], POLL_S)
        if wake_r in ready:
            drain(wake_r)
        asked = 0
        if ctl is not None and ctl in ready:
            try:
                data = os.read(ctl, 512)
            except OSError:
                data = b""
            if data:
                asked = data.count(b"?")
            else:
                ctl = None  # the caller hung up
        now = time.monotonic()
        disk = bool(asked) or now >= next_disk
        caches = now >= next_caches
        if disk:
            next_disk = now + DISK_EVERY_S
        if caches:
            next_caches = now + CACHES_EVERY_S
        verdict = watch.check(disk, caches)
        if verdict is not None:
            if ctl is not None:
                try:
                    os.write(ctl, f"{verdict}\n".encode())
                except OSError:
                    pass
            os.write(report_fd, f"limit {verdict}\n".encode())
            os._exit(0)  # PID 1 gone: the kernel kills every process of the namespace
        if asked and ctl is not None:
            try:
                os.write(ctl, b"ok\n" * asked)
            except OSError:
                ctl = None


def _init(
    a: dict[str, Any], view: jail_view.View, report_fd: int, cwd: str, run: Callable[[], None] | None
) -> None:
    """PID 1 of the new namespace: build the root, start COMMAND, then watch it."""
    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
    limits: Limits = a["limits"]
    ctl: int | None = a["control"]
    disk = limits.disk_bytes
    sc.build_root(
        view,
        shm_bytes=min(disk, 1 << 30) if disk is not None else 1 << 30,
        cwd=cwd,
        fallback_cwd=a["rw"][0] if a["rw"] else None,
    )
    watch = Watch(limits, a["rw"], a["cache"], ["/dev/shm"])
    pid = os.fork()
    if pid == 0:
        _command(a["cmd"], limits, [report_fd] + ([ctl] if ctl is not None else []), bool(a["store"]), run)
    # a candidate shares its uid with init: not dumpable, init cannot be ptraced or have its /proc read (only
    # now: a process that is not dumpable cannot write its own uid_map, as COMMAND does)
    sc.prctl(sc.PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _supervise(pid, report_fd, ctl, watch)


def _parse(argv: list[str]) -> dict[str, Any]:
    a: dict[str, Any] = {"rw": [], "cache": [], "store": [], "ro": [], "dev": [], "control": None, "cmd": []}
    limits: dict[str, int | None] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag = argv[i]
        known = flag in ("--rw", "--cache", "--store", "--ro", "--dev", "--control") or flag in LIMIT_FLAGS
        if known and i + 1 >= len(argv):
            sys.exit(f"{_PREFIX}{flag} needs a value")
        value = argv[i + 1] if known else ""
        if flag in ("--rw", "--cache", "--store", "--ro", "--dev"):
            a[flag[2:]].append(os.path.realpath(value) if flag != "--dev" else value)
        elif flag in LIMIT_FLAGS:
            limits[LIMIT_FLAGS[flag]] = None if value == "none" else int(value)
        elif flag == "--control":
            a["control"] = int(value)
        else:
            sys.exit(
                f"{_PREFIX}unexpected argument {flag!r}; usage: [--rw DIR] [--cache DIR] [--store DIR] "
                "[--ro PATH] [--dev NODE] [--max-procs N] [--max-memory B] [--max-disk B] [--control FD] "
                "-- COMMAND ..."
            )
        i += 2
    a["cmd"] = argv[i + 1 :]
    if not a["cmd"]:
        sys.exit(f"{_PREFIX}no command after --")
    a["limits"] = Limits(**limits)
    return a


def main(argv: list[str], run: Callable[[], None] | None = None) -> None:
    """`run`: COMMAND as a function of the jail's PID 2 instead of an exec (gpu/jail/zygote.py; COMMAND is then
    what that function does, and is still given after `--` to be checked there)."""
    a = _parse(argv)
    uid, gid = os.getuid(), os.getgid()
    cwd = os.getcwd()
    try:
        for d in a["rw"] + a["cache"] + a["store"]:
            if not os.path.isdir(d):
                raise OSError(f"writable directory {d} does not exist")
        # in the host's terms, before unshare; a store is read-write but outside the disk and cache limits (its
        # writer keeps it within its own budget, and only processes that run no candidate code are given one)
        view = jail_view.build(a["rw"], a["cache"] + a["store"], a["ro"], a["dev"])
        sc.unshare(
            sc.CLONE_NEWUSER | sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWNET, "user+mount+pid+net"
        )
        sc.map_ids(uid, gid)
        sc.loopback_up()
    except OSError as e:
        print(f"{_PREFIX}cannot isolate the command: {e}", file=sys.stderr, flush=True)
        os._exit(EXIT_SETUP_FAILED)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _init(a, view, w, cwd, run)
        except BaseException as e:  # the command never ran: say why, as the launcher would
            print(f"{_PREFIX}cannot start the command: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_SETUP_FAILED)
    os.close(w)
    if a["control"] is not None:
        os.close(a["control"])  # init holds it
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # pass polite stops on to init
        signal.signal(sig, lambda s, _f: os.kill(pid, signal.SIGKILL))
    _, init_status = os.waitpid(pid, 0)
    report = os.read(r, 4096).decode(errors="replace").strip()
    if report.startswith("limit "):
        print(f"{_PREFIX}{report[6:]}; every process of the jail was killed", file=sys.stderr, flush=True)
        os._exit(EXIT_RESOURCE_LIMIT)
    if report.startswith("status "):
        _exit_like(int(report[7:]))
    _exit_like(init_status)


def limit_verdict(stderr: str) -> str | None:
    """The jail's resource-limit verdict ("resource_limit: <kind>: ...") in a jailed command's stderr."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(_PREFIX + RESOURCE_LIMIT):
            return line[len(_PREFIX) :].strip()
    return None


_PROBE = "import os, socket; print(len([d for d in os.listdir('/proc') if d.isdigit()]), len(socket.if_nameindex()))"


@lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None where jails work on this machine, else why not (probed once per process)."""
    if platform.system() != "Linux":
        return f"process isolation needs Linux namespaces; this is {platform.system()}"
    try:
        p = subprocess.run(
            wrap([sys.executable, "-c", _PROBE], []),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            cwd=IMPORT_ROOT,
            start_new_session=True,  # its own group: a Ctrl-C at the terminal is the driver's, not the probe's
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the isolation probe failed: {e}"
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    seen = p.stdout.split()
    if len(seen) != 2 or seen[0] not in ("1", "2"):  # init and the probe itself
        return f"the isolation probe saw {p.stdout.strip()!r} processes, expected only its own"
    if seen[1] != "1":
        return f"the isolation probe saw {seen[1]} network interfaces, expected only its loopback"
    return None


def resolve(mode: str) -> tuple[bool, str]:
    """(whether to jail, what to report) for an isolation mode.

    auto: jail where the machine allows it, otherwise run unjailed and say why; namespaces: jail or
    refuse; none: never jail (the report says so, and what is missing)."""
    if mode not in ISOLATION_MODES:
        raise ValueError(f"unknown isolation mode {mode!r}; accepted: {', '.join(ISOLATION_MODES)}")
    if mode == "none":
        return False, f"none: turned off (isolation='none'); {_EXPOSED}"
    reason = unavailable_reason()
    if reason is None:
        return True, ISOLATED
    if mode == "namespaces":
        raise OSError(f"isolation='namespaces' was asked for but is not available here: {reason}")
    return False, f"none: namespaces unavailable ({reason}); {_EXPOSED}"


def wrap(
    cmd: list[str],
    writable: Sequence[Path | str],
    *,
    caches: Sequence[Path | str] = (),
    stores: Sequence[Path | str] = (),
    readable: Sequence[Path | str] = (),
    devices: Sequence[str] = (),
    limits: Limits | None = None,
    control_fd: int | None = None,
) -> list[str]:
    """`cmd` run inside a jail: `writable` (scratch), `caches` and `stores` read-write, `readable` (a task's
    files) shown read-only beside the environment, `devices` (a GPU's node) its only GPUs; `control_fd`: the
    jail's end of a socket for limit checks (see the module docstring)."""
    out = [sys.executable, "-m", "ksearch.gpu.jail.launch"]
    flags = (
        ("--rw", writable),
        ("--cache", caches),
        ("--store", stores),
        ("--ro", readable),
        ("--dev", devices),
    )
    for flag, items in flags:
        for item in items:
            out += [flag, str(item)]
    out += (limits or Limits()).args()
    if control_fd is not None:
        out += ["--control", str(control_fd)]
    return [*out, "--", *cmd]


if __name__ == "__main__":
    main(sys.argv[1:])
