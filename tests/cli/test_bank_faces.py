"""The kernel bank as a person and an MCP host reach it: `ksearch bank` run as a user runs it (list, show, search,
export, import, forget, record; a bad bank file refused with the reason, nothing imported), and the MCP server's
`query_bank` tool and `ksearch://bank` resources over the real stdio transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ksearch.tools.workspace import Workspace
from tests.fixtures.cli import ksearch_cli
from tests.mcp.test_mcp import call, call_error, stdio_client
from tests.tools.test_bank import softmax_search

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _db(tmp_path: Path) -> Path:
    db = tmp_path / "k.db"
    async with await Workspace.open(db) as ws:
        await softmax_search(ws)
        await ws.store.create_search("xent", "cross_entropy")
    return db


async def test_ksearch_bank_lists_shows_searches_exports_imports_and_forgets(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    rec = ksearch_cli(tmp_path, "bank", "record", "sm", "--db", str(db))
    assert rec.returncode == 0 and "search sm: 5 entries in this database's bank" in rec.stderr, rec.stderr
    listed = ksearch_cli(tmp_path, "bank", "list", "--db", str(db), "--json")
    entries = json.loads(listed.stdout)
    gain = next(e for e in entries if e["title"] == "one row per program, row in registers")
    shown = ksearch_cli(tmp_path, "bank", "show", gain["uid"][:6], "--db", str(db))
    assert (
        shown.returncode == 0
        and "worked: 1.5x over its base" in shown.stdout
        and "BLOCK_N = 4096" in shown.stdout
    )
    found = ksearch_cli(tmp_path, "bank", "search", "--search", "xent", "--db", str(db))
    assert "related: similarity" in found.stdout and "same patterns reduction+softmax" in found.stdout
    words = ksearch_cli(tmp_path, "bank", "search", "tl.dot", "--db", str(db))
    assert "use tl.dot for the row sums" in words.stdout and "registers" not in words.stdout
    out = tmp_path / "bank.json"
    assert "wrote 5 entries" in ksearch_cli(tmp_path, "bank", "export", str(out), "--db", str(db)).stdout
    shared = tmp_path / "team.db"
    imp = ksearch_cli(tmp_path, "bank", "import", str(out), "--bank", str(shared))
    assert imp.returncode == 0 and "5 added, 0 updated" in imp.stdout, imp.stderr
    # a teammate with the shared bank alone (no project database) reads and searches it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    alone = ksearch_cli(elsewhere, "bank", "search", "--task", "cross_entropy", "--bank", str(shared))
    assert alone.returncode == 0 and "related: similarity" in alone.stdout, alone.stderr
    assert "ksearch bank show UID" in alone.stdout
    gone = ksearch_cli(
        tmp_path, "bank", "forget", gain["uid"], "--reason", "measured on old code", "--db", str(db)
    )
    assert gone.returncode == 0 and gain["uid"] in gone.stdout
    ksearch_cli(tmp_path, "bank", "record", "sm", "--db", str(db))  # recorded again: it stays forgotten
    assert gain["uid"] not in ksearch_cli(tmp_path, "bank", "list", "--db", str(db)).stdout


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json at all", "is not valid JSON"),
        ('{"format": "other", "version": 1, "entries": []}', "is not a ksearch bank"),
        ('{"format": "ksearch-bank", "version": 99, "ksearch": "9", "entries": []}', "upgrade ksearch"),
    ],
)
async def test_a_bad_bank_file_is_refused_and_nothing_is_imported(
    tmp_path: Path, content: str, says: str
) -> None:
    db = await _db(tmp_path)
    before = ksearch_cli(tmp_path, "bank", "list", "--db", str(db)).stdout
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = ksearch_cli(tmp_path, "bank", "import", str(bad), "--db", str(db))
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert ksearch_cli(tmp_path, "bank", "list", "--db", str(db)).stdout == before


async def test_an_mcp_host_queries_the_bank_and_reads_its_resources(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    async with await Workspace.open(db) as ws:
        from ksearch.tools.bank.record import record_search

        await record_search(ws, "sm")
    async with stdio_client(db) as c:
        said = (await c.call_tool("query_bank", {"search": "xent"})).content[0].text
        assert (
            said.startswith("3 of the bank's 5 entries") or "of the bank's 5 entries" in said.splitlines()[0]
        ), said
        related = await call(c, "query_bank", {"search": "xent"})
        assert related["signature"]["task"] == "cross_entropy" and len(related["hits"]) >= 3
        assert all(h["why"] for h in related["hits"]) and related["total"] == 5
        uid = next(h["entry"]["uid"] for h in related["hits"] if h["entry"]["kind"] == "best")
        one = await call(c, "query_bank", {"entry": uid})
        assert one["hits"][0]["entry"]["code"] and "a starting point" in one["text"]
        assert "give one of entry, search, task or text" in await call_error(
            c, "query_bank", {"entry": uid, "text": "x"}
        )
        listing = (await c.read_resource("ksearch://bank")).contents[0].text
        assert listing.startswith("this database's bank: 5 entries") and uid in listing
        whole = json.loads((await c.read_resource(f"ksearch://bank/{uid}")).contents[0].text)
        assert whole["uid"] == uid and whole["kind"] == "best"
