"""The database schema as a list of forward migrations.

`MIGRATIONS[i]` takes a database from version i to version i + 1. A released step is never edited:
a change to the schema is a new step at the end, so any older file can be brought up to date.
Each step is a tuple of single SQL statements, run in one transaction together with the version
bump, so a crash during a migration leaves the old version intact.
"""

from __future__ import annotations

import aiosqlite

from ksearch.worldmodel.errors import SchemaError

_V1: tuple[str, ...] = (
    """CREATE TABLE schema_version (version INTEGER NOT NULL)""",
    """INSERT INTO schema_version (version) VALUES (0)""",
    """CREATE TABLE searches (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        task TEXT NOT NULL,
        config TEXT NOT NULL CHECK (json_valid(config)),
        status TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'running', 'stopped', 'done')),
        round INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
        best_attempt_id INTEGER REFERENCES attempts(id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    """CREATE TABLE nodes (
        id INTEGER PRIMARY KEY,
        search_id INTEGER NOT NULL REFERENCES searches(id),
        parent_id INTEGER REFERENCES nodes(id),
        kind TEXT NOT NULL CHECK (kind IN ('root', 'intent')),
        title TEXT NOT NULL,
        rationale TEXT NOT NULL DEFAULT '',
        priority REAL NOT NULL DEFAULT 0.5 CHECK (priority >= 0 AND priority <= 1),
        difficulty INTEGER NOT NULL DEFAULT 3 CHECK (difficulty BETWEEN 1 AND 5),
        expected_speedup REAL CHECK (expected_speedup IS NULL OR expected_speedup > 0),
        notes TEXT NOT NULL DEFAULT '',
        author TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'open'
            CHECK (status IN ('open', 'active', 'closed', 'failed', 'pruned')),
        pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        vetoed INTEGER NOT NULL DEFAULT 0 CHECK (vetoed IN (0, 1)),
        round_created INTEGER NOT NULL DEFAULT 0,
        round_updated INTEGER NOT NULL DEFAULT 0,
        visits INTEGER NOT NULL DEFAULT 0 CHECK (visits >= 0),
        best_attempt_id INTEGER REFERENCES attempts(id),
        base_attempt_id INTEGER REFERENCES attempts(id),
        params TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params)),
        CHECK ((kind = 'root') = (parent_id IS NULL))
    )""",
    """CREATE UNIQUE INDEX nodes_one_root ON nodes (search_id) WHERE kind = 'root'""",
    """CREATE INDEX nodes_by_search_status ON nodes (search_id, status)""",
    """CREATE INDEX nodes_by_parent ON nodes (parent_id)""",
    """CREATE TABLE candidates (
        id TEXT PRIMARY KEY,
        language TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        search_id INTEGER NOT NULL REFERENCES searches(id),
        node_id INTEGER REFERENCES nodes(id),
        candidate_id TEXT NOT NULL REFERENCES candidates(id),
        base_attempt_id INTEGER REFERENCES attempts(id),
        round INTEGER NOT NULL DEFAULT 0,
        author TEXT NOT NULL,
        status TEXT,
        speedup REAL,
        evaluation TEXT CHECK (evaluation IS NULL OR json_valid(evaluation)),
        created_at TEXT NOT NULL
    )""",
    """CREATE INDEX attempts_by_search_node ON attempts (search_id, node_id)""",
    """CREATE TABLE edits (
        id INTEGER PRIMARY KEY,
        search_id INTEGER NOT NULL REFERENCES searches(id),
        op TEXT NOT NULL,
        node_id INTEGER REFERENCES nodes(id),
        payload TEXT NOT NULL CHECK (json_valid(payload)),
        author TEXT NOT NULL,
        round INTEGER NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    )""",
    """CREATE INDEX edits_by_search ON edits (search_id, id)""",
    """CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        search_id INTEGER REFERENCES searches(id),
        phase TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        latency_s REAL NOT NULL DEFAULT 0,
        request TEXT NOT NULL DEFAULT '',
        response TEXT NOT NULL DEFAULT '',
        error TEXT,
        created_at TEXT NOT NULL
    )""",
    """CREATE INDEX llm_calls_by_search ON llm_calls (search_id)""",
)

# v2: selection needs per-branch visit sums without walking the tree, so every intent records the
# top-level branch it belongs to (the root's child on its path; its own id for a root child).
# Also: the sandbox's key-value cache, and triggers that make the edit log append-only and an
# attempt's evaluation immutable once written.
_V2: tuple[str, ...] = (
    """ALTER TABLE nodes ADD COLUMN branch_id INTEGER""",
    """CREATE TEMP TABLE _branch_fill (id INTEGER PRIMARY KEY, branch INTEGER NOT NULL)""",
    """INSERT INTO _branch_fill (id, branch)
        WITH RECURSIVE walk(id, branch) AS (
            SELECT c.id, c.id FROM nodes AS c JOIN nodes AS r ON c.parent_id = r.id WHERE r.kind = 'root'
            UNION ALL
            SELECT n.id, walk.branch FROM nodes AS n JOIN walk ON n.parent_id = walk.id
        )
        SELECT id, branch FROM walk""",
    """UPDATE nodes SET branch_id = (SELECT branch FROM _branch_fill AS b WHERE b.id = nodes.id)
        WHERE kind = 'intent'""",
    """DROP TABLE _branch_fill""",
    """CREATE INDEX nodes_by_search_branch ON nodes (search_id, branch_id, visits)""",
    # Selection reads only the best open intent per (branch, pinned, difficulty) group; this index
    # holds exactly the selectable intents, so that read never touches the rest of the tree.
    """CREATE INDEX nodes_selectable ON nodes (search_id, branch_id, pinned, difficulty, priority)
        WHERE status = 'open' AND vetoed = 0 AND kind = 'intent'""",
    """CREATE TABLE cache (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL CHECK (json_valid(value)),
        created_at TEXT NOT NULL
    )""",
    """CREATE TRIGGER edits_no_update BEFORE UPDATE ON edits
        BEGIN SELECT RAISE(ABORT, 'the edit log is append-only'); END""",
    """CREATE TRIGGER edits_no_delete BEFORE DELETE ON edits
        BEGIN SELECT RAISE(ABORT, 'the edit log is append-only'); END""",
    """CREATE TRIGGER attempts_evaluation_immutable BEFORE UPDATE OF evaluation, status, speedup ON attempts
        WHEN OLD.evaluation IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'an attempt''s evaluation is written once'); END""",
    """CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts
        BEGIN SELECT RAISE(ABORT, 'attempts are never deleted'); END""",
)

# v3: an LLM call whose model has no known price records cost 0; `priced` says whether that 0 is real.
_V3: tuple[str, ...] = ("""ALTER TABLE llm_calls ADD COLUMN priced INTEGER NOT NULL DEFAULT 1""",)

# v4: timings from the CPU interpreter rank nothing, so every reader that ranks (best attempts, the tree
# views) must tell them apart without parsing each evaluation: `cpu_interpreted` says so, written once
# with the evaluation (and filled here from the stored evaluations).
_V4: tuple[str, ...] = (
    """ALTER TABLE attempts ADD COLUMN cpu_interpreted INTEGER NOT NULL DEFAULT 0
        CHECK (cpu_interpreted IN (0, 1))""",
    """UPDATE attempts SET cpu_interpreted = 1
        WHERE evaluation IS NOT NULL AND (
            json_extract(evaluation, '$.env.cpu_mode') = 1
            OR EXISTS (
                SELECT 1 FROM json_each(evaluation, '$.timings')
                WHERE json_extract(value, '$.device') = 'cpu-interpreter'
            )
        )""",
    """CREATE TRIGGER attempts_cpu_interpreted_immutable BEFORE UPDATE OF cpu_interpreted ON attempts
        WHEN OLD.evaluation IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'an attempt''s evaluation is written once'); END""",
)

# v5: which process runs a search. `status = 'running'` alone cannot tell a live driver from one that was
# killed (SIGKILL, a power cut): a run records its pid, host and process start time, and a heartbeat, so a
# reader can show a search left `running` by a dead process as interrupted (worldmodel/runs.py). A search
# already `running` when this step runs gets a holder of unknown pid whose last sign of life is its last
# update: it reads as interrupted once that is old.
_V5: tuple[str, ...] = (
    """CREATE TABLE search_runs (
        search_id INTEGER PRIMARY KEY REFERENCES searches(id),
        pid INTEGER,
        host TEXT NOT NULL DEFAULT '',
        proc_start TEXT,
        started_at TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL
    )""",
    """INSERT INTO search_runs (search_id, pid, host, proc_start, started_at, heartbeat_at)
        SELECT id, NULL, '', NULL, updated_at, updated_at FROM searches WHERE status = 'running'""",
)

# v6: the kernel bank (worldmodel/bank.py): lessons kept across searches. An entry is stored whole as JSON with the
# columns it is looked up by; a forgotten entry leaves its uid behind so that recording its search again does not
# bring it back; `bank_uses` is which entries a search's prompts showed (the entries may live in another file).
_V6: tuple[str, ...] = (
    """CREATE TABLE bank_entries (
        uid TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('intent', 'best', 'note')),
        source_db TEXT NOT NULL,
        source_search_id INTEGER NOT NULL,
        task TEXT NOT NULL,
        entry TEXT NOT NULL CHECK (json_valid(entry)),
        recorded_at TEXT NOT NULL
    )""",
    """CREATE INDEX bank_by_source ON bank_entries (source_db, source_search_id)""",
    """CREATE TABLE bank_forgotten (
        uid TEXT PRIMARY KEY,
        reason TEXT NOT NULL DEFAULT '',
        forgotten_at TEXT NOT NULL
    )""",
    """CREATE TABLE bank_uses (
        search_id INTEGER NOT NULL REFERENCES searches(id),
        uid TEXT NOT NULL,
        phase TEXT NOT NULL,
        round INTEGER NOT NULL,
        similarity REAL NOT NULL,
        why TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        PRIMARY KEY (search_id, uid, phase, round)
    )""",
)

# v7: suites (worldmodel/suites.py): many searches under one command. A suite's tasks are rows in the order given,
# each with its search once one is started and its status, so a stopped suite resumes where it stopped.
_V7: tuple[str, ...] = (
    """CREATE TABLE suites (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        config TEXT NOT NULL CHECK (json_valid(config)),
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE suite_tasks (
        suite_id INTEGER NOT NULL REFERENCES suites(id),
        idx INTEGER NOT NULL,
        task TEXT NOT NULL,
        search_id INTEGER REFERENCES searches(id),
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed', 'refused')),
        error TEXT NOT NULL DEFAULT '',
        started_at TEXT,
        ended_at TEXT,
        PRIMARY KEY (suite_id, idx)
    )""",
)

# v8: one baseline per search (worldmodel/baselines.py). The first eager and torch.compile readings a search's
# evaluations used are pinned per workload (generation 1); a re-measurement pins a new generation and restates every
# attempt's ratios against it. So an attempt's evaluation stays written once except for what restating changes: the
# baselines and the ratios divided by them (the trigger compares everything else, and the `speedup` column must
# stay the evaluation's own speedup vs eager).
_MEASURED = (
    "json_remove({e}, '$.speedup_vs_eager', '$.speedup_vs_compile', '$.timings') || (SELECT json_group_array("
    "json_remove(value, '$.eager_median_us', '$.compile_median_us', '$.compile_mode', '$.eager_baseline', "
    "'$.compile_baseline', '$.baseline_generation', '$.speedup_vs_eager', '$.speedup_vs_compile')) "
    "FROM json_each({e}, '$.timings'))"
)
_SPEEDUP = "json_extract(NEW.evaluation, '$.speedup_vs_eager')"


def _evaluation_trigger(measured: str) -> str:
    """The trigger that keeps an attempt's evaluation written once: `measured` ({e}: the evaluation) is what must
    not change; the status and the speedup column follow the evaluation."""
    return f"""CREATE TRIGGER attempts_evaluation_immutable BEFORE UPDATE OF evaluation, status, speedup ON attempts
        WHEN OLD.evaluation IS NOT NULL AND (
            NEW.evaluation IS NULL
            OR NEW.status IS NOT OLD.status
            OR {measured.format(e="NEW.evaluation")} IS NOT {measured.format(e="OLD.evaluation")}
            OR (NEW.speedup IS NULL) IS NOT (NEW.status IS NOT 'ok' OR {_SPEEDUP} IS NULL)
            OR abs(coalesce(NEW.speedup - {_SPEEDUP}, 0)) > 1e-9 * abs(coalesce(NEW.speedup, 0))
        )
        BEGIN SELECT RAISE(ABORT, 'an attempt''s evaluation is written once (restating its baselines aside)'); END"""


_V8: tuple[str, ...] = (
    """CREATE TABLE search_baselines (
        search_id INTEGER NOT NULL REFERENCES searches(id),
        generation INTEGER NOT NULL CHECK (generation >= 1),
        workload TEXT NOT NULL,
        eager TEXT CHECK (eager IS NULL OR json_valid(eager)),
        compile TEXT CHECK (compile IS NULL OR json_valid(compile)),
        pinned_at TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (search_id, generation, workload)
    )""",
    """CREATE TRIGGER search_baselines_no_delete BEFORE DELETE ON search_baselines
        BEGIN SELECT RAISE(ABORT, 'a pinned baseline is kept: a re-measurement pins a new generation'); END""",
    """DROP TRIGGER attempts_evaluation_immutable""",
    _evaluation_trigger(_MEASURED),
)

# v9: what a model call's provider read from and wrote to its prompt cache, and what that cost (of `cost_usd`). NULL
# tokens: the provider did not say (every call before this step: unknown, not zero).
_V9: tuple[str, ...] = (
    """ALTER TABLE llm_calls ADD COLUMN cache_read_tokens INTEGER CHECK (cache_read_tokens >= 0)""",
    """ALTER TABLE llm_calls ADD COLUMN cache_write_tokens INTEGER CHECK (cache_write_tokens >= 0)""",
    """ALTER TABLE llm_calls ADD COLUMN cache_read_usd REAL NOT NULL DEFAULT 0""",
    """ALTER TABLE llm_calls ADD COLUMN cache_write_usd REAL NOT NULL DEFAULT 0""",
)

# v10: a timing's baselines are `eager_us` and `compile_us` (the protocol's statistic: a mean under GPU MODE's and
# KernelBench's protocols), formerly `eager_median_us` and `compile_median_us`; evaluations written before keep the
# old names. Restating may change either, so the trigger of v8 sets both aside.
_MEASURED_V10 = _MEASURED.replace(
    "'$.eager_median_us', '$.compile_median_us',",
    "'$.eager_median_us', '$.compile_median_us', '$.eager_us', '$.compile_us',",
)
_V10: tuple[str, ...] = (
    """DROP TRIGGER attempts_evaluation_immutable""",
    _evaluation_trigger(_MEASURED_V10),
)

# v11: an intent may carry a handle, a name its proposer chose, unique in its search (tools take it for the id).
_V11: tuple[str, ...] = (
    """ALTER TABLE nodes ADD COLUMN handle TEXT CHECK (handle IS NULL OR length(handle) BETWEEN 1 AND 40)""",
    """CREATE UNIQUE INDEX nodes_by_handle ON nodes (search_id, handle) WHERE handle IS NOT NULL""",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11)
SCHEMA_VERSION = len(MIGRATIONS)


async def read_version(db: aiosqlite.Connection) -> int:
    """The schema version of an open database; 0 for an empty file."""
    # one statement, one snapshot: read apart, another process's first migration could commit between the two
    # reads and its tables be seen without their schema_version table
    async with db.execute(
        "SELECT count(*), coalesce(max(name = 'schema_version'), 0) FROM sqlite_master WHERE type = 'table'"
    ) as cur:
        tables, versioned = await cur.fetchone() or (0, 0)
        if not versioned:
            if tables > 0:
                raise SchemaError(
                    "this SQLite file has tables but no ksearch schema_version table: it is not a "
                    "ksearch database; pass --db with a new or existing ksearch database path"
                )
            return 0
    async with db.execute("SELECT version FROM schema_version") as cur:
        row = await cur.fetchone()
    if row is None:
        raise SchemaError("schema_version table is empty: the database is damaged")
    return int(row[0])


async def migrate(db: aiosqlite.Connection) -> int:
    """Bring the database to SCHEMA_VERSION. Safe when several processes open the same file at once.

    The connection must be in autocommit mode (isolation_level=None). Returns the final version.
    """
    if await read_version(db) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    # Take the write lock, then look again: another process may have migrated meanwhile.
    await db.execute("BEGIN IMMEDIATE")
    try:
        version = await read_version(db)
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"the database is at schema version {version}, newer than this ksearch understands "
                f"({SCHEMA_VERSION}); upgrade ksearch to open it"
            )
        for step in MIGRATIONS[version:]:
            for statement in step:
                await db.execute(statement)
        await db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
    except BaseException:
        await db.execute("ROLLBACK")
        raise
    await db.execute("COMMIT")
    return SCHEMA_VERSION
