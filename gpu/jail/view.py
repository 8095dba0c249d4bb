"""What a jailed process sees of the host's filesystem: the one list of what ksearch.gpu.jail.launch binds into
the empty root it builds. Standard library only: the jail's launcher imports it before anything else.

Read-only, unless said otherwise:
- the Python environment: sys.prefix, sys.base_prefix and every entry of sys.path (site-packages,
  PYTHONPATH, what .pth files add) — except a source checkout of ksearch, of which only the package's
  folders (ksearch/ and its four rooms) and pyproject.toml are shown, never the repository's other files
  (its .ksearch/ database, tests, bench results);
- the system: /usr, /bin, /sbin, /lib*, the CUDA toolkit (CUDA_HOME, nvcc's and ncu's folders,
  /opt/nvidia), the library folders ld.so is configured with and LD_LIBRARY_PATH, and of /etc only what
  the loader, the C library and the compilers read (no passwd of the host: a two-line one is written);
- /sys; a /proc of the jail's own PID namespace; a /dev of its own with null, zero, full, random,
  urandom, a size-limited /dev/shm and, for a GPU process, the NVIDIA control nodes and its own GPU's
  node (/dev/nvidiaN) alone;
- the task's own files (the file, a GPU MODE folder and its helpers, FlashInfer-Bench safetensors);
- read-write: its scratch directory and the compiler caches; /tmp and /dev/shm are size-limited tmpfs
  of its own.

Not there: the user's home (but the virtual environment or interpreter living in it), other users' files,
/tmp and /var of the host, the search database, the rest of the checkout.

How the list was derived, and how to check it after a toolchain changes: run what a jail runs unjailed
(`LocalSandbox(isolation="none")` evaluating and compiling a candidate, nvcc, a torch extension build,
ncu) under `strace -f -e trace=%file,execve -o LOG` and keep the paths opened outside the scratch
directory; `tests/sandbox/test_jail_hostile.py` checks that every file a jailed worker has mapped
(/proc/self/maps) comes from this view, and `bench/jail_gpu.py` that Triton, NVRTC, a CUDA extension and
ncu work inside it on a GPU.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ksearch.about import IMPORT_ROOT, ROOMS, SOURCE_ROOT
from ksearch.gpu.jail.smi import query_gpus

if TYPE_CHECKING:
    from ksearch.gpu.task import Task

Mode = Literal["ro", "rw", "dev"]

# Of /etc, what the dynamic loader, the C library (locale, time zone, name service) and the compilers
# (Debian's alternatives: cc, c++) read. Written, not bound: passwd, group, hosts (see `_FILES`).
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "nsswitch.conf",
    "host.conf",
    "localtime",
    "timezone",
    "alternatives",
    "os-release",
    "lsb-release",
    "debian_version",
    "redhat-release",
    "system-release",
    "protocols",
    "services",
)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/nvidia")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# A GPU process needs these beside its own /dev/nvidiaN (MIG and IMEX capabilities are folders)
GPU_SHARED_NODES = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    "/dev/nvidia-caps",
    "/dev/nvidia-caps-imex-channels",
)
_FILES = {
    "/etc/passwd": "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "/etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "/etc/hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
}


@dataclass
class View:
    """What one jail shows: host paths bound at the same place, the symbolic links on the way to them and
    files written into the new root."""

    binds: list[tuple[str, Mode]] = field(default_factory=list)  # real host paths, parents first
    links: dict[str, str] = field(default_factory=dict)  # path inside -> link target, as on the host
    files: dict[str, str] = field(default_factory=lambda: dict(_FILES))

    def covers(self, path: str) -> bool:
        """Whether `path` (a real path) is visible inside."""
        return any(path == b or path.startswith(b.rstrip("/") + "/") for b, _ in self.binds)


def resolve(path: str, links: dict[str, str]) -> str:
    """The real path of `path`, recording every symbolic link met on the way (its path -> its target), so
    that the jail can recreate them and a path reached through a link works inside as it does outside."""
    parts = [p for p in path.split("/") if p]
    cur = "/"
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, "too many symbolic links", path)
            target = os.readlink(nxt)
            links[nxt] = target
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                cur = "/"
            continue
        cur = nxt
    return cur


def _usable(path: str) -> bool:
    """A sys.path / PYTHONPATH / LD_LIBRARY_PATH entry worth binding: absolute, existing, and never the
    whole filesystem or the user's home (bound, either would show everything this view keeps out)."""
    if not path or not os.path.isabs(path) or not os.path.exists(path):
        return False
    real = os.path.realpath(path)
    home = os.path.realpath(os.path.expanduser("~"))
    return real not in ("/", home) and not home.startswith(real.rstrip("/") + "/")


