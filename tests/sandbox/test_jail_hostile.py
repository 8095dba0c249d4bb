"""Hostile candidates against the jail, through the real sandbox (no mocks): each tries to reach something a
candidate must not reach, or to take more than its share of the machine, and is caught with its kind; the
next candidate after it evaluates correctly.

What they try: the environment's secrets and the /proc of the host; TCP to listeners this test opens on the
host's 127.0.0.1 and ::1, an abstract Unix socket, an external address; a file planted in $HOME, one in
/tmp, the search database, the repository; a write into the draws store; a fork bomb, a disk filler (scratch
and /dev/shm), a host-memory hog; with a GPU, the other GPUs of the machine. Skipped, with the kernel's reason, where the jail cannot be
built (no unprivileged user namespaces).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.limits import Limits
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.worldmodel.models import Candidate, EvalSettings, Evaluation

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        jail.unavailable_reason() is not None, reason=f"no jail on this machine: {jail.unavailable_reason()}"
    ),
]
TOKEN = uuid.uuid4().hex[:12]
SECRET = f"sk-jail-probe-{TOKEN}"
LIMITS = Limits(processes=64, disk_bytes=64 << 20, cache_growth_bytes=256 << 20)

# Every probe raises its findings: the report comes back in the evaluation's error (one line, < 1500 chars)
REPORT = """
def report(seen):
    raise RuntimeError("PROBE" + json.dumps(seen, separators=(",", ":")) + "END")
"""


def probe_source(body: str, **values: Any) -> str:
    """A candidate whose forward runs `body` (which fills `seen`) and reports it."""
    head = "import json, os, socket, errno, time\nimport torch\n" + REPORT
    consts = "".join(f"{k.upper()} = {v!r}\n" for k, v in values.items())
    fn = "def probe():\n    seen = {}\n" + "".join(f"    {ln}\n" for ln in body.strip().splitlines())
    fn += "    return seen\n"
    model = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        report(probe())\n"
    return head + consts + fn + model


def seen_by(ev: Evaluation) -> dict[str, Any]:
    found = re.search(r"PROBE(\{.*?\})END", ev.error or "")
    assert found, f"the probe did not report: {ev.status}: {ev.error}"
    return dict(json.loads(found.group(1)))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sb(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    """A jailed sandbox with small limits, started with secrets in its parent's environment."""
    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "KSEARCH_JAIL_PROBE")}
    os.environ["ANTHROPIC_API_KEY"] = SECRET
    os.environ["KSEARCH_JAIL_PROBE"] = SECRET  # a name the allow-list would not drop for looking secret
    sandbox = LocalSandbox(
        scratch_dir=tmp_path_factory.mktemp("hostile"),
        call_timeout_s=60.0,
        # the hog holds 10 GiB; a GPU worker (CUDA, and torch.compile's workers for the baselines) needs more
        # than a CPU one
        memory_limit_gb=8.0 if torch.cuda.is_available() else 2.5,
        isolation="namespaces",
        limits=LIMITS,
    )
    try:
        yield sandbox
    finally:
        await sandbox.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _settings() -> EvalSettings:
    return EvalSettings(seed=5, trials=1, workloads=["small"], min_reps=3, max_reps=5, time_budget_s=0.5)


async def _probe(sb: LocalSandbox, task: Task, source: str) -> dict[str, Any]:
    ev = await sb.correctness(Candidate.of(source, "triton"), task, _settings())
    return seen_by(ev)


async def _then_correct(sb: LocalSandbox, task: Task, cand: Any) -> None:
    ev = await sb.evaluate(cand("good_triton"), task, _settings())
    assert ev.status == "ok", ev.error


async def test_the_sandbox_reports_the_full_jail(sb: LocalSandbox) -> None:
    assert sb.jailed and sb.isolation == jail.ISOLATED
    for word in ("PID", "network", "new root", "own GPU", "limits"):
        assert word in sb.isolation


# ---------------------------------------------------------------------------------------------- secrets


