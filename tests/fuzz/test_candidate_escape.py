"""A candidate is code from a model: it must not see the API keys of the process that started it, nor write
outside its scratch directory unnoticed.

One probing candidate is submitted with `ksearch submit` in a subprocess whose environment holds
ANTHROPIC_API_KEY and OPENAI_API_KEY, as a user's shell would. The probe looks for the keys' names in
its own environment, in /proc/self/environ, in the /proc/<pid>/environ of every process it can see and
of the `ksearch submit` process by its host PID, writes a marker file into the repository, the real
home directory, /tmp and the database's directory, and reports what it found by raising (the report
comes back in the evaluation). Where the machine has no unprivileged user namespaces the sandbox runs
candidates unjailed and says so; the isolation tests are then skipped with that reason.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.jail import launch as jail
from tests.faults.faultkit import start_ksearch
from tests.fixtures import SOFTMAX
from tests.fuzz.fuzzkit import dump_db

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

PROBE = r"""
import json, os, torch

TOKEN = "{token}"
TARGETS = {targets}
SUBMITTER_PID_FILE = "{pid_file}"


def _environ_has_keys(blob):
    return [k for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") if (k + "=").encode() in blob]


def _others():
    # every process the probe can see, and the submitting ksearch process by its host PID
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid()]
    with open(SUBMITTER_PID_FILE) as f:
        return pids + [int(f.read())]


def probe():
    seen = {{"own_env": [k for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") if k in os.environ]}}
    with open("/proc/self/environ", "rb") as f:
        seen["self_proc"] = _environ_has_keys(f.read())
    seen["visible"] = sum(d.isdigit() for d in os.listdir("/proc"))
    seen["others"], seen["unreadable"] = {{}}, 0
    for pid in _others():
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                keys = _environ_has_keys(f.read())
        except OSError:
            seen["unreadable"] += 1
            continue
        if keys:
            seen["others"][str(pid)] = keys
    seen["wrote"] = {{}}
    for name, path in TARGETS.items():
        try:
            with open(path, "w") as f:
                f.write("written by a candidate " + TOKEN)
            seen["wrote"][name] = True
        except OSError as e:
            seen["wrote"][name] = type(e).__name__
    return seen


class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("PROBE" + json.dumps(probe(), separators=(",", ":")) + "END")
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("escape")
    db = base / "k.db"
    token = uuid.uuid4().hex[:12]
    targets = {
        "repo": str(ROOT / f".ksearch-escape-{token}"),
        "home": str(Path(pwd.getpwuid(os.getuid()).pw_dir) / f".ksearch-escape-{token}"),
        "tmp": f"/tmp/ksearch-escape-{token}",
        "db_dir": str(base / f"escape-{token}"),
    }
    probe = base / "probe.py"
    # the submitter's host PID reaches the probe through the compiler caches, the one folder outside its own
    # scratch directory that a jailed worker is shown (read-write)
    pid_file = base / "sandbox" / f"ksearch-sandbox-{os.getuid()}" / "shared" / "submitter.pid"
    pid_file.parent.mkdir(parents=True)
    probe.write_text(PROBE.format(token=token, targets=json.dumps(targets), pid_file=pid_file))
    env = dict(os.environ)
    env.update({"ANTHROPIC_API_KEY": "sk-ant-probe-" + token, "OPENAI_API_KEY": "sk-probe-" + token})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(base / "sandbox")  # the sandbox's scratch root: the probe writes outside it
    env.setdefault("TRITON_INTERPRET", "1")

    def ksearch(*args: str) -> subprocess.CompletedProcess[str]:
        with start_ksearch(*args, "--db", str(db), env=env) as proc:
            pid_file.write_text(str(proc.pid))  # the probe runs much later, in a worker
            out, err = proc.communicate(timeout=300)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    try:
        made = ksearch(  # the built-in softmax with a 9-row smoke workload: the search is made in seconds
            "run",
            SOFTMAX,
            "--policy",
            "tuner",
            "--rounds",
            "1",
            "--max-attempts",
            "1",
            "--plain",
            "--no-final",
        )
        assert made.returncode == 0, made.stdout + made.stderr
        before = dump_db(db)
        p = ksearch("submit", "1", str(probe))
        found = re.search(r"PROBE(\{.*?\})END", p.stdout + p.stderr)
        assert found, f"the probe did not report (exit {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}"
        con = sqlite3.connect(db)
        ev = json.loads(con.execute("SELECT evaluation FROM attempts ORDER BY id DESC LIMIT 1").fetchone()[0])
        con.close()
        existed = {name: Path(path).exists() for name, path in targets.items()}
        return {
            "seen": json.loads(found.group(1)),
            "evaluation": ev,
            "existed": existed,
            "targets": targets,
            "before": before,
            "token": token,
            "stdout": p.stdout,
        }
    finally:
        for path in targets.values():
            Path(path).unlink(missing_ok=True)


@pytest.mark.slow
def test_the_candidate_sees_no_api_key_in_its_own_environment(probed: dict[str, Any]) -> None:
    seen = probed["seen"]
    assert seen["own_env"] == [] and seen["self_proc"] == [], seen
    assert probed["token"] not in json.dumps(probed["evaluation"])  # no key value in what is stored


needs_jail = pytest.mark.skipif(
    jail.unavailable_reason() is not None,
    reason=f"no process isolation on this machine: {jail.unavailable_reason()}",
)


@needs_jail
def test_the_candidate_cannot_read_the_keys_of_the_process_that_started_it(probed: dict[str, Any]) -> None:
    seen = probed["seen"]
    assert seen["visible"] <= 3, f"the candidate sees {seen['visible']} processes (itself and init expected)"
    assert not seen["others"], f"environments readable with keys: {seen['others']}"


@needs_jail
def test_a_write_outside_the_scratch_directory_is_prevented(probed: dict[str, Any]) -> None:
    wrote = probed["seen"]["wrote"]
    assert set(wrote) == set(probed["targets"])
    # read-only (EROFS) where the jail's root shows the folder, absent (ENOENT) where it does not
    assert all(v in ("OSError", "FileNotFoundError") for v in wrote.values()), wrote
    assert not any(probed["existed"].values()), probed["existed"]
