"""A torch extension build killed mid-way must not hang every later build of that extension.

torch's own file baton is a lock file that only its holder removes; ksearch's workers hold it with flock, which
the kernel drops when the holder dies. Real processes, really killed; then the real sandbox's worker."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ksearch.gpu.build.baton import FlockBaton

ROOT = Path(__file__).resolve().parents[2]

# holds the baton the way a builder does, says so, then builds "forever" (until it is killed)
HOLDER = """
import sys, time
from ksearch.gpu.build.baton import FlockBaton
b = FlockBaton(sys.argv[1])
assert b.try_acquire()
print("held", flush=True)
time.sleep(600)
"""


def _holder(lock: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_a_live_builder_excludes_others_and_a_killed_one_does_not(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    p = _holder(lock)
    try:
        assert not FlockBaton(str(lock)).try_acquire()  # a live holder: wait for it
        waited = threading.Event()

        def waiter() -> None:
            FlockBaton(str(lock)).wait()
            waited.set()

        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        assert not waited.wait(0.5)  # still held
        os.kill(p.pid, signal.SIGKILL)  # killed mid-build: its lock file stays behind
        p.wait(10)
        assert lock.exists()
        assert waited.wait(10), "the waiter still waits on a dead builder's baton"
    finally:
        if p.poll() is None:
            p.kill()
    again = FlockBaton(str(lock))
    assert again.try_acquire()  # the next build goes ahead
    again.release()
    assert not lock.exists()


def test_a_lock_file_left_by_torchs_own_baton_does_not_block(tmp_path: Path) -> None:
    from torch.utils.file_baton import FileBaton

    lock = tmp_path / "lock"
    FileBaton(str(lock)).try_acquire()  # created, never released: a builder that died under torch's baton
    assert not FileBaton(str(lock)).try_acquire()  # torch's own would wait on it forever
    b = FlockBaton(str(lock))
    assert b.try_acquire()
    b.release()


def test_a_release_while_another_waits_hands_the_baton_on(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    first = FlockBaton(str(lock))
    assert first.try_acquire()
    got: list[bool] = []
    second = FlockBaton(str(lock))

    def take() -> None:
        second.wait()  # blocks on the file the first holds, which is removed on release
        got.append(second.try_acquire())

    t = threading.Thread(target=take)
    t.start()
    time.sleep(0.2)
    first.release()
    t.join(10)
    assert got == [True]  # the path's new file, not the removed one
    assert not FlockBaton(str(lock)).try_acquire()
    second.release()


GOOD = (Path(__file__).parent / "fixtures" / "candidates" / "good_triton.py").read_text()
# the affine kernel, importing only where torch's extension builds in this worker use the flock baton
PROBE = GOOD.replace(
    "BLOCK = 64",
    "BLOCK = 64\nfrom torch.utils import cpp_extension\n\n# torch's extension builds in this worker use the flock baton\n"
    'assert cpp_extension.FileBaton.__name__ == "FlockBaton", cpp_extension.FileBaton\n',
)


@pytest.mark.anyio
async def test_the_sandbox_worker_builds_under_the_flock_baton(sandbox, affine, cand, st) -> None:  # type: ignore[no-untyped-def]
    ev = await sandbox.correctness(cand(PROBE), affine, st("small"))
    assert ev.status == "ok", ev.error


def test_the_seconds_of_a_build_and_of_a_wait_are_counted(tmp_path: Path) -> None:
    from ksearch.gpu.build import baton as build_baton

    before = build_baton.seconds()
    b = FlockBaton(str(tmp_path / "lock"))
    assert b.try_acquire()
    time.sleep(0.3)
    b.release()
    assert 0.3 <= build_baton.seconds() - before < 2.0


# holds torch's build baton for 0.6 s at import, as a build of an extension does (torch's name for the baton: in
# a worker, the flock baton), then is the affine kernel
BUILDS = PROBE.replace(
    "# torch's extension builds in this worker use the flock baton",
    "import os, time\nfrom torch.utils import file_baton\n_b = file_baton.FileBaton(os.path.join(os.getcwd(), 'lock'))\n"
    "assert _b.try_acquire()\ntime.sleep(0.6)\n_b.release()\n",
)


@pytest.mark.anyio
async def test_an_evaluation_says_how_long_its_builds_took(sandbox, affine, cand, st) -> None:  # type: ignore[no-untyped-def]
    from ksearch.tools.common import seconds_text

    ev = await sandbox.correctness(cand(BUILDS), affine, st("small"))
    assert ev.status == "ok", ev.error
    assert 0.6 <= ev.seconds_by_step.get("build", 0.0) < ev.seconds_by_step["load"] + 0.01, ev.seconds_by_step
    said = re.search(r"building torch extensions ([\d.]+) of them", seconds_text(ev))
    assert said is not None and float(said.group(1)) >= 0.6, seconds_text(ev)
