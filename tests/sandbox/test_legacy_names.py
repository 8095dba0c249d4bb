"""Candidates recorded before ksearch.gpu moved into the `ksearch` package import it as `gpu`.

The worker aliases that name to ksearch.gpu (gpu/former_names.py): the same module objects, so such a
candidate still loads, and the tamper scan still guards the harness under either name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ksearch.gpu.checks import tamper

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).parent / "fixtures" / "candidates"
NATIVE_TASKS = ROOT / "tests" / "tasks" / "fixtures" / "native"


def test_the_alias_hands_out_the_modules_of_ksearch_gpu() -> None:
    # in a fresh interpreter: the alias is for processes that run candidates, not for this one
    code = textwrap.dedent(
        """
        import sys
        import ksearch.gpu.jail.scrub
        from ksearch.gpu import former_names
        former_names.install()
        former_names.install()  # idempotent
        import ksearch.gpu, ksearch.gpu.nvrtc, ksearch.gpu.cpp_ext, ksearch.gpu.fib_build, ksearch.gpu.tasks.check
        from gpu import nvrtc
        import gpu.cpp_ext
        from gpu.fib_build import build
        import gpu.tasks.check as check
        import gpu.scrub
        import ksearch.gpu.pool as former_pool  # a module that moved into a room, by its former name
        from gpu.tasks import rt_common
        import ksearch.gpu.sandbox.pool, ksearch.gpu.tasks.rt.common
        assert sys.modules["gpu"] is ksearch.gpu
        assert nvrtc is ksearch.gpu.nvrtc and gpu.cpp_ext is ksearch.gpu.cpp_ext
        assert build is ksearch.gpu.fib_build.build
        assert check is ksearch.gpu.tasks.check and gpu.scrub is ksearch.gpu.jail.scrub
        assert former_pool is ksearch.gpu.sandbox.pool and rt_common is ksearch.gpu.tasks.rt.common
        assert nvrtc.__spec__.name == "ksearch.gpu.nvrtc" and check.__name__ == "ksearch.gpu.tasks.check"
        try:
            import gpu.no_such_module
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("a missing module imported")
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_candidate_with_the_former_imports_runs_in_the_worker(sandbox, affine, cand, st) -> None:
    old = "from gpu import nvrtc\nimport gpu.cpp_ext\nfrom gpu.nvrtc import compile as _compile\n"
    source = old + (CANDIDATES / "good_triton.py").read_text()
    ev = await sandbox.correctness(cand(source), affine, st("small"))
    assert ev.status == "ok" and ev.correct, ev.error


@pytest.mark.slow
def test_a_task_file_with_the_former_imports_loads_and_runs(tmp_path: Path) -> None:
    # loading probes the file in a subprocess; --check runs its reference (gpu.tasks.check, jailed)
    source = (NATIVE_TASKS / "linear_relu.py").read_text()
    assert "from ksearch.gpu.inputs import" in source
    old = tmp_path / "old_linear_relu.py"
    old.write_text(source.replace("from ksearch.gpu.inputs import", "from gpu.inputs import"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", "task", "show", str(old), "--check", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    shown = json.loads(out.stdout)
    assert shown["check"]["ok"], shown["check"]


@pytest.mark.parametrize(
    "source",
    [
        "from gpu import timing\n",
        "from ksearch.gpu import timing\n",
        "import gpu.worker_core\n",
        "import ksearch.gpu.worker.core\n",
        "from ksearch.gpu.sandbox.local import LocalSandbox\n",
    ],
)
def test_importing_the_harness_is_flagged_under_either_name(source: str) -> None:
    assert any("harness module" in why for _, why in tamper.scan(source)), source


@pytest.mark.parametrize(
    "source",
    [
        "import gpu.timing\ngpu.timing.now = lambda: 0\n",
        "import ksearch.gpu.timing.measure\nksearch.gpu.timing.measure.now = lambda: 0\n",
        "from ksearch import gpu\ngpu.timing.now = lambda: 0\n",
    ],
)
def test_patching_the_harness_is_flagged_under_either_name(source: str) -> None:
    assert any("patches a library" in why for _, why in tamper.scan(source)), source


def test_the_candidate_helpers_are_not_harness_modules() -> None:
    for source in (
        "from ksearch.gpu import nvrtc\n",
        "from gpu import nvrtc\n",
        "import ksearch.gpu.cpp_ext\n",
    ):
        assert tamper.scan(source) == [], source


@pytest.mark.slow
def test_the_former_commands_still_start_the_worker_and_the_jail(tmp_path: Path) -> None:
    """`python -m ksearch.gpu.worker` and `-m ksearch.gpu.jail` (the commands before the rooms) run the same code as
    ksearch.gpu.worker.main and ksearch.gpu.jail.launch: a worker says hello, the jail's launcher parses its options."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("KSEARCH_WORKER", None)
    worker = subprocess.run(
        [sys.executable, "-m", "ksearch.gpu.worker"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    hello = json.loads(worker.stdout.splitlines()[0])
    assert hello["id"] == 0 and hello["hello"]["pid"] > 0, worker.stdout + worker.stderr
    jail = subprocess.run(
        [sys.executable, "-m", "ksearch.gpu.jail", "--no-such-option"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert jail.returncode != 0 and "ksearch.gpu.jail: unexpected argument '--no-such-option'" in jail.stderr
