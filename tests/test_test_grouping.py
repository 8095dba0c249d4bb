"""The suite's own scheduling: under `--dist loadgroup` (what scripts/test.sh runs), the tests of a module that
share a module-scoped fixture run on one xdist worker, so the fixture is built once, while other tests spread
(tests/conftest.py groups them). Run in a pytest subprocess on a small tree of its own with that conftest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SHARED = """
import os, time
import pytest

@pytest.fixture(scope="module")
def built():
    with open(os.environ["SETUPS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    return 1

@pytest.mark.parametrize("i", range(6))
def test_uses_it(built, i):
    time.sleep(0.2)
"""

FREE = """
import os, time
import pytest

@pytest.mark.parametrize("i", range(12))
def test_free(i):
    with open(os.environ["RAN_ON"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    time.sleep(0.2)
"""


@pytest.mark.slow
def test_a_module_fixture_is_built_once_and_other_tests_spread(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "test_shared.py").write_text(SHARED)
    (tests / "test_free.py").write_text(FREE)
    env = dict(os.environ, SETUPS=str(tmp_path / "setups"), RAN_ON=str(tmp_path / "ran_on"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "18 passed" in r.stdout, r.stdout[-2000:]
    # one worker built the shared fixture, once, for all six of its tests
    assert len((tmp_path / "setups").read_text().split()) == 1
    # the ungrouped tests went to more than one worker
    assert len(set((tmp_path / "ran_on").read_text().split())) > 1


def test_the_modules_handed_out_first_exist() -> None:
    from tests.conftest import HEAVY_FIRST

    missing = [m for m in HEAVY_FIRST if not (ROOT / m).is_file()]
    assert not missing, f"tests/conftest.py's HEAVY_FIRST names files that are gone: {missing}"