def ksearch_paths() -> list[str]:
    """The ksearch package itself: of a source checkout, its package folders and pyproject.toml only."""
    if SOURCE_ROOT is None:
        return [str(IMPORT_ROOT / "ksearch")]
    return [str(SOURCE_ROOT / p) for p in ("ksearch", *ROOMS, "pyproject.toml")]


def in_package(path: str) -> bool:
    """Whether `path` lies inside the ksearch package (a built-in task): every jail shows it."""
    real = os.path.realpath(path)
    return any(real == p or real.startswith(p + "/") for p in map(os.path.realpath, ksearch_paths()))


def python_paths(skip_first: bool = True) -> list[str]:
    """The interpreter, its standard library and every import path (but a ksearch checkout, which
    `ksearch_paths` shows in part). `skip_first`: sys.path[0] is the launcher's cwd under `python -m`."""
    entries = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    entries.append(os.path.dirname(os.path.realpath(sys.executable)))
    entries += sys.path[1:] if skip_first else sys.path
    entries += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    checkout = str(SOURCE_ROOT) if SOURCE_ROOT is not None else None
    out = []
    for p in entries:
        if not _usable(p):
            continue
        real = os.path.realpath(p)
        if checkout is not None and real == checkout:
            continue  # the checkout as an import path: its package folders only (ksearch_paths)
        out.append(p)
    return out + ksearch_paths()


