"""The persistent world model: one SQLite file (WAL) shared by the server, the driver, the CLI and the UI.

Design points:
- Several processes may write at once. Every write runs in a `BEGIN IMMEDIATE` transaction (the write
  lock is taken up front, so two writers never deadlock) and SQLite's busy timeout makes a writer wait
  for the lock instead of failing with "database is locked".
- Every multi-row change is one transaction: a crash (even SIGKILL) leaves either all of it or none.
- Results enter only through `record_attempt`; no other method writes an evaluation, a node's best
  attempt or a search's best (the integrity rule). Tree edits live in `ksearch.worldmodel.edits`.
- Inside one process, one `Store` serialises its own coroutines with an asyncio lock, so a read from
  one task never lands inside another task's transaction.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args

import aiosqlite
from pydantic import BaseModel, ValidationError

from ksearch.worldmodel import baselines, rows
from ksearch.worldmodel.errors import Conflict, InvalidTransition, NotFound, StoreBusy
from ksearch.worldmodel.models import (
    LANGUAGES,
    Attempt,
    AttemptSpeedups,
    Candidate,
    Edit,
    Evaluation,
    FinalOutcome,
    FinalVerdict,
    LLMCall,
    LLMPhase,
    Node,
    Search,
    SearchConfig,
    SearchStatus,
    candidate_id,
)
from ksearch.worldmodel.schema import migrate

Better = Callable[[Attempt, Attempt], bool]
"""`better(a, b)` is True when attempt `a` should replace `b` as a best attempt."""

ROOT_AUTHOR = "ksearch"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+\- ]{0,99}$")


def speedup_better(a: Attempt, b: Attempt) -> bool:
    """Default comparison: a higher speedup vs eager wins; on a tie the older attempt stays best.

    An attempt with a speedup beats one without (e.g. a correct run that could not be timed).
    """
    sa, sb = a.speedup, b.speedup
    if sa is None:
        return False
    return sb is None or sa > sb


class LLMTotals(BaseModel):
    calls: int
    tokens_in: int
    tokens_out: int
    usd: float
    unpriced_calls: int = 0  # calls to models without a known price: `usd` leaves them out
    # The prompt cache, over the calls whose provider said what it read from it (`cache_unreported_calls`: those with
    # input tokens that did not; their input is in none of these figures)
    cache_read_tokens: int = 0  # input read from the cache
    cache_write_tokens: int = 0  # input written to it at a write rate (by the calls that said so)
    cache_write_unreported_calls: int = 0  # calls that said what they read but not what they wrote
    uncached_tokens_in: int = 0  # input billed at the full input rate
    cache_read_usd: float = 0.0
    cache_write_usd: float = 0.0
    cache_unreported_calls: int = 0


class Store:
    """Async access to a ksearch database. Open with `await Store.open(path)` or `async with`."""

    def __init__(self, db: aiosqlite.Connection, path: Path, busy_timeout_s: float = 10.0) -> None:
        self._db = db
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_s: float = 10.0) -> Store:
        """Open (creating if needed) the database at `path` and migrate it to the current schema.

        Creates parent directories. WAL journal, foreign keys on, synchronous=FULL (a committed change
        survives a crash of the process or the machine), and a busy timeout of `busy_timeout_s` so a
        writer waits for another process's transaction instead of failing.
        """
        p = Path(path)
        if str(path) != ":memory:":
            p.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA foreign_keys = ON")
            await db.execute("PRAGMA synchronous = FULL")
            await migrate(db)
        except BaseException:
            await db.close()
            raise
        return cls(db, p, busy_timeout_s)

    async def close(self) -> None:
        async with self._lock:
            await self._db.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction (BEGIN IMMEDIATE … COMMIT, rolled back on any exception).

        For `worldmodel` modules only: they use the `rows` helpers on the yielded connection and must
        not call other `Store` methods inside (the store's lock is held).
        """
        async with self._lock:
            try:
                await self._begin_immediate()
                yield self._db
            except BaseException:
                await self._rollback()
                raise
            await self._db.execute("COMMIT")

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[aiosqlite.Connection]:
        """A read transaction: several SELECTs see one consistent snapshot of the file."""
        async with self._lock:
            try:
                await self._db.execute("BEGIN")
                yield self._db
            except BaseException:
                await self._rollback()
                raise
            await self._db.execute("COMMIT")

    async def _begin_immediate(self) -> None:
        try:
            await self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise StoreBusy(
                f"the database {self.path} is locked by another writer: waited {self.busy_timeout_s:g} s for "
                "it and wrote nothing. Another ksearch process (run, serve, ui) or a tool holding a write "
                "transaction has it; try again when it is done"
            ) from exc

    async def _rollback(self) -> None:
        # Also reached when the task was cancelled while BEGIN was queued: the connection's thread runs
        # statements in order, so this ROLLBACK lands after that BEGIN whether or not it has run yet.
        try:
            await self._db.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            if "no transaction is active" not in str(exc):
                raise

    # ------------------------------------------------------------------ searches

    async def create_search(
        self, name: str, task: str, config: SearchConfig | Mapping[str, Any] | None = None
    ) -> Search:
        """Create a search and its root node (kind "root", title "root"). Names are unique.

        A name is 1–100 characters of letters, digits, space and `._:@+-`, starting with a letter or
        digit, and not all digits (so `ksearch tree SEARCH` can tell names from ids).
        """
        name = name.strip()
        if not _NAME_RE.match(name) or name.isdigit():
            raise ValueError(
                f"bad search name {name!r}; accepted: 1-100 characters of letters, digits, space and "
                "._:@+- starting with a letter or digit, not all digits"
            )
        if not task.strip():
            raise ValueError("task is empty; accepted: a built-in task name or a path to a task file")
        cfg = _config(config)
        now = rows.now_iso()
        async with self.transaction() as db:
            existing = await rows.fetchone(db, "SELECT id FROM searches WHERE name = ?", (name,))
            if existing is not None:
                raise Conflict(
                    f"a search named {name!r} already exists (id {existing[0]}); "
                    "accepted: a new name, or resume the existing search"
                )
            cur = await db.execute(
                "INSERT INTO searches (name, task, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (name, task, cfg.model_dump_json(), now, now),
            )
            search_id = cur.lastrowid
            assert search_id is not None
            root_id = await rows.insert_node(
                db, search_id=search_id, parent=None, title="root", author=ROOT_AUTHOR, round=0
            )
            await rows.log_edit(
                db,
                search_id=search_id,
                op="insert",
                node_id=root_id,
                payload={"kind": "root", "title": "root", "parent_id": None},
                author=ROOT_AUTHOR,
                round=0,
                reason="search created",
            )
            return await rows.search_row(db, search_id)

    async def get_search(self, id_or_name: int | str) -> Search:
        """A search by id (int or digit string) or by name; `NotFound` lists what exists."""
        async with self._lock:
            key = id_or_name.strip() if isinstance(id_or_name, str) else id_or_name
            if isinstance(key, int) or key.isdecimal():
                return await rows.search_row(self._db, int(key))
            row = None
            if key.encode("utf-8", "replace").decode("utf-8") == key:  # a lone surrogate names nothing
                row = await rows.fetchone(
                    self._db, f"SELECT {rows.SEARCH_COLUMNS} FROM searches WHERE name = ?", (key,)
                )
            if row is None:
                shown = repr(key[:80]) + (f" (first 80 of {len(key)} characters)" if len(key) > 80 else "")
                raise NotFound(f"no search named {shown}; {await rows.describe_searches(self._db)}")
            return rows.search_from_row(row)

    async def list_searches(self) -> list[Search]:
        async with self._lock:
            found = await rows.fetchall(self._db, f"SELECT {rows.SEARCH_COLUMNS} FROM searches ORDER BY id")
        return [rows.search_from_row(r) for r in found]

    async def set_search_status(self, search_id: int, status: SearchStatus) -> Search:
        return await self.set_search_fields(search_id, status=status)

    async def bump_round(self, search_id: int) -> int:
        """Advance the search to its next round; returns the new round number."""
        async with self.transaction() as db:
            await rows.search_row(db, search_id)
            await db.execute(
                "UPDATE searches SET round = round + 1, updated_at = ? WHERE id = ?",
                (rows.now_iso(), search_id),
            )
            row = await rows.fetchone(db, "SELECT round FROM searches WHERE id = ?", (search_id,))
            return int(row[0])

    async def set_search_fields(
        self,
        search_id: int,
        *,
        name: str | None = None,
        task: str | None = None,
        config: SearchConfig | Mapping[str, Any] | None = None,
        status: SearchStatus | None = None,
    ) -> Search:
        """Change non-result fields of a search. The best attempt is not settable here."""
        sets: dict[str, Any] = {}
        if name is not None:
            name = name.strip()
            if not _NAME_RE.match(name) or name.isdigit():
                raise ValueError(f"bad search name {name!r}; accepted: see create_search")
            sets["name"] = name
        if task is not None:
            sets["task"] = task
        if config is not None:
            sets["config"] = _config(config).model_dump_json()
        if status is not None:
            if status not in get_args(SearchStatus):
                raise ValueError(
                    f"bad search status {status!r}; accepted: {', '.join(get_args(SearchStatus))}"
                )
            sets["status"] = status
        async with self.transaction() as db:
            await rows.search_row(db, search_id)
            if "name" in sets:
                clash = await rows.fetchone(
                    db, "SELECT id FROM searches WHERE name = ? AND id != ?", (sets["name"], search_id)
                )
                if clash is not None:
                    raise Conflict(f"a search named {sets['name']!r} already exists (id {clash[0]})")
            sets["updated_at"] = rows.now_iso()
            assignments = ", ".join(f"{k} = ?" for k in sets)
            await db.execute(f"UPDATE searches SET {assignments} WHERE id = ?", (*sets.values(), search_id))
            return await rows.search_row(db, search_id)

    # ------------------------------------------------------------------ nodes

    async def get_node(self, node_id: int) -> Node:
        async with self._lock:
            return await rows.node(self._db, node_id)

    async def list_nodes(self, search_id: int) -> list[Node]:
        """Every node of a search, in id order (the root first)."""
        async with self.reading() as db:
            await rows.search_row(db, search_id)
            found = await rows.fetchall(
                db, f"SELECT {rows.NODE_COLUMNS} FROM nodes WHERE search_id = ? ORDER BY id", (search_id,)
            )
        return [rows.node_from_row(r) for r in found]

    async def children(self, node_id: int) -> list[Node]:
        async with self.reading() as db:
            await rows.node(db, node_id)
            found = await rows.fetchall(
                db, f"SELECT {rows.NODE_COLUMNS} FROM nodes WHERE parent_id = ? ORDER BY id", (node_id,)
            )
        return [rows.node_from_row(r) for r in found]

    async def root(self, search_id: int) -> Node:
        async with self.reading() as db:
            await rows.search_row(db, search_id)
            row = await rows.fetchone(
                db,
                f"SELECT {rows.NODE_COLUMNS} FROM nodes WHERE search_id = ? AND kind = 'root'",
                (search_id,),
            )
        if row is None:
            raise NotFound(f"search {search_id} has no root node (damaged database)")
        return rows.node_from_row(row)

    async def node_counts(self, search_id: int) -> dict[str, int]:
        """How many intents (the root excluded) have each status."""
        async with self._lock:
            found = await rows.fetchall(
                self._db,
                "SELECT status, count(*) FROM nodes WHERE search_id = ? AND kind = 'intent' GROUP BY status",
                (search_id,),
            )
        return {str(s): int(n) for s, n in found}

    async def set_node_status(self, node_id: int, status: Literal["open", "active"]) -> Node:
        """Claim an open intent for refinement (open → active) or release a claim (active → open)."""
        async with self.transaction() as db:
            return await rows.set_node_status(db, node_id, status)

    async def unclaim(self, search_id: int, node_id: int, round: int) -> Node:
        """Undo a claim that produced nothing (the policy declined the intent before any attempt): the intent is
        open again and, unless a later round began meanwhile, round `round` is not counted."""
        async with self.transaction() as db:
            node = await rows.node(db, node_id)
            if node.search_id != search_id or node.status.value != "active":
                raise InvalidTransition(
                    f"node #{node_id} is {node.status.value}, not a claimed intent of this search"
                )
            await db.execute("UPDATE nodes SET status = 'open' WHERE id = ?", (node_id,))
            await db.execute(
                "UPDATE searches SET round = round - 1, updated_at = ? WHERE id = ? AND round = ?",
                (rows.now_iso(), search_id, round),
            )
            return await rows.node(db, node_id)

    async def close_node(self, node_id: int, status: Literal["closed", "failed"]) -> Node:
        """End refinement of an intent: `closed` if it has a correct attempt, `failed` if it has none.

        Accepted from open or active; repeating the current status is a no-op, and a node pruned while
        it was being refined stays pruned (returned unchanged).
        """
        async with self.transaction() as db:
            return await rows.close_node(db, node_id, status)

    # ------------------------------------------------------------------ candidates

    async def put_candidate(self, source: str, language: str) -> Candidate:
        """Store a candidate's source; idempotent (the id is the hash of language and source)."""
        if language not in LANGUAGES:
            raise ValueError(f"bad language {language!r}; accepted: {', '.join(LANGUAGES)}")
        if not source.strip():
            raise ValueError("candidate source is empty; accepted: a Python module defining ModelNew")
        cid = candidate_id(source, language)
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR IGNORE INTO candidates (id, language, source, created_at) VALUES (?, ?, ?, ?)",
                (cid, language, source, rows.now_iso()),
            )
            row = await rows.fetchone(
                db, "SELECT id, language, source, created_at FROM candidates WHERE id = ?", (cid,)
            )
        return rows.candidate_from_row(row)

    async def get_candidate(self, cand_id: str) -> Candidate:
        async with self._lock:
            row = await rows.fetchone(
                self._db, "SELECT id, language, source, created_at FROM candidates WHERE id = ?", (cand_id,)
            )
        if row is None:
            raise NotFound(f"no candidate {cand_id!r}; store the source with put_candidate first")
        return rows.candidate_from_row(row)

    # ------------------------------------------------------------------ attempts (the only result path)

    async def record_attempt(
        self,
        search_id: int,
        node_id: int | None,
        candidate_id: str,
        evaluation: Evaluation | Mapping[str, Any],
        base_attempt_id: int | None = None,
        round: int | None = None,
        author: str = "human",
        *,
        better: Better | None = None,
        node_better: Better | None = None,
    ) -> Attempt:
        """Record one evaluated candidate. The only path that writes results.

        CPU-interpreter timings rank nothing (see `_replaces`): such an attempt becomes a node's best only
        as its first correct attempt, never displaces a correct best, and never becomes the search's best.
        A pure-PyTorch attempt (`Evaluation.pure_pytorch`) keeps its numbers but is never a best.

        In one transaction: store the attempt; if `evaluation.status == "ok"`, make it the node's and
        the search's best attempt when `better(new, current)` (default `speedup_better`: higher
        speedup vs eager, ties keep the older; `node_better`, when given, decides for the node); count a visit
        on the node. The node's status is left
        alone: closing an intent is the end of its refine phase (`close_node`), not of one attempt. `round` defaults to the search's round.
        """
        ev = evaluation if isinstance(evaluation, Evaluation) else Evaluation.model_validate(evaluation)
        is_better = better or speedup_better
        async with self.transaction() as db:
            search = await rows.search_row(db, search_id)
            node: Node | None = None
            if node_id is not None:
                node = await rows.node(db, node_id)
                if node.search_id != search_id:
                    raise NotFound(f"node #{node_id} belongs to search {node.search_id}, not {search_id}")
            if await rows.fetchone(db, "SELECT 1 FROM candidates WHERE id = ?", (candidate_id,)) is None:
                raise NotFound(f"no candidate {candidate_id!r}; store the source with put_candidate first")
            if base_attempt_id is not None:
                base = await rows.attempt(db, base_attempt_id)
                if base.search_id != search_id:
                    raise NotFound(f"base attempt #{base_attempt_id} belongs to search {base.search_id}")
            rnd = search.round if round is None else round
            # divided by the search's one pinned baseline (pinned here by its first evaluation)
            ev = await baselines.apply_in(db, search_id, ev)
            speedup = ev.speedup_vs_eager if ev.status == "ok" else None
            cur = await db.execute(
                "INSERT INTO attempts (search_id, node_id, candidate_id, base_attempt_id, round, author, "
                "status, speedup, evaluation, created_at, cpu_interpreted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    search_id,
                    node_id,
                    candidate_id,
                    base_attempt_id,
                    rnd,
                    author,
                    ev.status,
                    speedup,
                    ev.model_dump_json(),
                    rows.now_iso(),
                    int(ev.cpu_interpreted),
                ),
            )
            assert cur.lastrowid is not None
            new = await rows.attempt(db, cur.lastrowid)
            if ev.status == "ok":
                if node is not None and await _replaces(
                    db, new, node.best_attempt_id, node_better or is_better
                ):
                    await db.execute("UPDATE nodes SET best_attempt_id = ? WHERE id = ?", (new.id, node.id))
                if await _replaces(db, new, search.best_attempt_id, is_better, search=True):
                    await db.execute(
                        "UPDATE searches SET best_attempt_id = ? WHERE id = ?", (new.id, search_id)
                    )
            if node is not None:
                # Recording never changes an intent's status: its refine phase ends when the loop closes it
                # (close_node), so attempt 2 of an intent is not written against a node already `closed`.
                await db.execute("UPDATE nodes SET visits = visits + 1 WHERE id = ?", (node.id,))
            await db.execute("UPDATE searches SET updated_at = ? WHERE id = ?", (rows.now_iso(), search_id))
            return new

    async def get_attempt(self, attempt_id: int) -> Attempt:
        async with self._lock:
            return await rows.attempt(self._db, attempt_id)

    async def list_attempts(self, search_id: int, node_id: int | None = None) -> list[Attempt]:
        """Attempts of a search (or of one node), oldest first."""
        sql = f"SELECT {rows.ATTEMPT_COLUMNS} FROM attempts WHERE search_id = ?"
        params: tuple[int, ...] = (search_id,)
        if node_id is not None:
            sql += " AND node_id = ?"
            params += (node_id,)
        async with self._lock:
            found = await rows.fetchall(self._db, sql + " ORDER BY id", params)
        return [rows.attempt_from_row(r) for r in found]

    async def best_attempt(self, search_id: int) -> Attempt | None:
        async with self.reading() as db:
            search = await rows.search_row(db, search_id)
            if search.best_attempt_id is None:
                return None
            return await rows.attempt(db, search.best_attempt_id)

    async def record_final(
        self,
        search_id: int,
        outcomes: list[FinalOutcome],
        rows_json: list[dict[str, Any]],
        *,
        beaten_by: int | None = None,
        beaten_because: str = "",
    ) -> FinalVerdict:
        """Record a search's final evaluation and settle its best, in one transaction.

        The best keeps its place if its candidate passed (or was not re-measured), unless `beaten_by` names a
        re-measured attempt that passed and that the caller's comparison found faster beyond noise
        (`beaten_because` says how). If it failed, the first outcome that passed and whose search-phase
        evaluation ranks takes its place (outcomes come in the final evaluation's order, best first), or none
        does: a kernel that only works on the search workloads is not the result. The rows and the verdict
        are kept under `final:<search id>`."""
        async with self.transaction() as db:
            search = await rows.search_row(db, search_id)
            before = search.best_attempt_id
            after, lost = before, ""
            if before is not None:
                best = await rows.attempt(db, before)
                failed = next(
                    (o for o in outcomes if o.candidate_id == best.candidate_id and not o.passed), None
                )
                if failed is not None:
                    lost = failed.why or failed.status
                    after = None
                    for o in outcomes:
                        if not o.passed:
                            continue
                        a = await rows.attempt(db, o.attempt_id)
                        if a.search_id == search_id and a.evaluation is not None and a.evaluation.ranks:
                            after = a.id
                            break
                    await db.execute(
                        "UPDATE searches SET best_attempt_id = ? WHERE id = ?", (after, search_id)
                    )
            beaten = ""
            if not lost and beaten_by is not None and beaten_by != before:
                passed = any(o.attempt_id == beaten_by and o.passed for o in outcomes)
                a = await rows.attempt(db, beaten_by)
                ok = a.search_id == search_id and a.evaluation is not None and a.evaluation.ranks
                if not (passed and ok):
                    raise Conflict(
                        f"attempt #{beaten_by} cannot replace the best: it did not pass the final evaluation or "
                        "is no ranked attempt of this search"
                    )
                after, beaten = beaten_by, beaten_because or "faster in the final evaluation"
                await db.execute("UPDATE searches SET best_attempt_id = ? WHERE id = ?", (after, search_id))
            verdict = FinalVerdict(
                outcomes=outcomes,
                best_before=before,
                best_after=after,
                lost_because=lost,
                beaten_because=beaten,
                round=search.round,
            )
            # the round it speaks for: rounds started after it (budgets raised) call for another
            value = rows.dumps(
                {"rows": rows_json, "verdict": verdict.model_dump(mode="json"), "round": search.round}
            )
            await db.execute(
                "INSERT INTO cache (key, value, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                (f"final:{search_id}", value, rows.now_iso()),
            )
            await db.execute("UPDATE searches SET updated_at = ? WHERE id = ?", (rows.now_iso(), search_id))
            return verdict

    async def final_verdict(self, search_id: int) -> FinalVerdict | None:
        """What the search's last final evaluation decided about its best (None: none was recorded)."""
        got = await self.cache_get(f"final:{search_id}")
        if not got or "verdict" not in got:
            return None
        return FinalVerdict.model_validate({**got["verdict"], "round": got.get("round")})

    async def attempt_speedups(self, search_id: int) -> AttemptSpeedups:
        """attempt id → speedup vs eager (None unless ok and GPU-timed): cheap input for rendering.

        Correct attempts timed on the CPU interpreter map to None and are listed in `cpu_interpreted`.
        """
        async with self._lock:
            found = await rows.fetchall(
                self._db,
                "SELECT id, speedup, status = 'ok' AND cpu_interpreted, "
                "json_array_length(evaluation, '$.timings') FROM attempts WHERE search_id = ?",
                (search_id,),
            )
        return AttemptSpeedups(
            {int(i): None if cpu else s for i, s, cpu, _ in found},
            (int(i) for i, _, cpu, _ in found if cpu),
            {int(i): int(n) for i, s, cpu, n in found if s is not None and not cpu and n},
        )

    # ------------------------------------------------------------------ edit log

    async def list_edits(self, search_id: int) -> list[Edit]:
        """The append-only edit log of a search, oldest first."""
        async with self._lock:
            found = await rows.fetchall(
                self._db,
                f"SELECT {rows.EDIT_COLUMNS} FROM edits WHERE search_id = ? ORDER BY id",
                (search_id,),
            )
        return [rows.edit_from_row(r) for r in found]

    # ------------------------------------------------------------------ LLM calls

    async def log_llm_call(
        self,
        *,
        search_id: int | None,
        phase: LLMPhase,
        provider: str,
        model: str,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
        latency_s: float = 0.0,
        request: str = "",
        response: str = "",
        error: str | None = None,
        priced: bool = True,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        cache_read_usd: float = 0.0,
        cache_write_usd: float = 0.0,
    ) -> LLMCall:
        """Account one LLM call (also failed ones: pass `error`)."""
        fields = {
            "search_id": search_id,
            "phase": phase,
            "provider": provider,
            "model": model,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": cost_usd,
            "latency_s": latency_s,
            "request": request,
            "response": response,
            "error": error,
            "priced": priced,
            "cache_read_tokens": cache_read_tokens,
            "cache_write_tokens": cache_write_tokens,
            "cache_read_usd": cache_read_usd,
            "cache_write_usd": cache_write_usd,
        }
        try:
            LLMCall.model_validate({"id": 0, **fields})
        except ValidationError as exc:
            raise ValueError(f"bad LLM call record: {exc}") from exc
        async with self.transaction() as db:
            if search_id is not None:
                await rows.search_row(db, search_id)
            cur = await db.execute(
                f"INSERT INTO llm_calls ({', '.join(fields)}, created_at) "
                f"VALUES ({', '.join('?' * (len(fields) + 1))})",
                (*fields.values(), rows.now_iso()),
            )
            row = await rows.fetchone(
                db, f"SELECT {rows.LLM_COLUMNS} FROM llm_calls WHERE id = ?", (cur.lastrowid,)
            )
        return rows.llm_call_from_row(row)

    async def list_llm_calls(self, search_id: int | None = None) -> list[LLMCall]:
        """LLM calls of one search, or all calls when `search_id` is None; oldest first."""
        sql = f"SELECT {rows.LLM_COLUMNS} FROM llm_calls"
        params: tuple[int, ...] = ()
        if search_id is not None:
            sql += " WHERE search_id = ?"
            params = (search_id,)
        async with self._lock:
            found = await rows.fetchall(self._db, sql + " ORDER BY id", params)
        return [rows.llm_call_from_row(r) for r in found]

    async def llm_totals(self, search_id: int | None = None) -> LLMTotals:
        """Calls, tokens and dollars spent, for one search or overall."""
        reported = "cache_read_tokens IS NOT NULL"
        sql = (
            "SELECT count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), coalesce(sum(cost_usd), 0), "
            "coalesce(sum(1 - priced), 0), coalesce(sum(cache_read_tokens), 0), "
            f"coalesce(sum(CASE WHEN {reported} THEN cache_write_tokens END), 0), "
            f"count(CASE WHEN {reported} AND cache_write_tokens IS NULL AND tokens_in > 0 THEN 1 END), "
            f"coalesce(sum(CASE WHEN {reported} THEN "
            "max(0, tokens_in - cache_read_tokens - coalesce(cache_write_tokens, 0)) END), 0), "
            "coalesce(sum(cache_read_usd), 0), coalesce(sum(cache_write_usd), 0), "
            f"count(CASE WHEN NOT ({reported}) AND tokens_in > 0 THEN 1 END) FROM llm_calls"
        )
        params: tuple[int, ...] = ()
        if search_id is not None:
            sql += " WHERE search_id = ?"
            params = (search_id,)
        async with self._lock:
            row = await rows.fetchone(self._db, sql, params)
        return LLMTotals(
            calls=row[0],
            tokens_in=row[1],
            tokens_out=row[2],
            usd=float(row[3]),
            unpriced_calls=row[4],
            cache_read_tokens=row[5],
            cache_write_tokens=row[6],
            cache_write_unreported_calls=row[7],
            uncached_tokens_in=row[8],
            cache_read_usd=float(row[9]),
            cache_write_usd=float(row[10]),
            cache_unreported_calls=row[11],
        )

    # ------------------------------------------------------------------ key-value cache

    async def cache_get(self, key: str, default: Any = None) -> Any:
        """The JSON value stored under `key`, or `default`."""
        async with self._lock:
            row = await rows.fetchone(self._db, "SELECT value FROM cache WHERE key = ?", (key,))
        return default if row is None else json.loads(row[0])

    async def cache_put(self, key: str, value: Any) -> None:
        """Store a JSON value under `key`, replacing any previous one."""
        text = rows.dumps(value)
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO cache (key, value, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                (key, text, rows.now_iso()),
            )


