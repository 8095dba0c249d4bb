"""The page shows a search left `running` by a dead process as interrupted, and a live one as running."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from uihelp import with_store

from ksearch.server.web.app import build_app
from ksearch.worldmodel import runs

HOST = "testserver"


@pytest.fixture
def client(demo: tuple[Path, dict[str, int]]) -> Iterator[TestClient]:
    db, _ = demo
    with TestClient(build_app(db, host=HOST)) as c:
        yield c


def _running_held_by(db: Path, pid: int | None) -> None:
    async def go(store):  # type: ignore[no-untyped-def]
        await runs.claim(store, 1)
        await store.set_search_status(1, "running")

    with_store(db, go)
    if pid is not None:
        raw = sqlite3.connect(db)
        raw.execute("UPDATE search_runs SET pid = ? WHERE search_id = 1", (pid,))
        raw.commit()
        raw.close()


def test_a_dead_run_shows_as_interrupted(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, _ = demo
    before = client.get("/api/s/1/version").json()["version"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _running_held_by(db, dead.pid)
    assert client.get("/api/s/1/version").json()["version"] != before  # the open page refreshes
    view = client.get("/api/s/1/view").json()
    assert view["search"]["status"] == "interrupted"
    assert 'class="badge st-interrupted"' in view["summary_html"]
    index = client.get("/").text
    assert "st-interrupted" in index and "st-running" not in index
    (row,) = [r for r in client.get("/api/searches").json() if r["id"] == 1]
    assert row["status"] == "interrupted"


def test_a_live_run_shows_as_running(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, _ = demo
    _running_held_by(db, None)  # held by this (live) test process
    view = client.get("/api/s/1/view").json()
    assert view["search"]["status"] == "running" and "st-running" in view["summary_html"]
    assert "st-running" in client.get("/").text


def test_no_best_on_the_page_says_how_many_are_correct(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, _ = demo

    async def empty(store):  # type: ignore[no-untyped-def]
        await store.create_search("nothing-yet", "softmax")

    with_store(db, empty)
    summary = client.get("/api/s/nothing-yet/view").json()["summary_html"]
    assert "no timed correct attempt yet" in summary
    assert "(0 correct &amp; timed on a GPU)" in summary
