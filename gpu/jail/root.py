"""The system calls that build a jail: its new root and its loopback (gpu/jail/launch.py decides when).

The root is built the way bubblewrap builds one, without privileges: inside the jail's own user and mount
namespaces a tmpfs on /tmp becomes the root for a moment, the host's tree moving under it to /oldroot; the
view's paths are bound from /oldroot into a second tmpfs, /newroot, which then becomes the root, and the
host's tree is detached. What the jail shows is gpu/jail/view.py's list, nothing else.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import platform
import socket
import struct

from ksearch.gpu.jail.view import View

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
# mount_setattr(2) has one number on every architecture that has it (the generic table); pivot_root(2) not
SYS_MOUNT_SETATTR = 442
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP, IFF_RUNNING = 0x1, 0x40

STAGE = "/tmp"  # where the first tmpfs goes (the host's /tmp stays readable as /oldroot/tmp)
OLD, NEW = "/oldroot", "/newroot"


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


def unshare(flags: int, what: str) -> None:
    _check(_libc.unshare(flags), f"unshare({what})")


def map_ids(uid: int, gid: int, inside: int = 0) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{inside} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{inside} {gid} 1")


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            src.encode() if src else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def setattr_(path: str, set_: int, clr: int = 0, recursive: bool = True) -> None:
    attr = _MountAttr(set_, clr, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    rc = _libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr))
    _check(rc, f"mount_setattr {path}")


def _umount(path: str) -> None:
    _check(_libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def _pivot(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(f"pivot_root: no system call number known for {platform.machine()}")
    _check(_libc.syscall(number, new_root.encode(), put_old.encode()), f"pivot_root {new_root}")


def loopback_up() -> None:
    """Bring up `lo` of the jail's new network namespace: its own, private loopback (Nsight Compute talks
    to the process it profiles over it). No other interface exists there: nothing outside is reachable."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifr)[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP | IFF_RUNNING))


def _mount_point(dest: str, is_dir: bool) -> None:
    """Create what a bind mounts on, in the new root's tmpfs (never inside a bound host folder: there the
    real path exists already)."""
    if is_dir:
        if not os.path.isdir(dest):
            os.makedirs(dest, exist_ok=True)
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if not os.path.lexists(dest):
        with open(dest, "w"):
            pass


def _dev(shm_bytes: int | None) -> None:
    """A /dev of the jail's own: a few nodes bound from the host (the view adds GPU nodes), a private
    /dev/shm, the usual links into /proc."""
    dev = NEW + "/dev"
    os.mkdir(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    os.mkdir(dev + "/shm")
    size = f",size={shm_bytes}" if shm_bytes else ""
    mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777{size}")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{dev}/{name}")


def build_root(view: View, *, shm_bytes: int | None, cwd: str, fallback_cwd: str | None) -> None:
    """Make `view` this mount namespace's whole filesystem and enter it (`cwd` when it is shown there,
    else `fallback_cwd`, else /). Run by the jail's init, inside its PID namespace (for /proc)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here leaks back to the host
    mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    os.mkdir(STAGE + OLD)
    os.mkdir(STAGE + NEW)
    _pivot(STAGE, STAGE + OLD)
    os.chdir("/")
    mount("tmpfs", NEW, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    os.mkdir(NEW + "/proc")
    # the PID namespace's own /proc (mounted while the host's is still visible, as the kernel requires)
    mount("proc", NEW + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(NEW + "/sys")
    mount(OLD + "/sys", NEW + "/sys", None, MS_BIND | MS_REC)
    setattr_(NEW + "/sys", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
    _dev(shm_bytes)
    for path, mode in view.binds:
        src, dest = OLD + path, NEW + path
        _mount_point(dest, os.path.isdir(src))
        mount(src, dest, None, MS_BIND | MS_REC)
        if mode == "ro":
            setattr_(dest, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        elif mode == "rw":
            setattr_(dest, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
    for link, target in sorted(view.links.items()):
        if not os.path.lexists(NEW + link):
            os.makedirs(os.path.dirname(NEW + link), exist_ok=True)
            os.symlink(target, NEW + link)
    for path, text in view.files.items():
        os.makedirs(os.path.dirname(NEW + path), exist_ok=True)
        with open(NEW + path, "w") as f:
            f.write(text)
    _umount(OLD)  # the host's tree, gone from this namespace
    setattr_(NEW, MOUNT_ATTR_RDONLY, recursive=False)  # the skeleton; its binds keep their own flags
    setattr_(NEW + "/dev", MOUNT_ATTR_RDONLY, recursive=False)
    os.chdir(NEW)
    _pivot(".", ".")  # the new root stacks on the staging one, which is then detached
    _umount(".")
    for d in (cwd, fallback_cwd, "/"):
        if d and (d == "/" or view.covers(d)):
            os.chdir(d)
            break
