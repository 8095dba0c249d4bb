"""`ksearch intent add|edit`, `pin|unpin|veto|unveto|prune|reopen`, `best`: real store, real tools."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import uidata
from click.testing import Result
from uihelp import REPO, subprocess_env, with_store

from ksearch.worldmodel.models import Evaluation, SearchConfig

Ks = Callable[..., Result]  # the `ks` fixture: run a ksearch command


def said(text: str) -> str:
    """Console output with the terminal's line wrapping undone."""
    return " ".join(text.split())


def test_intent_add_goes_through_the_tools(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    r = ks(
        "intent",
        "add",
        "softmax-demo",
        "fuse max and sum into one pass",
        "--parent",
        ids["rows"],
        "--why",
        "one read of the row",
        "--priority",
        0.85,
        "--difficulty",
        2,
        "--expected",
        1.3,
        "--reason",
        "pairing session",
        "--param",
        "BLOCK_N=512",
        "--param",
        "layout=row-major",
        "--db",
        db,
    )
    assert r.exit_code == 0, r.stderr
    assert "added #" in r.stdout and f"under #{ids['rows']}" in r.stdout
    # the demo's code declares no TUNABLES: the person is told the tuner will decline it, and why
    assert "declares no TUNABLES: the tuner declines an intent with params (BLOCK_N, layout)" in said(
        r.stderr
    )
    n = next(
        n for n in with_store(db, lambda s: s.list_nodes(1)) if n.title == "fuse max and sum into one pass"
    )
    assert (
        n.parent_id,
        n.rationale,
        n.priority,
        n.difficulty,
        n.expected_speedup,
        n.author,
        n.status.value,
        n.params,
    ) == (
        ids["rows"],
        "one read of the row",
        0.85,
        2,
        1.3,
        "human",
        "open",
        {"BLOCK_N": 512, "layout": "row-major"},  # a value that reads as JSON is that value, else its text
    )
    bad = ks("intent", "add", "softmax-demo", "split the row in two", "--param", "BLOCK_N", "--db", db)
    assert (
        bad.exit_code == 2
        and "--param takes KEY=VALUE (e.g. --param BLOCK_N=512); got 'BLOCK_N'" in bad.stderr
    )
    edits = with_store(db, lambda s: s.list_edits(1))
    assert any(e.op == "insert" and e.node_id == n.id and e.reason == "pairing session" for e in edits)
    # Without --parent it goes under the root.
    r = ks("intent", "add", "1", "persistent kernel over all rows", "--db", db)
    assert r.exit_code == 0, r.stderr
    n2 = next(
        n for n in with_store(db, lambda s: s.list_nodes(1)) if n.title == "persistent kernel over all rows"
    )
    assert n2.parent_id == ids["root"]


def test_intent_add_says_which_params_the_code_s_tunables_do_not_declare(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "tuned.db"
    seed = (REPO / "gpu" / "tasks" / "builtin" / "softmax" / "seed_triton.py").read_text()

    async def fill(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("tuned", "softmax", SearchConfig())
        root = await store.root(s.id)
        cand = await store.put_candidate(seed, "triton")
        await store.record_attempt(s.id, root.id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.0))

    with_store(db, fill)
    r = ks(
        "intent",
        "add",
        "tuned",
        "bigger blocks, more stages",
        "--param",
        "BLOCK_N=16384",
        "--param",
        "num_stages=3",
        "--param",
        "num_warps=8",
        "--db",
        db,
    )
    assert r.exit_code == 0, r.stderr
    err = said(r.stderr)
    assert (
        "BLOCK_N=16384 is not among BLOCK_N's values in the code" in err
        and "(512, 1024, 2048, 4096, 8192)" in err
    )
    assert "num_stages is not among the TUNABLES of the code" in err and "(BLOCK_N, num_warps)" in err
    assert "num_warps" not in err.replace("(BLOCK_N, num_warps)", "")  # a declared value: nothing to say


@pytest.mark.slow
def test_intent_add_refusals(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    before = len(with_store(db, lambda s: s.list_nodes(1)))
    cases = [
        (("nosuch", "a fine idea"), "no search named 'nosuch'"),
        (("softmax-demo", "a fine idea", "--parent", 999), "no node #999"),
        (("softmax-demo", "x"), "title"),
        (("softmax-demo", "a fine idea", "--priority", 1.5), "priority"),
        (("softmax-demo", "a fine idea", "--difficulty", 9), "difficulty"),
        (("softmax-demo", "one row per program, row kept in registers"), "near-duplicate"),
        (("softmax-demo", "grow under pruned", "--parent", ids["exp2"]), "pruned"),
    ]
    for args, needle in cases:
        r = ks("intent", "add", *args, "--db", db)
        assert r.exit_code == 2, (args, r.stdout, r.stderr)
        assert needle in said(r.stderr), (args, r.stderr)
    assert len(with_store(db, lambda s: s.list_nodes(1))) == before


def test_a_person_names_intents_by_handle(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    """Handles on the command line: given with `intent add --handle`, taken wherever a node is named (an id, #id or
    handle); a malformed or unknown one is refused, saying what is accepted and which handles the search has."""
    db, ids = demo
    r = ks("intent", "add", "softmax-demo", "keep the row in shared memory", "--handle", "smem", "--db", db)
    assert r.exit_code == 0, r.stderr
    smem = next(n for n in with_store(db, lambda s: s.list_nodes(1)) if n.handle == "smem")
    r = ks("intent", "add", "softmax-demo", "swizzle the smem tile", "--parent", "smem", "--db", db)
    assert r.exit_code == 0 and f"under #{smem.id}" in r.stdout, r.stderr
    assert ks("pin", "softmax-demo", "smem", "--db", db).exit_code == 0
    assert with_store(db, lambda s: s.get_node(smem.id)).pinned
    assert ks("unpin", "softmax-demo", f"#{smem.id}", "--db", db).exit_code == 0
    assert not with_store(db, lambda s: s.get_node(smem.id)).pinned
    r = ks("pin", "softmax-demo", "smme", "--db", db)
    assert r.exit_code == 2 and "goes by handle 'smme'" in said(r.stderr) and "smem" in said(r.stderr), (
        r.stderr
    )
    r = ks("pin", "softmax-demo", "not a handle", "--db", db)
    assert r.exit_code == 2 and "names no node; accepted: a node id" in said(r.stderr), r.stderr
    r = ks("intent", "add", "softmax-demo", "another idea entirely", "--handle", "smem", "--db", db)
    assert r.exit_code == 2 and "handle 'smem' is already node #" in said(r.stderr), r.stderr


@pytest.mark.slow
def test_pin_veto_prune_reopen_roundtrip(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    w = ids["warps"]

    def node():  # type: ignore[no-untyped-def]
        return with_store(db, lambda s: s.get_node(w))

    assert ks("pin", "softmax-demo", w, "--reason", "next", "--db", db).exit_code == 0
    assert node().pinned
    assert ks("unpin", "softmax-demo", w, "--db", db).exit_code == 0
    assert not node().pinned
    r = ks("veto", "softmax-demo", w, "--db", db)
    assert r.exit_code == 0 and "vetoed" in r.stdout
    assert node().vetoed
    assert ks("unveto", "softmax-demo", w, "--db", db).exit_code == 0
    assert not node().vetoed
    r = ks(
        "intent",
        "edit",
        "softmax-demo",
        w,
        "--priority",
        0.95,
        "--notes",
        "bandwidth bound at 8192",
        "--db",
        db,
    )
    assert r.exit_code == 0, r.stderr
    assert (node().priority, node().notes) == (0.95, "bandwidth bound at 8192")
    # Pruning a branch prunes its subtree; reopen brings the node back.
    assert ks("prune", "softmax-demo", ids["rows"], "--db", db).exit_code == 0
    nodes = {n.id: n for n in with_store(db, lambda s: s.list_nodes(1))}
    assert {nodes[i].status.value for i in (ids["rows"], ids["vec"], ids["online"])} == {"pruned"}
    assert ks("reopen", "softmax-demo", ids["rows"], "--db", db).exit_code == 0
    assert with_store(db, lambda s: s.get_node(ids["rows"])).status.value == "open"
    ops = [(e.op, e.author) for e in with_store(db, lambda s: s.list_edits(1)) if e.node_id == w]
    assert [op for op, _ in ops] == ["insert", "pin", "unpin", "veto", "unveto", "update"]
    assert {a for op, a in ops if op != "insert"} == {"human"}


@pytest.mark.slow
def test_edit_refusals(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo

    async def other(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("other-search", "softmax", SearchConfig())
        return (await store.root(s.id)).id

    other_root = with_store(db, other)
    for args, needle in [
        (("prune", "softmax-demo", ids["root"]), "root"),
        (("prune", "softmax-demo", ids["exp2"]), "pruned"),
        (("pin", "softmax-demo", other_root), "belongs to another search"),
        (("pin", "softmax-demo", 999), "no node #999"),
        (("veto", "nosuch", ids["warps"]), "no search named"),
        (("intent", "edit", "softmax-demo", ids["warps"]), "nothing to change"),
    ]:
        r = ks(*args, "--db", db)
        assert r.exit_code == 2, (args, r.stdout)
        assert needle in said(r.stderr), (args, r.stderr)


@pytest.mark.slow
def test_missing_database_is_not_created(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "nothing-here.db"
    r = ks("pin", "softmax-demo", 3, "--db", db)
    assert r.exit_code == 2 and "no database at" in said(r.stderr)
    assert not db.exists()
    r = ks("best", "softmax-demo", "--db", tmp_path)
    assert r.exit_code == 2 and "is a directory" in said(r.stderr)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    r = ks("best", "softmax-demo", "--db", junk)
    assert r.exit_code == 2 and "cannot be opened as a ksearch database" in said(r.stderr)


@pytest.mark.slow
def test_best_prints_source_and_numbers(ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, ids = demo
    r = ks("best", "softmax-demo", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert f"attempt #{ids['best_attempt']}" in r.stdout and "128-bit vectorized loads" in r.stdout
    assert "2.300x vs eager" in r.stdout and "rows512_cols8192" in r.stdout
    assert "# loads widened to 128 bits" in r.stdout
    src = ks("best", "softmax-demo", "--source-only", "--db", db)
    expected = uidata.variant("vectorized", "    # loads widened to 128 bits\n")
    assert src.exit_code == 0 and src.stdout == expected
    out = tmp_path / "best.py"
    r = ks("best", "softmax-demo", "-o", out, "--db", db)
    assert r.exit_code == 0 and out.read_text() == expected
    data = json.loads(ks("best", "softmax-demo", "--json", "--db", db).stdout)
    assert data["attempt"]["id"] == ids["best_attempt"] and data["source"] == expected
    assert data["node"]["id"] == ids["vec"]

    async def empty(store):  # type: ignore[no-untyped-def]
        await store.create_search("empty-search", "softmax", SearchConfig())

    with_store(db, empty)
    r = ks("best", "empty-search", "--db", db)
    assert r.exit_code == 1 and "no correct, timed attempt yet" in said(r.stderr)


def test_attempt_prints_any_attempts_code_and_numbers(
    ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    db, ids = demo
    bad = ids["bad_attempt"]  # a compile error: never a best, still readable
    r = ks("attempt", "softmax-demo", bad, "--db", db)
    assert r.exit_code == 0, r.stderr
    assert f"'softmax-demo': attempt #{bad} on node #" in r.stdout and "compile_error" in r.stdout
    data = json.loads(ks("attempt", "softmax-demo", bad, "--json", "--db", db).stdout)
    assert data["attempt"]["id"] == bad and data["attempt"]["evaluation"]["status"] == "compile_error"
    out = tmp_path / "bad.py"
    r = ks("attempt", "softmax-demo", bad, "-o", out, "--db", db)
    assert r.exit_code == 0 and out.read_text() == data["source"]
    src = ks("attempt", "softmax-demo", ids["best_attempt"], "--source-only", "--db", db)
    assert src.exit_code == 0 and src.stdout == ks("best", "softmax-demo", "--source-only", "--db", db).stdout
    # `best --attempt N` reads the same as `attempt N`
    assert json.loads(ks("best", "softmax-demo", "--attempt", bad, "--json", "--db", db).stdout) == data
    # an id that is not this search's: refused, saying which ids it has
    r = ks("attempt", "softmax-demo", 9999, "--db", db)
    assert r.exit_code == 2 and "search 'softmax-demo' has no attempt #9999: its attempts are #" in said(
        r.stderr
    )


def test_a_file_that_defines_no_candidate_is_refused_before_anything_is_recorded(
    ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    db, ids = demo
    notes = tmp_path / "notes.txt"
    notes.write_text("try two rows per program; keep the row in registers\n")
    count = lambda: sqlite3.connect(db).execute("SELECT COUNT(*) FROM attempts").fetchone()[0]  # noqa: E731
    before = count()
    r = ks("submit", "softmax-demo", notes, "--node", ids["online"], "--db", db)
    assert r.exit_code == 2, r.stdout + r.stderr
    err = said(r.stderr)
    assert (
        "is no candidate for task 'softmax': it defines no `ModelNew`; accepted: a Python module defining "
        "`class ModelNew(torch.nn.Module)`" in err
    ), err
    assert "Nothing was recorded." in err
    assert count() == before


def test_commands_are_wired_into_ksearch() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", "--help"],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for cmd in (
        "intent",
        "pin",
        "unpin",
        "veto",
        "unveto",
        "prune",
        "reopen",
        "submit",
        "best",
        "attempt",
        "export",
        "ui",
    ):
        assert f" {cmd} " in out.stdout, cmd


@pytest.mark.slow
def test_ui_refuses_before_serving(ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, _ = demo
    r = ks("ui", "nosuch", "--db", db)
    assert r.exit_code == 2 and "no search named 'nosuch'" in said(r.stderr)
    missing = tmp_path / "none.db"
    r = ks("ui", "--db", missing)
    assert r.exit_code == 2 and "no database at" in said(r.stderr) and not missing.exists()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        r = ks("ui", "--db", db, "--port", taken.getsockname()[1])
    assert r.exit_code == 2 and "cannot listen on 127.0.0.1" in said(r.stderr)
