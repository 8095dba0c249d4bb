"""Several processes on one database, and a writer killed with SIGKILL mid-write."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ksearch.worldmodel.store import Store

WRITER = Path(__file__).with_name("wm_writer.py")
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def new_search(db: Path, name: str) -> int:
    async with await Store.open(db) as store:
        return (await store.create_search(name, "softmax")).id


def committed(stdout: str) -> tuple[set[int], set[int]]:
    nodes: set[int] = set()
    attempts: set[int] = set()
    for line in stdout.splitlines():
        kind, *ids = line.split()
        if kind in ("node", "attempt"):
            (nodes if kind == "node" else attempts).update(int(i) for i in ids)
    return nodes, attempts


def check_consistent(db: Path) -> None:
    """Invariants that only hold if every transaction was all-or-nothing."""
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        # record_attempt inserts the attempt and counts the visit in one transaction.
        mismatched = raw.execute(
            "SELECT n.id FROM nodes n LEFT JOIN attempts a ON a.node_id = n.id GROUP BY n.id "
            "HAVING n.visits != count(a.id)"
        ).fetchall()
        assert mismatched == []
        # apply_intents inserts each node with its edit-log entry in one transaction.
        unlogged = raw.execute(
            "SELECT id FROM nodes WHERE id NOT IN (SELECT node_id FROM edits WHERE op = 'insert')"
        ).fetchall()
        assert unlogged == []
    finally:
        raw.close()


@pytest.mark.slow
def test_two_processes_write_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    search_id = run(new_search(db, "shared"))
    count = 200
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), "burst", str(db), str(search_id), tag, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    for p in procs:  # wait until both are set up, then release them together
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err and "busy" not in err.lower()
    reported = [committed(out) for out, _ in outputs]
    assert all(len(nodes) == count for nodes, _ in reported)
    (alpha, _), (beta, _) = reported
    assert max(alpha) > min(beta) and max(beta) > min(alpha), "the two writers did not overlap"

    async def stored() -> tuple[dict[int, str], set[int]]:
        async with await Store.open(db) as store:
            nodes = {n.id: n.title for n in await store.list_nodes(search_id)}
            attempts = {a.id for a in await store.list_attempts(search_id)}
            return nodes, attempts

    nodes, attempts = run(stored())
    for (node_ids, attempt_ids), tag in zip(reported, ("alpha", "beta"), strict=True):
        assert node_ids <= set(nodes) and attempt_ids <= attempts
        assert sorted(nodes[i] for i in node_ids) == sorted(f"{tag} writer idea {i}" for i in range(count))
    assert len(nodes) == 2 * count + 1  # and the root
    check_consistent(db)


@pytest.mark.slow
def test_processes_creating_a_new_database_at_once(tmp_path: Path) -> None:
    db = tmp_path / "new" / "ksearch.db"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), "create", str(db), f"s{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("SELECT count(*) FROM searches").fetchone()[0] == 4
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    check_consistent(db)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_mid_write_loses_nothing_committed(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    db = tmp_path / "killed.db"
    search_id = run(new_search(db, "victim"))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), "loop", str(db), str(search_id)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        wanted = rng.randint(4, 40)
        while len(lines) < wanted:
            line = proc.stdout.readline()
            assert line, f"writer stopped early: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line)
        time.sleep(rng.uniform(0, 0.02))  # land somewhere inside the next transaction
    finally:
        os.kill(proc.pid, signal.SIGKILL)
    # read on through the text stream: readline() may have buffered lines past the last one it returned, which
    # communicate() (reading the raw pipe) would skip; the writer is dead, so the pipe ends
    rest = proc.stdout.read()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    node_ids, attempt_ids = committed("".join(lines) + rest)
    assert node_ids and attempt_ids

    async def stored() -> tuple[set[int], set[int]]:
        async with await Store.open(db) as store:  # the killed writer's file opens cleanly
            nodes = {n.id for n in await store.list_nodes(search_id)}
            attempts = {a.id for a in await store.list_attempts(search_id)}
            return nodes, attempts

    nodes, attempts = run(stored())
    assert node_ids <= nodes and attempt_ids <= attempts
    # At most the one batch in flight may have committed without being reported.
    assert len(nodes - node_ids - {min(nodes)}) in (0, 3)
    assert len(attempts - attempt_ids) in (0, 1)
    check_consistent(db)
