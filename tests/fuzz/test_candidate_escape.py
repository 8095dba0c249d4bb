"""A candidate is code from a model: it must not see the API keys of the process that started it, nor write
outside its scratch directory unnoticed.

One probing candidate is submitted with `ksearch submit` in a subprocess whose environment holds
ANTHROPIC_API_KEY and OPENAI_API_KEY, as a user's shell would. The probe looks for the keys' names in
its own environment, in /proc/self/environ and in the /proc/<pid>/environ of every ancestor, writes a
marker file into the repository, the real home directory, /tmp and the database's directory, and
reports what it found by raising (the report comes back in the evaluation).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.fuzzkit import dump_db

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

PROBE = r"""
import json, os, torch

TOKEN = "{token}"
TARGETS = {targets}


def _environ_has_keys(blob):
    return [k for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") if (k + "=").encode() in blob]


def _ancestors():
    pid, out = os.getppid(), []
    while pid > 1 and len(out) < 8:
        out.append(pid)
        with open(f"/proc/{{pid}}/status") as f:
            pid = int(next(ln.split()[1] for ln in f if ln.startswith("PPid:")))
    return out


def probe():
    seen = {{"own_env": [k for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") if k in os.environ]}}
    with open("/proc/self/environ", "rb") as f:
        seen["self_proc"] = _environ_has_keys(f.read())
    seen["ancestors"] = {{}}
    for pid in _ancestors():
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                seen["ancestors"][str(pid)] = _environ_has_keys(f.read())
        except OSError as e:
            seen["ancestors"][str(pid)] = "unreadable: " + type(e).__name__
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
    probe.write_text(PROBE.format(token=token, targets=json.dumps(targets)))
    env = dict(os.environ)
    env.update({"ANTHROPIC_API_KEY": "sk-ant-probe-" + token, "OPENAI_API_KEY": "sk-probe-" + token})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(base / "sandbox")  # the sandbox's scratch root: the probe writes outside it
    (base / "sandbox").mkdir()
    env.setdefault("TRITON_INTERPRET", "1")

    def ksearch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "server.cli", *args, "--db", str(db)],
            cwd=ROOT,
            env=env,
            text=True,
            capture_output=True,
            timeout=300,
        )

    try:
        made = ksearch(
            "run",
            "softmax",
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


def test_the_candidate_sees_no_api_key_in_its_own_environment(probed: dict[str, Any]) -> None:
    seen = probed["seen"]
    assert seen["own_env"] == [] and seen["self_proc"] == [], seen
    assert probed["token"] not in json.dumps(probed["evaluation"])  # no key value in what is stored


@pytest.mark.xfail(
    strict=True,
    reason="reported to the lead: a worker runs as the same user as the ksearch "
    "process that started it, so /proc/<ppid>/environ (the parent's environment at exec, "
    "API keys included) is readable by candidate code; the sandbox neither prevents nor "
    "detects it (needs another uid, a PID namespace, or dropping the ability to read it)",
)
def test_the_candidate_cannot_read_the_keys_of_the_process_that_started_it(probed: dict[str, Any]) -> None:
    ancestors = probed["seen"]["ancestors"]
    assert ancestors, "the probe found no ancestor to look at"
    leaked = {pid: keys for pid, keys in ancestors.items() if isinstance(keys, list) and keys}
    assert not leaked, f"ancestor environments readable with keys: {leaked}"


@pytest.mark.xfail(
    strict=True,
    reason="reported to the lead: the sandbox only points HOME/TMPDIR/cwd at the "
    "scratch directory; a candidate can still write anywhere its user can (repository, real "
    "home, /tmp, next to the database) and nothing flags it",
)
def test_a_write_outside_the_scratch_directory_is_prevented_or_flagged(probed: dict[str, Any]) -> None:
    ev = probed["evaluation"]
    flags = " ".join(ev.get("flags", [])) + " " + (ev.get("error") or "")
    unnoticed = [
        name
        for name, path in probed["targets"].items()
        if probed["existed"][name] and path not in flags and "outside" not in flags
    ]
    assert not unnoticed, f"written outside the scratch directory, unflagged: {unnoticed}"
