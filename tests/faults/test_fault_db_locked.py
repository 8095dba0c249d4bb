"""Another process holds the database's write lock (BEGIN IMMEDIATE). For a few seconds: the CLI, the MCP
server and the driver wait and then succeed. For longer than the busy timeout (10 s): each stops with a
clear message, no traceback, and nothing half-written; once the lock is gone the same commands work."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.faultkit import (
    ROOT,
    committed,
    integrity,
    ksearch,
    ksearch_env,
    node_statuses,
    result_json,
    start_ksearch,
)
from tests.fixtures import SOFTMAX
from tests.fuzz.fuzzkit import RawStdio, dump_db

HOLD = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
con.execute("BEGIN IMMEDIATE")
con.execute("INSERT INTO cache (key, value, created_at) VALUES (?, '1', 'now')", (sys.argv[3],))
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("COMMIT")
print("released", flush=True)
"""


def _hold(db: Path, seconds: float, key: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), str(seconds), key], text=True, stdout=subprocess.PIPE
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def _prepare(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "k.db"
    env = ksearch_env(tmp_path / "scratch")
    p = ksearch(
        "run",
        SOFTMAX,
        "--name",
        "L",
        "--rounds",
        "1",
        "--max-attempts",
        "1",
        "--no-final",
        "--plain",
        "--db",
        str(db),
        env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return db, env


@pytest.mark.slow
def test_a_lock_held_for_seconds_is_waited_for(tmp_path: Path) -> None:
    db, env = _prepare(tmp_path)
    before = committed(db)
    mcp = RawStdio(db, ROOT, env)
    try:
        mcp.initialize()
        holder = _hold(db, 3.0, "holder-short")
        t0 = time.monotonic()
        cli = start_ksearch("intent", "add", "L", "added while the lock was held", "--db", str(db), env=env)
        driver = start_ksearch(
            "run",
            "--resume",
            "L",
            "--rounds",
            "1",
            "--max-attempts",
            "1",
            "--no-final",
            "--plain",
            "--json",
            "--db",
            str(db),
            env=env,
        )
        answer = mcp.call(
            "propose_intents",
            {"search": "L", "intents": [{"title": "proposed over MCP meanwhile"}]},
            timeout=60,
        )
        out, err = cli.communicate(timeout=60)
        waited = time.monotonic() - t0
        d_out, d_err = driver.communicate(timeout=300)
        assert holder.wait(timeout=30) == 0
    finally:
        mcp.close()
    assert cli.returncode == 0, out + err
    assert waited >= 2.5, f"the CLI finished after {waited:.1f} s, before the lock was released"
    assert answer is not None and not answer["result"].get("isError"), answer
    assert driver.returncode == 0, d_out[-2000:] + d_err[-2000:]
    res = result_json(d_out)
    assert res["rounds_run"] == 1  # the driver got its round in
    after = committed(db)
    for table, rows in before.items():
        assert {k: after[table][k] for k in rows} == rows, table
    dump = dump_db(db)
    titles = [r[4] for r in dump["nodes"]]
    assert "added while the lock was held" in titles and "proposed over MCP meanwhile" in titles
    assert any(r[0] == "holder-short" for r in dump["cache"])  # the other writer's work is there too
    assert "active" not in node_statuses(db) and integrity(db) == "ok"


@pytest.mark.slow
def test_a_lock_held_past_the_busy_timeout_is_a_clear_error_and_nothing_is_half_written(
    tmp_path: Path,
) -> None:
    db, env = _prepare(tmp_path)
    mcp = RawStdio(db, ROOT, env)
    try:
        mcp.initialize()
        before = dump_db(db)
        # the busy timeout is 10 s: the clients must start within the other 12 (a loaded machine takes seconds)
        holder = _hold(db, 22.0, "holder-long")
        cli = start_ksearch("intent", "add", "L", "never written", "--db", str(db), env=env)
        driver = start_ksearch(
            "run", "--resume", "L", "--rounds", "1", "--no-final", "--plain", "--db", str(db), env=env
        )
        answer = mcp.call(
            "propose_intents", {"search": "L", "intents": [{"title": "never proposed"}]}, timeout=60
        )
        out, err = cli.communicate(timeout=60)
        d_out, d_err = driver.communicate(timeout=120)
        assert holder.wait(timeout=30) == 0
        after = dump_db(db)

        for code, text in ((cli.returncode, out + err), (driver.returncode, d_out + d_err)):
            text = " ".join(text.split())  # rich wraps long lines
            assert code == 1, text[-1500:]
            assert "is locked by another writer" in text and "Traceback" not in text, text[-1500:]
        assert "ksearch run --resume L" in " ".join((d_out + d_err).split())  # says how to continue
        assert answer is not None and answer["result"]["isError"], answer
        assert "is locked by another writer" in json.dumps(answer)
        # nothing of theirs was written; the lock holder's own row is the only change
        assert after["cache"] == before["cache"] + [r for r in after["cache"] if r[0] == "holder-long"]
        assert {t: rows for t, rows in after.items() if t != "cache"} == {
            t: rows for t, rows in before.items() if t != "cache"
        }

        # the lock is gone: the same requests go through
        again = mcp.call(
            "propose_intents", {"search": "L", "intents": [{"title": "proposed after the lock"}]}
        )
        assert again is not None and not again["result"].get("isError"), again
    finally:
        mcp.close()
    p = ksearch("intent", "add", "L", "written after the lock", "--db", str(db), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert integrity(db) == "ok"
