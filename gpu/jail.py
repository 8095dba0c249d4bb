"""Run a command (a worker, nvcc, ncu) where candidate code cannot see other processes or write outside
the directories it is given.

    python -m ksearch.gpu.jail --rw DIR [--rw DIR ...] -- COMMAND ARGS...

Linux namespaces, no privileges needed (unprivileged user namespaces):
- a new user + mount namespace: every mount is made read-only (recursively), except bind mounts of the
  `--rw` directories (the worker's scratch directory and the compiler caches);
- a new PID namespace with its own /proc: the command sees only itself and its children, so the
  environments of the ksearch process and of the user's shell (API keys) are not there to read;
- a second, nested user + mount namespace just before exec: mounts handed to a less privileged
  namespace are locked, so the command cannot remount them read-write or unmount them.

Processes: this launcher (outside, waits) -> init (PID 1 inside: reaps, reports) -> COMMAND (PID 2).
The launcher ends the way COMMAND ended (same exit code, or killed by the same signal), so callers
read a jailed worker's fate as they would an unjailed one. stdin/stdout/stderr pass straight through.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Literal

from ksearch.about import IMPORT_ROOT

IsolationMode = Literal["auto", "namespaces", "none"]
ISOLATION_MODES: tuple[str, ...] = ("auto", "namespaces", "none")
ISOLATED = "namespaces: own PID namespace; filesystem read-only except scratch and compiler caches"
_EXPOSED = "candidates can read other processes and write anywhere this user can"

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
PR_SET_PDEATHSIG = 1
# mount_setattr(2) has one number on every architecture that has it (the generic table)
SYS_MOUNT_SETATTR = 442
EXIT_SETUP_FAILED = 125  # the launcher could not build the jail (the message is on stderr)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int, what: str) -> None:
    _check(_libc.unshare(flags), f"unshare({what})")


def _map_ids(uid: int, gid: int, inside: int = 0) -> None:
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{inside} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{inside} {gid} 1")


def _mount(src: str | None, target: str, fstype: str | None, flags: int) -> None:
    _check(
        _libc.mount(
            src.encode() if src else None, target.encode(), fstype.encode() if fstype else None, flags, None
        ),
        f"mount {target}",
    )


def _setattr(path: str, set_: int, clr: int) -> None:
    attr = _MountAttr(set_, clr, 0, 0)
    rc = _libc.syscall(
        SYS_MOUNT_SETATTR, -100, path.encode(), AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    _check(rc, f"mount_setattr {path}")


def _build_mounts(writable: list[str]) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here leaks back to the host
    for d in writable:
        _mount(d, d, None, MS_BIND | MS_REC)
    _setattr("/", MOUNT_ATTR_RDONLY, 0)
    for d in writable:
        _setattr(d, 0, MOUNT_ATTR_RDONLY)


def _exit_like(status: int) -> None:
    """End this process the way a child with wait status `status` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _pdeathsig() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _init(cmd: list[str], report_fd: int) -> None:
    """PID 1 of the new namespace: mount its /proc, start COMMAND, reap, report its wait status."""
    _pdeathsig()
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(report_fd)
        _pdeathsig()
        _unshare(CLONE_NEWUSER | CLONE_NEWNS, "nested user+mount")  # locks every mount
        _map_ids(0, 0)
        os.execvp(cmd[0], cmd)
    while True:  # as init, reap every orphan until COMMAND itself ends
        try:
            done, status = os.wait()
        except ChildProcessError:
            os._exit(EXIT_SETUP_FAILED)
        if done == pid:
            os.write(report_fd, f"{status}\n".encode())
            os._exit(0)


def main(argv: list[str]) -> None:
    writable: list[str] = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--rw" and i + 1 < len(argv):
            writable.append(os.path.realpath(argv[i + 1]))
            i += 2
        else:
            sys.exit(f"ksearch.gpu.jail: unexpected argument {argv[i]!r}; usage: --rw DIR ... -- COMMAND ...")
    cmd = argv[i + 1 :]
    if not cmd:
        sys.exit("ksearch.gpu.jail: no command after --")
    uid, gid = os.getuid(), os.getgid()
    try:
        for d in writable:
            if not os.path.isdir(d):
                raise OSError(f"writable directory {d} does not exist")
        _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID, "user+mount+pid")
        _map_ids(uid, gid)
        _build_mounts(writable)
    except OSError as e:
        print(f"ksearch.gpu.jail: cannot isolate the command: {e}", file=sys.stderr, flush=True)
        os._exit(EXIT_SETUP_FAILED)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _init(cmd, w)
        except BaseException as e:  # the command never ran: say why, as the launcher would
            print(f"ksearch.gpu.jail: cannot start the command: {e}", file=sys.stderr, flush=True)
            os._exit(EXIT_SETUP_FAILED)
    os.close(w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # pass polite stops on to init
        signal.signal(sig, lambda s, _f: os.kill(pid, signal.SIGKILL))
    _, init_status = os.waitpid(pid, 0)
    report = os.read(r, 64).decode().strip()
    _exit_like(int(report) if report else init_status)


_PROBE = "import os; print(len([d for d in os.listdir('/proc') if d.isdigit()]))"


@lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None where jails work on this machine, else why not (probed once per process)."""
    if platform.system() != "Linux":
        return f"process isolation needs Linux namespaces; this is {platform.system()}"
    try:
        p = subprocess.run(
            [sys.executable, "-m", "ksearch.gpu.jail", "--", sys.executable, "-c", _PROBE],
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
    if p.stdout.strip() not in ("1", "2"):  # init and the probe itself
        return f"the isolation probe saw {p.stdout.strip()} processes, expected only its own"
    return None


def resolve(mode: str) -> tuple[bool, str]:
    """(whether to jail, what to report) for an isolation mode.

    auto: jail where the machine allows it, otherwise run unjailed and say why; namespaces: jail or
    refuse; none: never jail (the report says so)."""
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


def wrap(cmd: list[str], writable: list[Path]) -> list[str]:
    """`cmd` run inside a jail where only `writable` can be written."""
    out = [sys.executable, "-m", "ksearch.gpu.jail"]
    for d in writable:
        out += ["--rw", str(d)]
    return [*out, "--", *cmd]


if __name__ == "__main__":
    main(sys.argv[1:])
