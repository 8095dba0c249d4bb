"""The kernel bank's records over a real SQLite store: matching, ranking, recording a search again, forgetting,
and the export file (a corrupt, foreign or newer file is refused whole, never misread)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ksearch.worldmodel import bank_store
from ksearch.worldmodel.bank import (
    BANK_VERSION,
    BankEntry,
    BankError,
    BankOutcome,
    BankSource,
    TaskSignature,
    dump_bank,
    load_bank,
    rank,
    similarity,
)
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio

SOFTMAX = TaskSignature(
    task="softmax", patterns=["reduction", "softmax"], dtype="float32", bound="memory", scale=7.0
)
XENT = TaskSignature(
    task="cross_entropy", patterns=["reduction", "softmax"], dtype="bfloat16", bound="memory", scale=7.2
)
LAYERNORM = TaskSignature(
    task="layernorm", patterns=["norm", "reduction"], dtype="float32", bound="memory", scale=7.0
)
CONV = TaskSignature(task="conv2d", patterns=["convolution"], dtype="bfloat16", bound="compute", scale=7.0)


def entry(
    uid: str, sig: TaskSignature, *, search_id: int = 1, gain: float | None = None, **kw: object
) -> BankEntry:
    outcome = (
        BankOutcome(
            kind="gain",
            gain=gain,
            gain_ci=(gain * 0.98, gain * 1.02),
            device="NVIDIA H200",
            protocol="ksearch",
        )
        if gain
        else BankOutcome(kind="compile_error", detail="1 attempts")
    )
    return BankEntry(
        uid=uid,
        kind="intent",
        source=BankSource(db="db-a", search_id=search_id, search=f"s{search_id}"),
        signature=sig,
        title=f"idea {uid}",
        outcome=outcome,
        **kw,  # type: ignore[arg-type]
    )


def test_related_tasks_share_a_pattern_and_the_match_says_why() -> None:
    same = similarity(SOFTMAX, XENT)
    assert same.score >= 0.55 and "same patterns reduction+softmax" in same.why[0], same
    assert any("dtype bf16 (this task fp32)" in w for w in same.why) and any(
        "size within 2x" in w for w in same.why
    )
    near = similarity(SOFTMAX, LAYERNORM)
    assert (
        0 < near.score < similarity(LAYERNORM, LAYERNORM).score
    )  # a row reduction in common, not the same op
    assert similarity(SOFTMAX, CONV).score == 0.0 and similarity(SOFTMAX, CONV).why == [
        "no op pattern in common"
    ]


def test_rank_puts_the_closest_and_most_valuable_first_and_leaves_unrelated_out() -> None:
    entries = [
        entry("b00000000001", XENT, gain=1.05),
        entry("b00000000002", XENT, gain=1.6),
        entry("b00000000003", CONV, gain=3.0),  # a big gain on an unrelated task: never shown
        entry("b00000000004", LAYERNORM),
    ]
    got = [r.entry.uid for r in rank(SOFTMAX, entries)]
    assert got[:2] == ["b00000000002", "b00000000001"] and "b00000000003" not in got


async def test_recording_a_search_again_replaces_its_entries_and_forgotten_ones_stay_out(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        db = await bank_store.db_uid(store)
        assert db == await bank_store.db_uid(store)  # made once
        a, b = entry("b0000000000a", SOFTMAX, gain=1.3), entry("b0000000000b", SOFTMAX)
        assert await bank_store.replace_search(store, "db-a", 1, [a, b]) == 2
        assert await bank_store.replace_search(store, "db-a", 1, [a]) == 1  # b is no longer learned: gone
        assert [e.uid for e in await bank_store.list_entries(store)] == ["b0000000000a"]
        assert await bank_store.forget(store, ["b000000000"], "wrong lesson") == ["b0000000000a"]
        assert await bank_store.replace_search(store, "db-a", 1, [a, b]) == 1  # a stays forgotten
        with pytest.raises(NotFound, match="no bank entry"):
            await bank_store.get_entry(store, "b0000000000a")
        with pytest.raises(NotFound, match="at least 4 characters"):
            await bank_store.get_entry(store, "b0")


async def test_export_then_import_elsewhere_keeps_every_entry_and_a_newer_recording_wins(
    tmp_path: Path,
) -> None:
    a = entry("b0000000000a", SOFTMAX, gain=1.3, code="def k(): pass", language="triton")
    b = entry("b0000000000b", XENT, search_id=2)
    text = dump_bank([a, b], ksearch_version="9.9")
    assert json.loads(text)["format"] == "ksearch-bank" and json.loads(text)["version"] == BANK_VERSION
    async with await Store.open(tmp_path / "team.db") as store:
        done = await bank_store.import_entries(store, load_bank(text))
        assert (done.added, done.updated) == (2, 0)
        again = await bank_store.import_entries(store, load_bank(text))
        assert (again.added, again.updated) == (0, 0)  # the same recordings: nothing to do
        newer = a.model_copy(
            update={
                "title": "idea a, recorded again",
                "recorded_at": datetime.now(UTC) + timedelta(seconds=5),
            }
        )
        assert (await bank_store.import_entries(store, [newer])).updated == 1
        got = {e.uid: e for e in await bank_store.list_entries(store)}
        assert (
            got["b0000000000a"].title == "idea a, recorded again"
            and got["b0000000000a"].code == "def k(): pass"
        )
        await bank_store.forget(store, ["b0000000000b"])
        assert (await bank_store.import_entries(store, load_bank(text))).skipped_forgotten == ["b0000000000b"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not valid JSON (line 1"),
        (json.dumps({"format": "something-else", "version": 1, "entries": []}), "is not a ksearch bank"),
        (json.dumps([1, 2]), "is not a ksearch bank"),
        (
            json.dumps(
                {"format": "ksearch-bank", "version": BANK_VERSION + 1, "ksearch": "99.0", "entries": []}
            ),
            "upgrade ksearch",
        ),
        (json.dumps({"format": "ksearch-bank", "version": "1", "entries": []}), "no valid version"),
        (json.dumps({"format": "ksearch-bank", "version": 1, "entries": {}}), "no `entries` list"),
    ],
)
def test_a_file_that_is_not_a_bank_this_ksearch_reads_is_refused_with_the_reason(
    text: str, says: str
) -> None:
    with pytest.raises(BankError, match=None) as e:
        load_bank(text, where="b.json")
    assert says in str(e.value) and "b.json" in str(e.value)


def test_one_bad_entry_refuses_the_whole_file_and_names_it() -> None:
    good = entry("b0000000000a", SOFTMAX, gain=1.3).model_dump(mode="json")
    bad = dict(good, uid="b0000000000b", kind="recipe")
    newer = dict(good, uid="b0000000000c", version=BANK_VERSION + 1)
    doc = {"format": "ksearch-bank", "version": 1, "entries": [good, bad, newer]}
    with pytest.raises(BankError) as e:
        load_bank(json.dumps(doc))
    msg = str(e.value)
    assert "nothing imported" in msg and "entry 1: kind" in msg and "entry 2: version" in msg


async def test_an_entry_this_ksearch_cannot_read_is_refused_not_misread(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        await bank_store.replace_search(store, "db-a", 1, [entry("b0000000000a", SOFTMAX, gain=1.3)])
        newer = entry("b0000000000a", SOFTMAX, gain=1.3).model_copy(update={"version": BANK_VERSION + 1})
        async with store.transaction() as db:
            await db.execute("UPDATE bank_entries SET entry = ?", (newer.model_dump_json(),))
        with pytest.raises(BankError, match="this ksearch reads up to"):
            await bank_store.list_entries(store)
