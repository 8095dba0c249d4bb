"""Task tests' fixtures (derived task facts go to the run's shared cache for every test: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def facts_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of what a task says besides its facts: nothing derives them (no reference is run for them)."""
    monkeypatch.setenv("KSEARCH_TASK_FACTS", "off")
