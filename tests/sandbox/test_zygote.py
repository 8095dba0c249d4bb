"""Workers forked from a zygote (gpu/jail/zygote.py), through the real sandbox: they evaluate as workers started anew
do, start in a fraction of the time, cannot reach the zygote from candidate code, and a zygote that dies leaves
the pool starting workers the usual way. Real processes, real jail where the machine has one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail import zygote
from ksearch.gpu.jail.zygote_client import RUNTIME_ENV, Zygote, import_env
from ksearch.gpu.sandbox.local import LocalSandbox, SandboxError
from ksearch.gpu.task import Task
from ksearch.worldmodel.models import Candidate

pytestmark = pytest.mark.anyio
NO_JAIL = jail.unavailable_reason()
ISOLATIONS = [
    "none",
    pytest.param("namespaces", marks=pytest.mark.skipif(NO_JAIL is not None, reason=str(NO_JAIL))),
]


@pytest.fixture
def own_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zygote of this test's own: a variable the worker environment keeps, read by no one, makes its key."""
    monkeypatch.setenv("TORCH_KSEARCH_TEST_ZYGOTE", uuid.uuid4().hex)
    monkeypatch.setenv("KSEARCH_FORK_WORKERS", "1")


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_forked_workers_evaluate_as_started_ones_do(
    tmp_path: Path,
    affine: Task,
    cand: Any,
    st: Any,
    own_zygote: None,
    monkeypatch: pytest.MonkeyPatch,
    isolation: str,
) -> None:
    results = {}
    for fork in ("1", "0"):
        monkeypatch.setenv("KSEARCH_FORK_WORKERS", fork)
        sb = LocalSandbox(scratch_dir=tmp_path / fork, call_timeout_s=60.0, isolation=isolation)
        w = sb.pool.workers[0]
        try:
            ev = await sb.evaluate(cand("good_triton"), affine, st("small"))
            assert ev.status == "ok", ev.error
            assert w.hello is not None
            pid = w.hello["pid"]  # the launcher's, when jailed
            results[fork] = ev
            if fork == "1":
                assert w.zygote is not None and w.zygote.forks >= 1
                assert _comm(pid) == (zygote.JAIL_NAME if sb.jailed else zygote.WORKER_NAME)
                assert "ksearch.gpu.jail.zygote" in _cmdline(pid)
                # a second sandbox of the same environment forks from the same zygote, started by now: the
                # first evaluation's wait for its worker is a fork's
                other = LocalSandbox(scratch_dir=tmp_path / "other", call_timeout_s=60.0, isolation=isolation)
                try:
                    assert other.pool.workers[0].zygote is w.zygote
                    results[fork] = await other.evaluate(cand("good_triton"), affine, st("small"))
                    assert results[fork].status == "ok" and w.zygote.forks >= 2
                finally:
                    await other.close()
            else:
                assert w.zygote is None and "ksearch.gpu.worker.main" in _cmdline(pid)
        finally:
            await sb.close()
    forked, started = results["1"], results["0"]
    assert [r.max_abs_err for r in forked.correctness] == [r.max_abs_err for r in started.correctness]
    assert forked.seconds_by_step["wait_for_worker"] < started.seconds_by_step["wait_for_worker"]


