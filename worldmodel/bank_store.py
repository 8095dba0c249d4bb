"""The kernel bank's tables in a ksearch database: entries, forgotten uids, and which entries a search used.

The bank is the database's own by default (the entries of all its searches); a shared bank is another ksearch
database file holding entries recorded from many. Recording a search replaces that search's entries as a whole
(one transaction), so recording again after each intent is idempotent; an entry someone forgot stays forgotten.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import aiosqlite
from pydantic import ValidationError

from ksearch.worldmodel import rows
from ksearch.worldmodel.bank import BANK_VERSION, BankEntry, BankError
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Strict
from ksearch.worldmodel.store import Store

_DB_KEY = "bank:db_uid"


class Imported(Strict):
    """What an import did."""

    added: int
    updated: int
    skipped_forgotten: list[str]
    """uids this bank was told to forget: not brought back."""


class BankUse(Strict):
    """An entry a search's prompt showed."""

    uid: str
    phase: str
    """analyse or reflect."""
    round: int
    similarity: float
    why: str
    title: str


async def db_uid(store: Store) -> str:
    """This database's identity, made once: entries record where they were learned by it."""
    uid = await store.cache_get(_DB_KEY)
    if not isinstance(uid, str):
        uid = "db-" + uuid.uuid4().hex[:12]
        await store.cache_put(_DB_KEY, uid)
    return str(uid)


def _entry(text: str, uid: str) -> BankEntry:
    try:
        e = BankEntry.model_validate_json(text)
    except ValidationError as err:  # written by another ksearch version: never misread
        raise BankError(f"bank entry {uid} cannot be read by this ksearch: {err.errors()[0]['msg']}") from err
    if e.version > BANK_VERSION:
        raise BankError(f"bank entry {uid} is version {e.version}; this ksearch reads up to {BANK_VERSION}")
    return e


async def _forgotten(db: aiosqlite.Connection, uids: Sequence[str]) -> set[str]:
    if not uids:
        return set()
    marks = ",".join("?" * len(uids))
    found = await rows.fetchall(db, f"SELECT uid FROM bank_forgotten WHERE uid IN ({marks})", tuple(uids))
    return {r[0] for r in found}


async def _insert(db: aiosqlite.Connection, e: BankEntry) -> None:
    await db.execute(
        "INSERT INTO bank_entries (uid, kind, source_db, source_search_id, task, entry, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid) DO UPDATE SET kind = excluded.kind, "
        "source_db = excluded.source_db, source_search_id = excluded.source_search_id, task = excluded.task, "
        "entry = excluded.entry, recorded_at = excluded.recorded_at",
        (
            e.uid,
            e.kind,
            e.source.db,
            e.source.search_id,
            e.signature.task,
            e.model_dump_json(),
            e.recorded_at.isoformat(),
        ),
    )


async def replace_search(store: Store, source_db: str, search_id: int, entries: Sequence[BankEntry]) -> int:
    """Make `entries` the bank's entries of one search (all in one transaction); forgotten uids are left out.
    Returns how many are stored."""
    async with store.transaction() as db:
        gone = await _forgotten(db, [e.uid for e in entries])
        await db.execute(
            "DELETE FROM bank_entries WHERE source_db = ? AND source_search_id = ?", (source_db, search_id)
        )
        kept = [e for e in entries if e.uid not in gone]
        for e in kept:
            await _insert(db, e)
    return len(kept)


async def list_entries(store: Store) -> list[BankEntry]:
    """Every entry, oldest first."""
    async with store.reading() as db:
        found = await rows.fetchall(db, "SELECT uid, entry FROM bank_entries ORDER BY recorded_at, uid", ())
    return [_entry(text, uid) for uid, text in found]


async def get_entry(store: Store, ref: str) -> BankEntry:
    """The entry whose uid is `ref` or starts with it (at least 4 characters); NotFound says what exists."""
    ref = ref.strip()
    if len(ref) < 4:
        raise NotFound(
            f"bank entry {ref!r}: give at least 4 characters of its uid (`ksearch bank list` shows them)"
        )
    async with store.reading() as db:
        found = await rows.fetchall(
            db,
            "SELECT uid, entry FROM bank_entries WHERE uid LIKE ? ORDER BY uid",
            (ref.replace("%", "") + "%",),
        )
    if not found:
        raise NotFound(f"no bank entry {ref!r} in this bank (`ksearch bank list` shows its entries)")
    if len(found) > 1:
        raise NotFound(
            f"bank entry {ref!r} is ambiguous: {', '.join(u for u, _ in found[:8])}; give more of the uid"
        )
    return _entry(found[0][1], found[0][0])


async def forget(store: Store, uids: Sequence[str], reason: str = "") -> list[str]:
    """Remove entries for good (recording their search again does not bring them back). Returns the uids removed;
    NotFound (nothing removed) when one is not in the bank."""
    chosen = [await get_entry(store, u) for u in uids]
    async with store.transaction() as db:
        for e in chosen:
            await db.execute("DELETE FROM bank_entries WHERE uid = ?", (e.uid,))
            await db.execute(
                "INSERT OR REPLACE INTO bank_forgotten (uid, reason, forgotten_at) VALUES (?, ?, ?)",
                (e.uid, reason, rows.now_iso()),
            )
    return [e.uid for e in chosen]


async def import_entries(store: Store, entries: Sequence[BankEntry]) -> Imported:
    """Add or update entries (by uid; a newer recording wins), in one transaction; forgotten uids stay out."""
    added = updated = 0
    async with store.transaction() as db:
        gone = await _forgotten(db, [e.uid for e in entries])
        for e in entries:
            if e.uid in gone:
                continue
            row = await rows.fetchone(db, "SELECT recorded_at FROM bank_entries WHERE uid = ?", (e.uid,))
            if row is None:
                added += 1
            elif row[0] < e.recorded_at.isoformat():
                updated += 1
            else:
                continue
            await _insert(db, e)
    return Imported(added=added, updated=updated, skipped_forgotten=sorted(gone))


async def record_uses(store: Store, search_id: int, uses: Sequence[BankUse]) -> None:
    """Remember which entries a search's prompt showed (once per entry, phase and round)."""
    if not uses:
        return
    async with store.transaction() as db:
        for u in uses:
            await db.execute(
                "INSERT OR IGNORE INTO bank_uses (search_id, uid, phase, round, similarity, why, title, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (search_id, u.uid, u.phase, u.round, u.similarity, u.why, u.title, rows.now_iso()),
            )


async def uses(store: Store, search_id: int) -> list[BankUse]:
    """The entries a search's prompts showed, in the order they were first shown."""
    async with store.reading() as db:
        found = await rows.fetchall(
            db,
            "SELECT uid, phase, round, similarity, why, title FROM bank_uses WHERE search_id = ? "
            "ORDER BY created_at, round, uid",
            (search_id,),
        )
    return [BankUse(uid=u, phase=p, round=r, similarity=s, why=w, title=t) for u, p, r, s, w, t in found]
