"""Schema versions: an older database is migrated forward with its data intact; a newer one is refused."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from ksearch.worldmodel.errors import SchemaError
from ksearch.worldmodel.render import render_tree
from ksearch.worldmodel.schema import MIGRATIONS, SCHEMA_VERSION
from ksearch.worldmodel.select import select_action, select_next
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio

NOW = "2026-01-01T00:00:00+00:00"


def test_released_v1_is_frozen() -> None:
    # v1 files exist in the wild: its statements must never change (add a new step instead).
    digest = hashlib.sha256("\n;\n".join(MIGRATIONS[0]).encode()).hexdigest()
    assert digest == "ca262eac9909653a51387f0025b0145200d3b6fbce490fc95ce04239154db9f0"


def make_v1(path: Path) -> None:
    """A version-1 database written by hand: two branches, a nested intent, an attempt, edits, a call."""
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("UPDATE schema_version SET version = 1")
    db.execute(
        "INSERT INTO searches (id, name, task, config, status, round, created_at, updated_at) "
        "VALUES (1, 'old', 'softmax', ?, 'stopped', 4, ?, ?)",
        (json.dumps({"difficulty_cap": 3}), NOW, NOW),
    )
    nodes = [
        # id, parent, kind, title, priority, difficulty, status, visits
        (1, None, "root", "root", 0.5, 3, "open", 0),
        (2, 1, "intent", "online softmax", 0.9, 2, "closed", 3),
        (3, 1, "intent", "warp per row", 0.4, 3, "open", 0),
        (4, 2, "intent", "vectorized loads", 0.8, 2, "open", 0),
        (5, 4, "intent", "two-pass with cache", 0.3, 5, "open", 1),
    ]
    for nid, parent, kind, title, prio, diff, status, visits in nodes:
        db.execute(
            "INSERT INTO nodes (id, search_id, parent_id, kind, title, priority, difficulty, author, status, "
            "visits, notes) VALUES (?, 1, ?, ?, ?, ?, ?, 'llm:old', ?, ?, ?)",
            (nid, parent, kind, title, prio, diff, status, visits, f"notes of {nid}"),
        )
    db.execute("INSERT INTO candidates VALUES ('cabc', 'triton', 'class ModelNew: pass', ?)", (NOW,))
    evaluation = {"status": "ok", "speedup_vs_eager": 1.7}
    db.execute(
        "INSERT INTO attempts (id, search_id, node_id, candidate_id, round, author, status, speedup, evaluation, "
        "created_at) VALUES (1, 1, 2, 'cabc', 1, 'llm:old', 'ok', 1.7, ?, ?)",
        (json.dumps(evaluation), NOW),
    )
    db.execute("UPDATE nodes SET best_attempt_id = 1 WHERE id = 2")
    db.execute("UPDATE searches SET best_attempt_id = 1 WHERE id = 1")
    db.execute(
        "INSERT INTO edits (search_id, op, node_id, payload, author, round, reason, created_at) "
        "VALUES (1, 'insert', 3, '{\"title\": \"warp per row\"}', 'llm:old', 1, 'init', ?)",
        (NOW,),
    )
    db.execute(
        "INSERT INTO llm_calls (search_id, phase, provider, model, tokens_in, tokens_out, cost_usd, created_at) "
        "VALUES (1, 'init', 'anthropic', 'm', 10, 5, 0.5, ?)",
        (NOW,),
    )
    db.commit()
    db.close()


async def test_v1_database_is_migrated_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    make_v1(path)
    async with await Store.open(path) as store:
        search = await store.get_search("old")
        assert (search.status, search.round, search.best_attempt_id) == ("stopped", 4, 1)
        assert search.config.difficulty_cap == 3
        nodes = await store.list_nodes(search.id)
        assert [(n.id, n.title, n.notes) for n in nodes][1] == (2, "online softmax", "notes of 2")
        assert [n.status for n in nodes] == ["open", "closed", "open", "open", "open"]
        best = await store.best_attempt(search.id)
        assert best is not None and best.speedup == 1.7 and best.candidate_id == "cabc"
        assert (await store.list_edits(search.id))[0].payload == {"title": "warp per row"}
        assert (await store.llm_totals(search.id)).usd == 0.5
        # New in v9: what the prompt cache served; a call recorded before is unknown there, not zero
        (call,) = await store.list_llm_calls(search.id)
        assert (call.cache_read_tokens, call.cache_write_tokens, call.cache_read_usd) == (None, None, 0.0)
        assert (await store.llm_totals(search.id)).cache_unreported_calls == 1
        # New in v2: the cache table, and each intent's branch backfilled from the tree.
        await store.cache_put("k", [1, 2])
        assert await store.cache_get("k") == [1, 2]
        async with store.reading() as db:
            branches = dict(await (await db.execute("SELECT id, branch_id FROM nodes")).fetchall())
            version = (await (await db.execute("SELECT version FROM schema_version")).fetchone())[0]
        assert branches == {1: None, 2: 2, 3: 3, 4: 2, 5: 2}
        assert version == SCHEMA_VERSION
        # Selection works on the migrated tree and agrees with the pure definition.
        chosen = await select_action(store, search.id)
        assert chosen.node_id == select_next(nodes, 3).node_id == 4
    # Opening again is a no-op.
    async with await Store.open(path) as store:
        assert len(await store.list_nodes(1)) == 5


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    async with await Store.open(path):
        pass
    raw = sqlite3.connect(path)
    raw.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    raw.commit()
    raw.close()
    with pytest.raises(SchemaError, match="upgrade ksearch"):
        await Store.open(path)


async def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE photos (id INTEGER)")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaError, match="not a ksearch database"):
        await Store.open(path)


async def test_cpu_interpreter_attempts_are_marked_when_migrating(tmp_path: Path) -> None:
    """Before v4 a CPU-interpreter timing could become the search's best; after it, it ranks nothing."""
    path = tmp_path / "v1.db"
    make_v1(path)
    cpu_timing = {
        "workload": "smoke",
        "device": "cpu-interpreter",
        "median_us": 10.0,
        "iqr_us": 1.0,
        "ci_low_us": 9.0,
        "ci_high_us": 11.0,
        "n": 3,
    }
    evaluations = {
        2: {"status": "ok", "speedup_vs_eager": 6.0, "timings": [cpu_timing]},
        3: {"status": "ok", "speedup_vs_eager": 5.0, "env": {"device": "cpu-interpreter", "cpu_mode": True}},
        4: {"status": "incorrect", "timings": [cpu_timing]},
    }
    raw = sqlite3.connect(path)
    for aid, ev in evaluations.items():
        raw.execute(
            "INSERT INTO attempts (id, search_id, node_id, candidate_id, round, author, status, speedup, "
            "evaluation, created_at) VALUES (?, 1, 5, 'cabc', 2, 'tuner', ?, ?, ?, ?)",
            (aid, ev["status"], ev.get("speedup_vs_eager"), json.dumps(ev), NOW),
        )
    raw.execute("UPDATE nodes SET best_attempt_id = 2 WHERE id = 5")
    raw.execute("UPDATE searches SET best_attempt_id = 2 WHERE id = 1")  # the old rule allowed this
    raw.commit()
    raw.close()
    async with await Store.open(path) as store:
        speedups = await store.attempt_speedups(1)
        assert speedups.cpu_interpreted == {2, 3}  # the incorrect one is no correct code either way
        assert dict(speedups) == {1: 1.7, 2: None, 3: None, 4: None}
        text = render_tree(await store.list_nodes(1), speedups, best_attempt_id=2)
        assert "#5 [open] p0.30 d5 best correct (CPU interpreter: not timed) tries 1" in text
        assert "BEST" not in text
        # The first GPU-timed correct attempt takes the search's best from the CPU one, asked or not.
        gpu = await store.record_attempt(
            1, 3, "cabc", {"status": "ok", "speedup_vs_eager": 1.1}, better=lambda a, b: False
        )
        assert (await store.get_search(1)).best_attempt_id == gpu.id
        assert (await store.get_node(5)).best_attempt_id == 2  # a node keeps its first correct code
