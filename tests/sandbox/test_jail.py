"""ksearch.gpu.jail on its own: what a jailed command can see and write, and that its fate reaches the caller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ksearch.gpu import jail

ROOT = Path(__file__).resolve().parents[2]
needs_jail = pytest.mark.skipif(
    jail.unavailable_reason() is not None, reason=f"no isolation here: {jail.unavailable_reason()}"
)

PROBE = r"""
import json, os, subprocess, sys
out = {"pids": sorted(int(d) for d in os.listdir("/proc") if d.isdigit()), "me": os.getpid()}
for name, path in json.loads(sys.argv[1]).items():
    try:
        with open(path, "w") as f:
            f.write("x")
        out[name] = "written"
    except OSError as e:
        out[name] = e.strerror
out["remount"] = subprocess.run(["mount", "-o", "remount,rw", "/"], capture_output=True).returncode
print(json.dumps(out))
"""


def _jailed(cmd: list[str], rw: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        jail.wrap(cmd, rw), cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ}
    )


@needs_jail
def test_the_command_sees_only_itself_and_writes_only_where_allowed(tmp_path: Path) -> None:
    rw = tmp_path / "rw"
    rw.mkdir()
    targets = {"allowed": str(rw / "ok"), "beside": str(tmp_path / "no"), "repo": str(ROOT / ".jail-probe")}
    p = _jailed([sys.executable, "-c", PROBE, json.dumps(targets)], [rw])
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen["pids"] == [1, 2] and seen["me"] == 2  # init and the command: nothing of the host
    assert seen["allowed"] == "written" and (rw / "ok").read_text() == "x"
    assert seen["beside"] == seen["repo"] == "Read-only file system"
    assert not (tmp_path / "no").exists() and not (ROOT / ".jail-probe").exists()
    assert seen["remount"] != 0  # the mounts are locked: no way back to read-write


@needs_jail
@pytest.mark.parametrize("code", [0, 3, 77])
def test_an_exit_code_passes_through(code: int) -> None:
    assert _jailed([sys.executable, "-c", f"import os; os._exit({code})"], []).returncode == code


@needs_jail
@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
def test_death_by_a_signal_passes_through(sig: signal.Signals) -> None:
    # the command is PID 2, not init: it can signal itself like any process
    p = _jailed([sys.executable, "-c", f"import os; os.kill(os.getpid(), {int(sig)})"], [])
    assert p.returncode == -sig


@needs_jail
def test_bad_arguments_and_a_missing_directory_are_refused(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ksearch.gpu.jail", "--bogus"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode != 0 and "unexpected argument '--bogus'" in p.stderr
    p = _jailed(["true"], [tmp_path / "absent"])
    assert p.returncode == jail.EXIT_SETUP_FAILED and "does not exist" in p.stderr


@needs_jail
def test_unknown_isolation_mode_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match="unknown isolation mode 'sometimes'; accepted: auto, namespaces, none"
    ):
        jail.resolve("sometimes")
    jailed, said = jail.resolve("none")
    assert not jailed and said.startswith("none: turned off")
    assert jail.resolve("auto") == (True, jail.ISOLATED)


@pytest.mark.anyio
async def test_a_sandbox_without_isolation_still_evaluates_and_says_so(tmp_path: Path) -> None:
    """What machines without user namespaces get (isolation 'auto' falls back to it)."""
    from ksearch.gpu.sandbox import LocalSandbox
    from ksearch.gpu.tasks import load_task
    from ksearch.worldmodel.models import Candidate, EvalSettings

    task = load_task(str(ROOT / "tests" / "sandbox" / "fixtures" / "affine.py"))
    source = (ROOT / "tests" / "sandbox" / "fixtures" / "candidates" / "good_triton.py").read_text()
    sb = LocalSandbox(scratch_dir=tmp_path, isolation="none", call_timeout_s=60.0)
    try:
        assert not sb.jailed and sb.isolation.startswith("none: turned off")
        ev = await sb.evaluate(
            Candidate.of(source, "triton"), task, EvalSettings(seed=3, trials=1, workloads=["small"])
        )
        assert ev.status == "ok", ev.error
        assert sb.pool.workers[0].hello is not None and sb.pool.workers[0].hello["jailed"] is False
        assert (await sb.hardware()).isolation == sb.isolation
    finally:
        await sb.close()
