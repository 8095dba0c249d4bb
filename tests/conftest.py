"""Shared test setup: run Triton kernels under the interpreter when no GPU is present, skip `gpu` tests, keep
a module's tests on one xdist worker where they share a module-scoped fixture (a sandbox, a kill loop, npm ci), and
hand the costliest modules out first (a long test started last would leave the other workers idle at the end)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# Before torch loads OpenMP: its idle threads sleep rather than spin. The suite runs more busy processes than cores
# (the sandbox's workers are started so already, gpu/jail/scrub.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
import torch

from ksearch.gpu.tasks.flashinfer import pkg as fib_pkg

_HAS_CUDA = torch.cuda.is_available()
FIB_INSTALLED = fib_pkg.installed()
NO_FIB = "FlashInfer-Bench's package (the `fib` extra) is not installed"
if not _HAS_CUDA:
    # Must be set before triton is first imported: the interpreter is chosen at decoration time.
    os.environ.setdefault("TRITON_INTERPRET", "1")


_SHARED_SCOPES = ("class", "module", "package")  # a session fixture is set up once per worker anyway

# The modules that cost the most on a 2-core machine (the durations list at the end of a run shows them): handed
# out first, then every other module with a `slow` test, then the rest, each module's tests together and in order.
# tests/test_test_grouping.py checks that each of these files exists.
HEAVY_FIRST = (
    "tests/tools/test_model.py",  # a model profiled in its own process, nine tasks written, derived and checked
    "tests/driver/test_ray_cluster.py",  # a Ray cluster of two nodes
    "tests/driver/test_live_replay.py",  # three recorded searches replayed
    "tests/faults/test_fault_driver_kill.py",  # twenty-odd `ksearch run` processes killed
    "tests/test_bench_host_flow.py",  # the benchmark scripts' smoke runs
    "tests/sandbox/test_compile_baseline.py",  # torch.compile with inductor, in and out of process
    "tests/sandbox/test_cpp_ext_build.py",  # two C++ builds against torch's headers
    "tests/tasks/test_fib_solution.py",  # a C++ build
    "tests/tasks/test_lean_check.py",  # `task show --check` four times
    "tests/tasks/test_export_runs.py",  # exported kernels run by their owners' evaluators
)


def pytest_configure(config: pytest.Config) -> None:
    # xdist would otherwise hand out its work units largest first by their number of tests (`--loadscope-reorder`),
    # which puts a long single test anywhere; the order below is by cost
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def _costliest_first(items: list[pytest.Item]) -> None:
    """Sort whole modules, stably: HEAVY_FIRST in its order, then modules with a `slow` test, then the rest."""
    slow = {_module(item) for item in items if "slow" in item.keywords}

    def rank(module: str) -> tuple[int, int]:
        if module in HEAVY_FIRST:
            return (0, HEAVY_FIRST.index(module))
        return (1, 0) if module in slow else (2, 0)

    first_seen = {m: i for i, m in reversed(list(enumerate(_module(item) for item in items)))}
    items.sort(key=lambda item: (rank(_module(item)), first_seen[_module(item)]))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (`--dist loadgroup`)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _costliest_first(items)
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        # a fixture defined in this module or a conftest at module scope or wider, that is not one of pytest's or
        # a plugin's: set up once per worker, so its module's tests go together rather than build it on each worker
        if any(d[-1].scope in _SHARED_SCOPES and d[-1].baseid.startswith("tests") for d in defs if d):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if _HAS_CUDA:
        # `cpu` tests assert what the Triton interpreter does (no timing ranks, the smoke workload only)
        only_cpu = pytest.mark.skip(reason="asserts CPU-interpreter behaviour; this machine has a GPU")
        for item in items:
            if "cpu" in item.keywords:
                item.add_marker(only_cpu)
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def run_facts_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Derived task facts shared by every test and xdist worker of this run (a worker's basetemp lies in the run's):
    a probe costs a subprocess and depends only on the task's content, its key. Tests of the cache use their own."""
    base = tmp_path_factory.getbasetemp()
    d = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "task-facts-shared"
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="session", autouse=True)
def _facts_cache_for_the_run(run_facts_cache: Path) -> Iterator[None]:
    """Every test, and every process it starts, reads and writes derived task facts in the run's shared cache
    unless it names its own: the same built-in or fixture task is searched by hundreds of tests (in CLI processes,
    MCP servers and drivers too), and each probe is a fresh process importing torch (~3 s of CPU)."""
    before = os.environ.get("KSEARCH_FACTS_CACHE")
    os.environ["KSEARCH_FACTS_CACHE"] = str(run_facts_cache)
    yield
    if before is None:
        os.environ.pop("KSEARCH_FACTS_CACHE", None)
    else:
        os.environ["KSEARCH_FACTS_CACHE"] = before


@pytest.fixture
def minimal_fib(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer-Bench data read by ksearch's minimal reader even where its package is installed (for tests of
    ksearch's own messages)."""
    monkeypatch.setenv(fib_pkg.ENV, "minimal")


# the package's first answer in a process takes seconds (its child process imports torch): `slow`
@pytest.fixture(params=["minimal", pytest.param("package", marks=pytest.mark.slow)])
def fib_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each FlashInfer-Bench test twice: ksearch's minimal reader, and FlashInfer-Bench's own package (skipped,
    saying so, where it is not installed)."""
    if request.param == "package" and not FIB_INSTALLED:
        pytest.skip(NO_FIB)
    monkeypatch.setenv(fib_pkg.ENV, "minimal" if request.param == "minimal" else "auto")
    return str(request.param)
