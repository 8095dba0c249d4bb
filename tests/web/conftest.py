"""Fixtures for the web UI tests: a sample database, a running `ksearch ui`, and Chromium through Playwright (a
browser test module skips itself, saying why, when Chromium or Playwright is missing)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import uidata
from uihelp import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, UiProcess, arun

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium, one per test module (imported here only by the modules that checked it exists)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page at 1440 px; after the test, no script error happened and nothing outside the local server
    was requested."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    outside: list[str] = []
    pg.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:")) else None,
    )
    try:
        yield pg
    finally:
        ctx.close()
    assert errors == [], f"script errors on the page: {errors}"
    assert outside == [], f"requests outside the local server: {outside}"
