"""Task tests keep derived task facts in the run's shared cache (tests/conftest.py, `run_facts_cache`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def facts_cache(run_facts_cache: Path) -> Path:
    return run_facts_cache


@pytest.fixture(autouse=True)
def _own_facts_cache(facts_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(facts_cache))
    yield


@pytest.fixture
def facts_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of what a task says besides its facts: nothing derives them (no reference is run for them)."""
    monkeypatch.setenv("KSEARCH_TASK_FACTS", "off")