@pytest.mark.slow
async def test_no_secret_in_the_environment_or_in_any_process_it_can_see(
    sb: LocalSandbox, affine: Task, cand: Any
) -> None:
    body = """
seen["env"] = sorted(k for k, v in os.environ.items() if SECRET in v)
blobs = {}
for pid in [d for d in os.listdir("/proc") if d.isdigit()] + [str(HOST_PID)]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            blobs[pid] = SECRET.encode() in f.read()
    except OSError as e:
        blobs[pid] = type(e).__name__
seen["environ"] = blobs
seen["pids"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
seen["init_fds"] = []  # init holds the socket the pool asks its checks on: not dumpable, not for us to open
for fd in range(8):
    try:
        os.close(os.open(f"/proc/1/fd/{fd}", os.O_RDONLY))
        seen["init_fds"].append("opened")
    except OSError as e:
        seen["init_fds"].append(type(e).__name__)
try:
    os.kill(1, 15)  # PID 1 of a namespace ignores a signal it has no handler for
    seen["init_after_sigterm"] = os.path.exists("/proc/1")
except OSError as e:
    seen["init_after_sigterm"] = type(e).__name__
try:
    with open(f"/proc/{HOST_PID}/cmdline", "rb") as f:
        seen["host_cmdline"] = f.read().decode(errors="replace")[:80]
except OSError as e:
    seen["host_cmdline"] = type(e).__name__
"""
    seen = await _probe(sb, affine, probe_source(body, secret=SECRET, host_pid=os.getpid()))
    assert seen["env"] == []
    assert True not in seen["environ"].values(), seen["environ"]
    assert max(seen["pids"]) <= 8 and 1 in seen["pids"], seen["pids"]  # init, the worker and its children
    assert "opened" not in seen["init_fds"] and seen["init_after_sigterm"] is True, seen
    assert (
        seen["host_cmdline"] in ("FileNotFoundError", "ProcessLookupError")
        or "pytest" not in seen["host_cmdline"]
    )
    await _then_correct(sb, affine, cand)


# ---------------------------------------------------------------------------------------------- network


@contextlib.contextmanager
def _listener(family: socket.AddressFamily, host: str) -> Iterator[socket.socket | None]:
    try:
        s = socket.create_server((host, 0), family=family)
    except OSError:
        yield None  # this machine has no such address (no IPv6 in the container)
        return
    s.setblocking(False)
    try:
        yield s
    finally:
        s.close()


async def test_no_network_neither_the_hosts_loopback_nor_outside(
    sb: LocalSandbox, affine: Task, cand: Any
) -> None:
    abstract = f"\0ksearch-jail-probe-{TOKEN}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract)
    unix.listen()
    unix.setblocking(False)
    with _listener(socket.AF_INET, "127.0.0.1") as v4, _listener(socket.AF_INET6, "::1") as v6:
        targets = {"external": ["1.1.1.1", 443]}
        if v4 is not None:
            targets["v4"] = ["127.0.0.1", v4.getsockname()[1]]
        if v6 is not None:
            targets["v6"] = ["::1", v6.getsockname()[1]]
        body = """
for name, (host, port) in TARGETS.items():
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        seen[name] = "connected"
    except OSError as e:
        seen[name] = errno.errorcode.get(e.errno, type(e).__name__)
    s.close()
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    u.connect(ABSTRACT)
    seen["abstract"] = "connected"
except OSError as e:
    seen["abstract"] = errno.errorcode.get(e.errno, type(e).__name__)
seen["interfaces"] = [n for _, n in socket.if_nameindex()]
"""
        seen = await _probe(sb, affine, probe_source(body, targets=targets, abstract=abstract))
        for s in (v4, v6, unix):
            if s is not None:
                with pytest.raises(BlockingIOError):  # nobody got through to the host's listeners
                    s.accept()
    unix.close()
    assert seen["interfaces"] == ["lo"]
    assert seen["external"] == "ENETUNREACH", seen  # no route at all, not a firewall's refusal
    assert seen["abstract"] == "ECONNREFUSED", seen  # abstract Unix sockets are per network namespace
    for name in ("v4", "v6"):
        if name in targets:
            assert seen[name] == "ECONNREFUSED", seen  # the jail's own loopback: nothing listens there
    await _then_correct(sb, affine, cand)


# ---------------------------------------------------------------------------------------------- files


async def test_the_draws_store_is_read_only_to_a_candidate(sb: LocalSandbox, affine: Task, cand: Any) -> None:
    """A kept input draw serves later candidates: a candidate that could write one could hand a wrong kernel
    inputs of its choosing. It may read the store, never write, replace or remove a file there."""
    draws = sb.pool.workers[0].draws
    draws.mkdir(parents=True, exist_ok=True)
    kept = draws / f"kept-{TOKEN}.pt"
    kept.write_bytes(b"a draw")
    body = """
for name, path in TARGETS.items():
    try:
        with open(path, "wb") as f:
            f.write(b"planted")
        seen[name] = "written"
    except OSError as e:
        seen[name] = type(e).__name__
try:
    os.unlink(TARGETS["existing"])
    seen["unlink"] = "removed"
except OSError as e:
    seen["unlink"] = type(e).__name__
with open(TARGETS["existing"], "rb") as f:
    seen["read"] = f.read().decode()
"""
    targets = {"new": str(draws / f"planted-{TOKEN}.pt"), "existing": str(kept)}
    seen = await _probe(sb, affine, probe_source(body, targets=targets))
    assert seen["new"] == seen["existing"] == seen["unlink"] == "OSError", seen  # a read-only file system
    assert seen["read"] == "a draw"
    assert kept.read_bytes() == b"a draw" and not (draws / f"planted-{TOKEN}.pt").exists()
    kept.unlink()
    await _then_correct(sb, affine, cand)


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Files a candidate must not read: in $HOME, in /tmp, a search database, the repository's own."""
    home = Path.home() / f".ksearch-jail-probe-{TOKEN}"
    tmp = Path(f"/tmp/ksearch-jail-probe-{TOKEN}")
    db = tmp_path / ".ksearch" / "ksearch.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE secret (v TEXT)")
    con.execute("INSERT INTO secret VALUES (?)", (SECRET,))
    con.commit()
    con.close()
    for p in (home, tmp):
        p.write_text(SECRET)
    try:
        yield {
            "home": str(home),
            "tmp": str(tmp),
            "db": str(db),
            "readme": str(ROOT / "README.md"),
            "git": str(ROOT / ".git" / "config"),
            "tests": str(ROOT / "tests" / "conftest.py"),
        }
    finally:
        home.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


