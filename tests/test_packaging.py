"""The installed layout: one top-level package, `ksearch`, with the four rooms inside it.

The wheel is built from a copy of the checkout (no network: the interpreter's own setuptools) and read:
every file lies under ksearch/ (or the dist-info), the data files travel with it, and the console script
names the namespaced entry point. Then it is installed into a directory of its own, away from the
checkout, and used from there: `import ksearch` gives the public surface from that directory, nothing else
is installed at the top level, and the console script runs a command that reads the packaged tasks.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("gpu", "server", "tools", "worldmodel")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    found = {"ksearch"}
    for room in ROOMS:
        for init in (ROOT / room).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            found.add(".".join(("ksearch", *rel.parts)))
    return found


def test_every_package_is_listed() -> None:
    setup = PYPROJECT["tool"]["setuptools"]
    assert set(setup["packages"]) == _packages_on_disk()
    assert setup["package-dir"] == {"ksearch": "ksearch", **{f"ksearch.{r}": r for r in ROOMS}}
    assert PYPROJECT["project"]["scripts"] == {"ksearch": "ksearch.server.cli.main:main"}


def test_a_checkout_imports_the_rooms_as_ksearch_subpackages() -> None:
    import ksearch

    for room in ROOMS:
        pkg = importlib.import_module(f"ksearch.{room}")
        assert Path(pkg.__file__ or "").resolve() == (ROOT / room / "__init__.py").resolve()
    # through ksearch/'s links to the rooms; without them, through the package's search path
    linked = all((ROOT / "ksearch" / room).is_dir() for room in ROOMS)
    assert (str(ROOT) in ksearch.__path__) is not linked


def test_a_checkout_without_the_links_finds_the_rooms_beside(tmp_path: Path) -> None:
    # git without symlink support checks the links out as plain files: the package's search path takes over
    (tmp_path / "ksearch").mkdir()
    for f in (ROOT / "ksearch").glob("*.py"):
        shutil.copy(f, tmp_path / "ksearch" / f.name)
    for room in ROOMS:
        (tmp_path / "ksearch" / room).write_text(f"../{room}")
        (tmp_path / room).symlink_to(ROOT / room, target_is_directory=True)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    code = "import ksearch, ksearch.gpu.jail.scrub as s; print(ksearch.__path__[-1]); print(s.PROJECT_ROOT)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path), str(tmp_path)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("building a wheel offline needs setuptools in this interpreter")
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("ksearch", *ROOMS):
        shutil.copytree(ROOT / name, src / name, ignore=ignore, symlinks=True)  # ksearch/ links to the rooms
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
        str(src),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("ksearch-*.whl")
    return zipfile.ZipFile(path)


@pytest.fixture(scope="module")
def installed(wheel: zipfile.ZipFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed (no dependencies: this interpreter has them) into a target directory."""
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target)]
    done = subprocess.run([*cmd, str(wheel.filename)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return target


def _run_installed(target: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # The target directory first on the path, the checkout nowhere: an editable install of the checkout in
    # this interpreter would otherwise be found, and the test would pass without the wheel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    version = PYPROJECT["project"]["version"]
    tops = {n.split("/")[0] for n in names}
    assert tops == {"ksearch", f"ksearch-{version}.dist-info"}
    for room in ROOMS:
        assert f"ksearch/{room}/__init__.py" in names
    assert "ksearch/__init__.py" in names and "ksearch/about.py" in names
    assert "ksearch/gpu/worker/main.py" in names and "ksearch/server/cli/__main__.py" in names


def test_the_data_files_travel_with_it(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for task in (ROOT / "gpu" / "tasks" / "builtin").glob("*/task.py"):
        for f in task.parent.glob("*.py"):
            assert f"ksearch/gpu/tasks/builtin/{task.parent.name}/{f.name}" in names
    for f in (ROOT / "server" / "web" / "static").iterdir():
        assert f"ksearch/server/web/static/{f.name}" in names
    for f in (ROOT / "tools" / "prompting" / "prompts").glob("*.md"):
        assert f"ksearch/tools/prompting/prompts/{f.name}" in names
    assert "ksearch/py.typed" in names  # the type hints ship (PEP 561)


def test_the_console_script(wheel: zipfile.ZipFile) -> None:
    (ep,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(ep).decode()
    assert "ksearch = ksearch.server.cli.main:main" in text


def test_the_installed_wheel_is_one_package_with_its_public_surface(installed: Path, tmp_path: Path) -> None:
    tops = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert tops == {"ksearch", "bin"}, tops  # no top-level gpu, server, tools or worldmodel
    code = (
        "import json, ksearch, ksearch.tools.workspace as w\n"
        "print(json.dumps([ksearch.__file__, w.__file__, ksearch.__version__, sorted(ksearch.__all__)]))"
    )
    done = _run_installed(installed, [sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    init, workspace, version, public = __import__("json").loads(done.stdout)
    assert Path(init) == installed / "ksearch" / "__init__.py"
    assert Path(workspace).is_relative_to(installed / "ksearch" / "tools")  # not the checkout's tools/
    assert version == PYPROJECT["project"]["version"]
    import ksearch

    assert public == sorted(ksearch.__all__) and "Workspace" in public


def test_the_installed_console_script_runs(installed: Path, tmp_path: Path) -> None:
    script = installed / "bin" / "ksearch"
    assert script.is_file()
    done = _run_installed(installed, [sys.executable, str(script), "tasks"], tmp_path)
    assert done.returncode == 0, done.stderr
    builtin = sorted(p.parent.name for p in (ROOT / "gpu" / "tasks" / "builtin").glob("*/task.py"))
    assert builtin and all(name in done.stdout for name in builtin)  # the packaged task files were found
