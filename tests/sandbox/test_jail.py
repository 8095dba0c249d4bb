"""ksearch.gpu.jail.launch on its own: what a jailed command can see and write, and that its fate reaches the caller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.limits import Limits
from ksearch.gpu.jail.scrub import scrubbed_env

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
        [sys.executable, "-m", "ksearch.gpu.jail.launch", "--bogus"],
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
@pytest.mark.slow
async def test_a_sandbox_without_isolation_still_evaluates_and_says_so(tmp_path: Path) -> None:
    """What machines without user namespaces get (isolation 'auto' falls back to it)."""
    from ksearch.gpu.sandbox.local import LocalSandbox
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


def test_the_unjailed_report_names_every_missing_protection() -> None:
    """Where the jail cannot be built (or is turned off), the isolation report says what candidates can do."""
    _, said = jail.resolve("none")
    for what in (
        "environments (API keys)",  # no PID namespace
        "127.0.0.1 and ::1",  # no network namespace
        "the home directory, other projects, the search database",  # no root of its own
        "write anywhere this user can",
        "processes or scratch disk",  # no limits
        "every GPU",  # no device nodes of its own
    ):
        assert what in said, what


_VIEW = "import json; from ksearch.gpu.jail import view as v; b = v.build([], [], [], []); print(json.dumps([b.binds, b.files]))"


def test_the_view_shows_the_environment_but_not_the_home_nor_the_checkout(tmp_path: Path) -> None:
    # built as the jail's launcher builds it: `python -m` in a scratch directory, with a worker's environment
    p = subprocess.run(
        [sys.executable, "-c", _VIEW],
        cwd=tmp_path,
        env=scrubbed_env(home=tmp_path),
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    raw_binds, files = json.loads(p.stdout)
    view = jail_view.View(binds=[(path, mode) for path, mode in raw_binds], files=files)
    binds = [p for p, _ in view.binds]
    home = os.path.realpath(Path.home())
    assert home not in binds and "/" not in binds and str(ROOT) not in binds
    assert view.covers(os.path.realpath(sys.prefix)) and view.covers(os.path.realpath(sys.base_prefix))
    assert view.covers(os.path.realpath(jail.__file__))  # the package itself
    # of the checkout: its package folders, pyproject.toml and a virtual environment inside it, nothing else
    inside = {Path(p).relative_to(ROOT).parts[0] for p in binds if p.startswith(str(ROOT) + "/")}
    assert inside <= {"ksearch", "gpu", "tools", "server", "worldmodel", "pyproject.toml", ".venv", "venv"}
    assert not view.covers(str(ROOT / "README.md")) and not view.covers(str(ROOT / ".git"))
    assert all(mode == "ro" for p, mode in view.binds if not p.startswith("/dev/"))
    assert set(view.files) == {"/etc/passwd", "/etc/group", "/etc/hosts"}  # the host's are not shown


def test_a_task_file_is_shown_alone_read_only(tmp_path: Path) -> None:
    task = tmp_path / "task.py"
    task.write_text("x = 1\n")
    (tmp_path / "secret.txt").write_text("no")
    view = jail_view.build([], [], [str(task)], [])
    assert (str(task), "ro") in view.binds
    assert not view.covers(str(tmp_path / "secret.txt"))


@needs_jail
def test_a_store_is_writable_beyond_the_disk_limit_and_shown_read_only_when_given_as_readable(
    tmp_path: Path,
) -> None:
    """The draws store: a baseline process writes it (`stores`: not counted against the scratch disk limit,
    which its writer's own budget replaces); a candidate's process is shown it read-only."""
    scratch, store = tmp_path / "scratch", tmp_path / "draws"
    scratch.mkdir()
    store.mkdir()
    (store / "kept.pt").write_text("kept")
    limits = Limits(disk_bytes=1 << 20)
    write = "import sys; open(sys.argv[1], 'wb').write(bytes(3 << 20)); print('wrote')"
    big = str(store / "big.pt")
    cmd = jail.wrap([sys.executable, "-c", write, big], [scratch], stores=[store], limits=limits)
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "wrote" in p.stdout, p.stderr
    assert Path(big).stat().st_size == 3 << 20  # three times the disk limit, not a resource_limit
    targets = {"new": str(store / "planted.pt"), "existing": str(store / "kept.pt")}
    cmd = jail.wrap([sys.executable, "-c", PROBE, json.dumps(targets)], [scratch], readable=[str(store)])
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen["new"] == seen["existing"] == "Read-only file system"
    assert not (store / "planted.pt").exists() and (store / "kept.pt").read_text() == "kept"