PROBE = """
import json, os, socket, torch

def probe():
    seen = {"fds": {}, "sent": []}
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        kind = None
        if target.startswith("socket:"):
            s = socket.socket(fileno=os.dup(fd))
            kind = s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
            req = {"req": 1, "cmd": [os.sys.executable, "-m", "ksearch.gpu.worker.main"], "env": {}, "cwd": "/", "keep": []}
            try:  # ask whatever is at the other end to fork a worker of this candidate's choosing
                socket.send_fds(s, [json.dumps(req).encode()], [0, 1, 2])
                seen["sent"].append(fd)
            except OSError as e:
                pass
            s.close()
        seen["fds"][fd] = [target.split(":")[0], kind]
    seen["zygotes"] = []
    for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"ksearch.gpu.jail.zygote" in f.read() and open(f"/proc/{pid}/comm").read().strip() == "python":
                    seen["zygotes"].append(int(pid))
        except OSError:
            continue
    return seen

class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("PROBE" + json.dumps(probe(), separators=(",", ":")) + "END")
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_a_candidate_cannot_reach_the_zygote(
    tmp_path: Path, affine: Task, cand: Any, st: Any, own_zygote: None, isolation: str
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, isolation=isolation)
    w = sb.pool.workers[0]
    try:
        ev = await sb.correctness(Candidate.of(PROBE, "triton"), affine, st("small"))
        found = re.search(r"PROBE(\{.*?\})END", ev.error or "")
        assert found, f"the probe did not report: {ev.status}: {ev.error}"
        seen = json.loads(found.group(1))
        assert w.zygote is not None and w.zygote.pid is not None and w.zygote.forks == 1
        forks = w.zygote.forks
        # its descriptors: its pipes, the worker's protocol copy, files it opened; never the zygote's socket
        kinds = {v[1] for v in seen["fds"].values() if v[0] == "socket"}
        assert 5 not in kinds, seen  # SOCK_SEQPACKET: the zygote's kind
        time.sleep(0.5)
        assert w.zygote.forks == forks and w.zygote.failed is None
        if sb.jailed:
            assert seen["zygotes"] == [], seen  # its own PID namespace: no zygote to see
        else:
            assert seen["zygotes"] == [w.zygote.pid] or w.zygote.pid in seen["zygotes"]  # seen, not reached
        ev = await sb.evaluate(cand("good_triton"), affine, st("small"))
        assert ev.status == "ok", ev.error
    finally:
        await sb.close()


async def test_a_zygote_that_dies_leaves_workers_starting_the_usual_way(
    tmp_path: Path, affine: Task, cand: Any, st: Any, own_zygote: None
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, fresh_per_candidate=True)
    w = sb.pool.workers[0]
    try:
        assert (await sb.evaluate(cand("good_triton"), affine, st("small"))).status == "ok"
        assert w.zygote is not None and w.zygote.pid is not None and w.hello is not None
        forked = w.hello["pid"]
        os.kill(w.zygote.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while w.zygote.failed is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert w.zygote.failed is not None and "exited" in w.zygote.failed
        ev = await sb.evaluate(cand(cand("good_triton").source + "\n# another\n"), affine, st("small"))
        assert ev.status == "ok", ev.error
        assert w.hello["pid"] != forked and "ksearch.gpu.worker.main" in _cmdline(w.hello["pid"])
    finally:
        await sb.close()


def test_only_what_is_read_after_start_may_differ() -> None:
    base = {"PATH": "/usr/bin", "OMP_WAIT_POLICY": "PASSIVE", "HOME": "/a", "KSEARCH_WORKER": "{}"}
    z = Zygote(base, 10.0)
    try:
        worker = [sys.executable, "-m", "ksearch.gpu.worker.main"]
        assert z.fits(worker, {**base, "HOME": "/b", "KSEARCH_WORKER": '{"slot": 1}'})
        assert not z.fits(worker, {**base, "OMP_WAIT_POLICY": "ACTIVE"})  # read by OpenMP when torch loads
        assert not z.fits(worker, {k: v for k, v in base.items() if k != "PATH"})
        assert not z.fits([sys.executable, "-m", "ksearch.gpu.timing.ncu"], base)
        assert not z.fits(["/other/python", "-m", "ksearch.gpu.worker.main"], base)
        assert "HOME" in RUNTIME_ENV and import_env(base) == {
            "PATH": "/usr/bin",
            "OMP_WAIT_POLICY": "PASSIVE",
        }
    finally:
        z.close()


def test_a_bad_fork_setting_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSEARCH_FORK_WORKERS", "yes")
    with pytest.raises(SandboxError, match=r"KSEARCH_FORK_WORKERS='yes': accepted values are 1 .* and 0"):
        LocalSandbox(scratch_dir=tmp_path)


def test_a_zygote_whose_process_ends_without_a_word_goes_and_takes_its_directory(tmp_path: Path) -> None:
    """The ksearch process is killed (no atexit, nothing closed): its zygote sees its socket end, removes its own
    directory and exits; nothing of it is left."""
    code = f"""
import asyncio, os, sys
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.tasks import load_task
async def main():
    sb = LocalSandbox(scratch_dir={str(tmp_path / "sb")!r}, call_timeout_s=60.0)
    z = sb.pool.workers[0].zygote
    await sb.pool.workers[0].ensure_started()
    print(z.pid, z.home, flush=True)
    os.kill(os.getpid(), 9)
asyncio.run(main())
"""
    env = {**os.environ, "KSEARCH_FORK_WORKERS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    pid_text, home = out.stdout.split()
    home_dir = Path(home)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (home_dir.exists() or _alive(int(pid_text))):
        time.sleep(0.1)
    assert not home_dir.exists() and not _alive(int(pid_text))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