async def test_no_file_outside_its_view(
    sb: LocalSandbox, affine: Task, cand: Any, planted: dict[str, str]
) -> None:
    body = """
for name, path in PATHS.items():
    try:
        with open(path, "rb") as f:
            seen[name] = "read: " + str(SECRET.encode() in f.read())
    except OSError as e:
        seen[name] = type(e).__name__
home = os.path.dirname(PATHS["home"])
seen["home_listing"] = sorted(os.listdir(home)) if os.path.isdir(home) else None
seen["tmp_listing"] = sorted(os.listdir("/tmp"))
seen["checkout"] = sorted(os.listdir(CHECKOUT)) if os.path.isdir(CHECKOUT) else None
for name, path in WRITES.items():
    try:
        with open(path, "w") as f:
            f.write("x")
        seen["wrote_" + name] = True
    except OSError as e:
        seen["wrote_" + name] = type(e).__name__
"""
    writes = {"home": planted["home"] + ".w", "tmp": planted["tmp"] + ".w", "db": planted["db"] + ".w"}
    source = probe_source(body, paths=planted, secret=SECRET, checkout=str(ROOT), writes=writes)
    seen = await _probe(sb, affine, source)
    for name in planted:
        assert seen[name] in ("FileNotFoundError", "PermissionError"), (name, seen[name])
    assert seen["home_listing"] is None or Path(planted["home"]).name not in seen["home_listing"]
    assert Path(planted["tmp"]).name not in seen["tmp_listing"]
    # of the checkout only the package itself, a virtual environment inside it and the path to the task file
    package = {"ksearch", "gpu", "tools", "server", "worldmodel", "pyproject.toml", ".venv", "venv", "tests"}
    assert seen["checkout"] is None or set(seen["checkout"]) <= package, seen["checkout"]
    for name, path in writes.items():
        assert seen["wrote_" + name] in ("OSError", "FileNotFoundError", "PermissionError"), seen
        assert not Path(path).exists()
    await _then_correct(sb, affine, cand)


# ---------------------------------------------------------------------------------------------- limits


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("fork_bomb", "process count"),
        ("scratch_filler", "scratch disk"),
        ("shm_filler", "scratch disk"),
        ("host_hog", "host memory"),
    ],
    ids=["fork_bomb", "scratch_filler", "shm_filler", "memory_hog"],
)
@pytest.mark.slow
async def test_a_resource_hog_is_stopped_with_its_kind_and_the_next_candidate_runs(
    sb: LocalSandbox, affine: Task, cand: Any, source: str, kind: str
) -> None:
    ev = await sb.correctness(cand(source), affine, _settings())
    assert ev.status == "crash", (ev.status, ev.error)
    assert f"resource_limit: {kind}" in (ev.error or ""), ev.error
    await _then_correct(sb, affine, cand)


# ---------------------------------------------------------------------------------------------- GPU


GPU_PROBE = """
import glob
seen["nodes"] = sorted(glob.glob("/dev/nvidia*"))
seen["count"] = torch.cuda.device_count()
seen["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
seen["others"] = {}
for n in range(16):
    path = f"/dev/nvidia{n}"
    if path in seen["nodes"]:
        continue
    try:
        os.close(os.open(path, os.O_RDWR))
        seen["others"][path] = "opened"
    except OSError as e:
        seen["others"][path] = type(e).__name__
"""


@pytest.mark.gpu
async def test_a_gpu_worker_sees_its_own_gpu_alone(affine: Task, cand: Any, tmp_path: Path) -> None:
    sandbox = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=120.0, isolation="namespaces")
    try:
        seen = await _probe(sandbox, affine, probe_source(GPU_PROBE))
        gpus = [n for n in seen["nodes"] if re.fullmatch(r"/dev/nvidia\d+", n)]
        assert len(gpus) == 1 and seen["count"] == 1, seen
        assert set(seen["others"].values()) <= {"FileNotFoundError"}, seen["others"]
        await _then_correct(sandbox, affine, cand)
    finally:
        await sandbox.close()