def _ld_conf_dirs(conf: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    """The library folders ld.so.conf names (following `include`)."""
    out: list[str] = []
    try:
        lines = Path(conf).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include ") and depth < 4:
            pattern = line.split(None, 1)[1]
            if not os.path.isabs(pattern):
                pattern = os.path.join(os.path.dirname(conf), pattern)
            for inc in sorted(glob.glob(pattern)):
                out += _ld_conf_dirs(inc, depth + 1)
        elif line.startswith("/"):
            out.append(line)
    return out


def system_paths() -> list[str]:
    """The system's programs and libraries, the CUDA toolkit, Nsight Compute and the pieces of /etc."""
    out = [p for p in SYSTEM if os.path.lexists(p)]
    out += [f"/etc/{name}" for name in ETC if os.path.lexists(f"/etc/{name}")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if _usable(os.environ.get(var, "")):
            out.append(os.environ[var])
    # nvcc: its toolkit; ncu: its own folder; ninja (torch extension builds): the folder holding it; the C and
    # C++ compilers: compiler_paths
    for tool, up in (("nvcc", 2), ("ncu", 1), ("ninja", 1)):
        found = shutil.which(tool)
        if found:
            real = os.path.realpath(found)
            for _ in range(up):
                real = os.path.dirname(real)
            if _usable(real):
                out.append(real)
    out += compiler_paths()
    libs = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) + _ld_conf_dirs()
    out += [d for d in libs if _usable(d) and os.path.isdir(d)]
    return out


def compiler_paths() -> list[str]:
    """The host C/C++ compilers Triton, nvcc and torch's extension builds call, where they live outside the
    system folders (e.g. CC=/opt/gcc/bin/gcc): the whole installation, whose bin/ finds its own lib/."""
    out = []
    named = [os.environ.get(v, "") for v in ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN")]
    for exe in named + [shutil.which(t) or "" for t in ("gcc", "g++", "cc", "c++")]:
        exe = shutil.which(exe) or "" if exe and not os.path.isabs(exe) else exe
        if not exe or not os.path.exists(exe):
            continue
        real = os.path.realpath(exe)
        prefix = (
            os.path.dirname(os.path.dirname(real)) if os.path.basename(os.path.dirname(real)) == "bin" else ""
        )
        for p in (exe, real, prefix):
            if p and _usable(p) and not any(p == s or p.startswith(s + "/") for s in SYSTEM):
                out.append(p)
    return list(dict.fromkeys(out))


def task_paths(task: Task) -> list[str]:
    """The files a task's runtime reads: its file or folder, a GPU MODE folder's helpers found elsewhere,
    FlashInfer-Bench inputs stored as safetensors."""
    out = [str(Path(task.source_path).resolve())]
    modules = task.extras.get("modules")
    if isinstance(modules, dict):
        out += [str(Path(p).resolve()) for p in modules.values() if isinstance(p, str)]
    for w in task.workloads:
        inputs = w.params.get("inputs")
        if isinstance(inputs, dict):
            for desc in inputs.values():
                if isinstance(desc, dict) and desc.get("type") == "safetensors" and desc.get("path"):
                    out.append(str(Path(desc["path"]).resolve()))
    return [p for p in dict.fromkeys(out) if os.path.exists(p)]


def build(writable: list[str], caches: list[str], readable: list[str], devices: list[str]) -> View:
    """The view of one jail: the system and Python environment, plus `readable` (a task's files),
    `writable` (scratch), `caches` (read-write) and `devices` (GPU nodes)."""
    view = View()
    wanted: list[tuple[str, Mode]] = [(p, "ro") for p in system_paths() + python_paths() + readable]
    wanted += [(p, "rw") for p in writable + caches]
    wanted += [(p, "dev") for p in list(DEVICES) + devices]
    if devices:
        wanted += [(p, "dev") for p in GPU_SHARED_NODES]
    real: dict[str, Mode] = {}
    for p, mode in wanted:
        if not os.path.lexists(p):
            continue
        r = resolve(os.path.abspath(p), view.links)
        if os.path.exists(r) and (r not in real or mode == "rw"):
            real[r] = mode
    for p, mode in sorted(real.items(), key=lambda kv: (kv[0].count("/"), kv[0])):
        parents = [(b, m) for b, m in view.binds if p.startswith(b.rstrip("/") + "/")]
        if parents and parents[-1][1] == mode:
            continue  # shown already, the same way, by a bound parent
        view.binds.append((p, mode))
    # a link inside a bound folder is there already; /dev is the jail's own
    view.links = {k: v for k, v in view.links.items() if not view.covers(k) and not k.startswith("/dev/")}
    return view


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as nvidia-smi numbers it, with what a jail needs to show it alone."""

    index: str
    uuid: str | None
    node: str  # /dev/nvidiaN, N the driver's minor number (not always the index)


@lru_cache(maxsize=1)
def gpu_devices() -> dict[str, GpuDevice]:
    """Every GPU nvidia-smi lists, by index; {} without one. The device node comes from the driver's
    /proc/driver/nvidia/gpus/<bus id>/information ("Device Minor"), the index when that is unreadable."""
    found: dict[str, GpuDevice] = {}
    for cols in query_gpus("index,uuid,pci.bus_id"):
        if len(cols) < 3 or not cols[0].isdigit():
            continue
        index, uuid, bus = cols
        minor = index
        info = Path("/proc/driver/nvidia/gpus") / bus[-12:].lower() / "information"
        try:
            m = re.search(r"Device Minor:\s*(\d+)", info.read_text())
            minor = m.group(1) if m else index
        except OSError:
            pass
        found[index] = GpuDevice(
            index, uuid if uuid.startswith(("GPU-", "MIG-")) else None, f"/dev/nvidia{minor}"
        )
    return found


def gpu_view(index: str) -> tuple[list[str], str]:
    """(the device nodes a jail shows for nvidia-smi's GPU `index`, its CUDA_VISIBLE_DEVICES): its own node
    alone, named by UUID, since CUDA numbers only the GPUs it can open (from 0) and an index could name none.
    Where its node or its UUID cannot be told, every GPU node is shown (CUDA_VISIBLE_DEVICES still picks the
    GPU, and `bench/jail_gpu.py` reports it as a GPU not hidden)."""
    dev = gpu_devices().get(index)
    if dev is not None and dev.uuid and os.path.exists(dev.node):
        return [dev.node], dev.uuid
    every = sorted(p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p))
    return every, (dev.uuid if dev is not None and dev.uuid else index)
