"""Task-facts probes forked from this process's probe zygote (gpu/jail/zygote.py, PROBE_PROGRAM): the same answer as
a probe started anew, one zygote for a process's probes, a task file that cannot reach the zygote, and a probe past
its time killed with the zygote still serving the next. Real processes, the real jail where the machine has one."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.zygote import PROBE_PROGRAM, WORKER_PROGRAM, command_kind
from ksearch.gpu.jail.zygote_client import Zygote, _zygotes
from ksearch.gpu.tasks import facts, load_task
from ksearch.gpu.tasks.facts import probe_task

FIXTURES = Path(__file__).parent / "fixtures"
AFFINE = Path(__file__).parents[1] / "sandbox" / "fixtures" / "affine.py"


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No cached facts, and a probe zygote of this test's own (a variable the probe's environment keeps, read by
    no one, makes its key), stopped after the test."""
    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(tmp_path / "facts"))
    monkeypatch.setattr(facts, "_probed", {})
    monkeypatch.setenv("TORCH_KSEARCH_TEST_ZYGOTE", uuid.uuid4().hex)
    monkeypatch.delenv("KSEARCH_FORK_WORKERS", raising=False)
    yield
    for z in _probe_zygotes():
        z.close()


def _probe_zygotes() -> list[Zygote]:
    key = os.environ["TORCH_KSEARCH_TEST_ZYGOTE"]
    return [
        z
        for z in _zygotes.values()
        if z.program == PROBE_PROGRAM and z.env.get("TORCH_KSEARCH_TEST_ZYGOTE") == key
    ]


@pytest.mark.slow
def test_forked_probes_answer_as_started_ones_and_share_one_zygote(
    fresh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = [load_task(str(AFFINE)), load_task(str(FIXTURES / "kernelbench" / "l1_row_scale.py"))]
    forked = [probe_task(t) for t in tasks]
    assert all(r.error is None for r in forked), [r.error for r in forked]
    zs = _probe_zygotes()
    assert len(zs) == 1 and zs[0].forks == 2 and zs[0].failed is None  # one zygote, one fork per probe

    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(tmp_path / "facts-started"))
    monkeypatch.setattr(facts, "_probed", {})
    monkeypatch.setenv("KSEARCH_FORK_WORKERS", "0")
    started = [probe_task(t) for t in tasks]
    assert zs[0].forks == 2  # started anew: the zygote was not asked
    assert [r.answer() for r in forked] == [r.answer() for r in started]
    assert (
        forked[1].smoke is not None and forked[1].rounding is not None
    )  # a KernelBench file's derived smoke


HOSTILE = """
import json, os, socket, sys, torch
WORKLOADS = [{"name": "a", "params": {"n": 4}}, {"name": "s", "params": {"n": 2}, "split": "smoke"}]
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs(n):
    seen = {"sk": [], "sent": 0, "zy": 0}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if not target.startswith("socket:"):
            continue
        s = socket.socket(fileno=os.dup(fd))
        seen["sk"].append(s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))
        req = {"req": 1, "cmd": [sys.executable, "-m", "ksearch.gpu.tasks.rt.facts", "/x"], "env": {}, "cwd": "/",
               "keep": []}
        try:  # ask whatever is at the other end to fork a process of this file's choosing
            socket.send_fds(s, [json.dumps(req).encode()], [0, 1, 2])
            seen["sent"] += 1
        except OSError:
            pass
        s.close()
    for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:  # a zygote, not a process forked from one (renamed)
                seen["zy"] += b"ksearch.gpu.jail.zygote" in f.read() and open(f"/proc/{pid}/comm").read().strip() == "python"
        except OSError:
            continue
    raise RuntimeError("PROBE" + json.dumps(seen, separators=(",", ":")) + "END")
def get_init_inputs(**params):
    return []
"""


def test_a_task_file_cannot_reach_the_probe_zygote(fresh: None, tmp_path: Path) -> None:
    p = tmp_path / "hostile.py"
    p.write_text(textwrap.dedent(HOSTILE))
    r = probe_task(load_task(p))
    found = re.search(r"PROBE(\{.*?\})END", json.dumps(r.model_dump(mode="json")).replace('\\"', '"'))
    assert found, f"the file did not report: {r}"
    seen = json.loads(found.group(1))
    (z,) = _probe_zygotes()
    assert z.forks == 1  # the probe itself
    assert 5 not in seen["sk"], seen  # SOCK_SEQPACKET, the zygote's kind: its socket was closed in the child
    time.sleep(0.5)
    assert z.forks == 1 and z.failed is None  # nothing reached it
    if jail.unavailable_reason() is None:
        assert seen["zy"] == 0, seen  # its own PID namespace: no zygote to see
    # the zygote still serves this process's next probe
    assert probe_task(load_task(str(AFFINE))).error is None and z.forks == 2


HANGS = """
import time, torch
WORKLOADS = [{"name": "a", "params": {"n": 4}}, {"name": "s", "params": {"n": 2}, "split": "smoke"}]
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs(n):
    time.sleep(3600)
def get_init_inputs(**params):
    return []
"""


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] != "Z":
                out.append(int(d))
    return out


def test_a_probe_past_its_time_is_killed_and_the_zygote_serves_the_next(fresh: None, tmp_path: Path) -> None:
    p = tmp_path / "hangs.py"
    p.write_text(textwrap.dedent(HANGS))
    t0 = time.monotonic()
    r = probe_task(load_task(p), timeout_s=8.0)
    assert r.error is not None and "took over 8 s" in r.error, r.error
    assert time.monotonic() - t0 < 60
    (z,) = _probe_zygotes()
    assert z.pid is not None and z.failed is None and z.forks == 1
    deadline = time.monotonic() + 10
    while _children(z.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children(z.pid) == []  # the hung probe and its jail are gone
    assert probe_task(load_task(str(AFFINE))).error is None and z.forks == 2


def test_a_zygote_forks_only_its_own_program() -> None:
    py = sys.executable
    probe = [py, "-m", PROBE_PROGRAM, "/h/task.json"]
    assert command_kind(probe, PROBE_PROGRAM) == "plain"
    assert command_kind(probe, WORKER_PROGRAM) is None
    assert command_kind([py, "-m", WORKER_PROGRAM], PROBE_PROGRAM) is None
    assert command_kind([py, "-m", PROBE_PROGRAM], PROBE_PROGRAM) is None  # its one argument missing
    assert command_kind([py, "-m", PROBE_PROGRAM, "-c", "x"], PROBE_PROGRAM) is None
    assert command_kind([py, "-m", PROBE_PROGRAM, "--memory-gib"], PROBE_PROGRAM) is None  # no options
    jailed = [py, "-m", "ksearch.gpu.jail.launch", "--rw", "/h", "--", *probe]
    assert command_kind(jailed, PROBE_PROGRAM) == "jailed"
    assert (
        command_kind([py, "-m", "ksearch.gpu.jail.launch", "--", "/bin/sh", "-c", "x"], PROBE_PROGRAM) is None
    )
    assert command_kind(probe, "ksearch.gpu.timing.ncu") is None  # a program without a zygote


def test_a_bad_fork_setting_is_a_clear_probe_error(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSEARCH_FORK_WORKERS", "yes")
    r = probe_task(load_task(str(AFFINE)))
    assert r.error is not None and "KSEARCH_FORK_WORKERS='yes': accepted values are 1" in r.error, r.error
