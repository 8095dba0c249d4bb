"""Fixtures for the web UI tests: a sample database and a running `ksearch ui`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import uidata
from uihelp import UiProcess, arun


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    db = tmp_path / "ui.db"
    ids = arun(uidata.build(db))
    return db, ids


@pytest.fixture
def ui(demo: tuple[Path, dict[str, int]]) -> Iterator[UiProcess]:
    db, _ = demo
    proc = UiProcess(db, "softmax-demo")
    try:
        yield proc
    finally:
        proc.stop()