def _config(config: SearchConfig | Mapping[str, Any] | None) -> SearchConfig:
    if config is None:
        return SearchConfig()
    if isinstance(config, SearchConfig):
        return SearchConfig.model_validate(config.model_dump())
    try:
        return SearchConfig.model_validate(dict(config))
    except ValidationError as exc:
        raise ValueError(f"bad search config: {exc}") from exc


async def _replaces(
    db: aiosqlite.Connection, new: Attempt, current_id: int | None, better: Better, *, search: bool = False
) -> bool:
    """Whether the correct attempt `new` takes the place of `current_id` as a node's (or, with
    `search`, the search's) best attempt.

    Timings from the CPU interpreter never rank: such an attempt becomes a node's best only as its
    first correct one (so children have correct code to start from), never displaces a correct best,
    and never becomes the search's best. A GPU-timed correct attempt replaces a CPU-interpreter best
    without a comparison (there is none to make); between two GPU-timed ones `better` decides.
    A pure-PyTorch attempt (no kernel of its own ran) is never a best, on any device: the search is
    for kernels, and its code is no kernel to build on. Nor is one whose kernel audit was left out
    (`Evaluation.audited` False: it was slower than its node's best everywhere).
    """
    if new.evaluation is None or new.evaluation.pure_pytorch or new.evaluation.audited is False:
        return False  # no kernel of its own, or its kernels not audited: never a best
    ranks = new.evaluation.ranks
    if current_id is None:
        return ranks or not search
    if not ranks:
        return False
    current = await rows.attempt(db, current_id)
    if current.evaluation is None or not current.evaluation.ranks:
        return True
    return better(new, current)
