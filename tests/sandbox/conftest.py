"""Sandbox test fixtures: a tiny task, candidate sources, one sandbox per test module."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import Candidate, EvalSettings

FIXTURES = Path(__file__).parent / "fixtures"
CANDIDATES = FIXTURES / "candidates"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def affine() -> Task:
    return load_task(str(FIXTURES / "affine.py"))


def candidate(name_or_source: str, language: str = "triton") -> Candidate:
    """A candidate from tests/sandbox/fixtures/candidates/<name>.py (or .txt for sources that must not
    parse, which linters would reject), or from literal source text."""
    source = name_or_source
    if "\n" not in name_or_source:
        for ext in (".py", ".txt"):
            path = CANDIDATES / f"{name_or_source}{ext}"
            if path.is_file():
                source = path.read_text()
                break
    return Candidate.of(source, language)  # type: ignore[arg-type]


def settings(*workloads: str, trials: int = 2, **kw: object) -> EvalSettings:
    return EvalSettings(
        seed=7,
        trials=trials,
        workloads=list(workloads) or ["small"],
        input_sets=2,
        min_reps=3,
        max_reps=5,
        time_budget_s=0.5,
        **kw,
    )  # type: ignore[arg-type]


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=60.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.fixture(scope="session")
def cand() -> object:
    """`cand(name_or_source, language="triton")` -> Candidate."""
    return candidate


@pytest.fixture(scope="session")
def st() -> object:
    """`st(*workloads, trials=2, **settings)` -> EvalSettings with small, fast timing."""
    return settings
