"""Commands that say what they did, and output that survives a pipe.

`pin` refuses a node that is not open; a node of another search is named by its search; a missing
--db is refused by name (only `run` creates a database); piped output is neither wrapped nor cut;
`--help` shows no `<bool>`/`<str>`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from uihelp import REPO, subprocess_env, with_store

from ksearch.worldmodel.models import Evaluation, SearchConfig

Ks = Callable[..., Result]  # the `ks` fixture: run a ksearch command


def said(text: str) -> str:
    """Console output with the terminal's line wrapping undone."""
    return " ".join(text.split())


LONG_TITLE = (
    "keep each row in registers and fuse the max, the exponent and the sum into one pass over the row, "
    "with 128-bit loads and a two-level reduction across warps"
)


def ksearch(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`ksearch ARGS` in a subprocess, stdout a pipe (not a terminal), COLUMNS unset."""
    e = {k: v for k, v in (env or subprocess_env()).items() if k not in ("COLUMNS", "LINES", "KSEARCH_DB")}
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *map(str, args)],
        cwd=REPO,
        env=e,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _pinned_and_edits(db: Path, node: int) -> tuple[bool, int]:
    async def go(store):  # type: ignore[no-untyped-def]
        n = await store.get_node(node)
        return n.pinned, len(await store.list_edits(n.search_id))

    return with_store(db, go)


@pytest.mark.slow
def test_pin_refuses_a_node_that_is_not_open(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    with_store(db, lambda s: s.close_node(ids["rows"], "closed"))
    for key, status in (("rows", "closed"), ("online", "failed")):
        before = _pinned_and_edits(db, ids[key])
        r = ks("pin", "softmax-demo", ids[key], "--db", db)
        assert r.exit_code == 2, r.stdout
        msg = said(r.stderr)
        assert f"node #{ids[key]} is {status}" in msg and "open intent" in msg and "ksearch reopen" in msg
        assert _pinned_and_edits(db, ids[key]) == before  # nothing changed, nothing logged
    r = ks("pin", "softmax-demo", ids["root"], "--db", db)
    assert r.exit_code == 2 and "root is not an intent" in said(r.stderr)
    r = ks("pin", "softmax-demo", ids["warps"], "--db", db)  # an open intent: pinned, and said
    assert r.exit_code == 0 and f"pinned: #{ids['warps']}" in r.stdout and "[pinned]" in r.stdout


def test_a_node_of_another_search_is_named_by_its_search(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo

    async def other(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("other-search", "softmax", SearchConfig())
        return (await store.root(s.id)).id

    other_root = with_store(db, other)
    for args in (("veto", "softmax-demo", other_root), ("veto", "other-search", ids["warps"])):
        r = ks(*args, "--db", db)
        assert r.exit_code == 2
        where = "'other-search'" if args[1] == "softmax-demo" else "'softmax-demo'"
        assert f"belongs to another search, {where}, not '{args[1]}'" in said(r.stderr), r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("searches",),
        ("tree", "s"),
        ("status", "s"),
        ("select", "s"),
        ("finish", "s"),
        ("final", "s"),
        ("pin", "s", 2),
        ("intent", "add", "s", "t"),
        ("best", "s"),
        ("export", "s"),
        ("submit", "s", REPO / "README.md"),
        ("ui",),
    ],
)
def test_a_missing_database_is_refused_by_name(tmp_path: Path, args: tuple[object, ...]) -> None:
    db = tmp_path / "typo" / "ksearch.db"
    r = ksearch(*args, "--db", db)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert f"no database at {db}" in said(r.stderr) and "Traceback" not in r.stderr
    assert not db.exists() and not db.parent.exists()


def test_a_relative_missing_database_names_the_absolute_path_too(tmp_path: Path) -> None:
    env = subprocess_env()
    r = subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", "searches", "--db", "nope.db"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO) + ":" + env["PYTHONPATH"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and f"no database at nope.db ({tmp_path / 'nope.db'})" in said(r.stderr)


@pytest.mark.slow
def test_piped_output_is_not_wrapped_or_cut(demo: tuple[Path, dict[str, int]]) -> None:
    db, _ = demo

    async def long_named(store):  # type: ignore[no-untyped-def]
        await store.create_search(
            "fused_add_rmsnorm_with_residual_and_bf16_weights-run-7", "/" + "x" * 90 + ".py"
        )

    with_store(db, long_named)
    added = ksearch("intent", "add", "softmax-demo", LONG_TITLE, "--why", "one read of the row", "--db", db)
    assert added.returncode == 0, added.stderr
    (line,) = [ln for ln in added.stdout.splitlines() if ln.startswith("added #")]
    assert LONG_TITLE in line  # one line, whole

    listing = ksearch("searches", "--db", db)
    assert listing.returncode == 0, listing.stderr
    assert "…" not in listing.stdout
    row = next(ln for ln in listing.stdout.splitlines() if "fused_add_rmsnorm" in ln)
    assert "fused_add_rmsnorm_with_residual_and_bf16_weights-run-7" in row and "x" * 90 + ".py" in row

    tree = ksearch("tree", "softmax-demo", "--db", db)
    assert any(ln.endswith(LONG_TITLE) for ln in tree.stdout.splitlines())
    status = ksearch("status", "softmax-demo", "--db", db)
    assert status.returncode == 0 and all(len(ln) < 400 for ln in status.stdout.splitlines())


def _best_lines(r: Result | subprocess.CompletedProcess[str]) -> str:
    return said(r.stdout + r.stderr)


@pytest.mark.slow
def test_one_best_and_one_format_everywhere(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    best = ks("best", "softmax-demo", "--db", db)
    listing = ksearch("searches", "--db", db)
    tree = ksearch("tree", "softmax-demo", "--db", db)
    # the search's best attempt (2.3x on #vec), written the same way by every command
    assert "2.300x vs eager" in best.stdout
    assert "2.300x" in next(ln for ln in listing.stdout.splitlines() if "softmax-demo" in ln)
    assert (
        "best 2.300x " in tree.stdout.splitlines()[1]
        and f"at #{ids['vec']} (attempt #" in tree.stdout.splitlines()[1]
    )


@pytest.mark.slow
def test_no_best_says_how_many_are_correct_on_the_cpu(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, _ = demo
    timing = {"workload": "w", "device": "cpu-interpreter", "median_us": 9e4, "iqr_us": 1.0}
    timing |= {"ci_low_us": 8e4, "ci_high_us": 1e5, "n": 5, "speedup_vs_eager": 0.002}
    cpu = Evaluation.model_validate({"status": "ok", "speedup_vs_eager": 0.002, "timings": [timing]})

    async def cpu_only(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("cpu-only", "softmax", SearchConfig())
        root = await store.root(s.id)
        for i in range(3):
            cand = await store.put_candidate(f"src {i}", "triton")
            await store.record_attempt(s.id, root.id, cand.id, cpu)

    with_store(db, cpu_only)
    for r in (
        ks("best", "cpu-only", "--db", db),
        ksearch("searches", "--db", db),
        ksearch("tree", "cpu-only", "--db", db),
    ):
        text = _best_lines(r)
        assert "3 correct, none timed on a GPU" in text, text
        assert "no timed correct attempt yet" not in text and "0.002x" not in text
    # `best` names them and how to read one, or write one out
    said = _best_lines(ks("best", "cpu-only", "--db", db))
    assert "`--attempt N` shows one of them, correct on the CPU interpreter: #8, #9, #10" in said, said
    assert (
        "`ksearch export cpu-only --kernelbench --attempt N` writes one out for its task's own evaluator"
        in said
    )


@pytest.mark.slow
def test_help_shows_no_type_placeholders() -> None:
    for args in (("--help",), ("run", "--help"), ("pin", "--help"), ("intent", "add", "--help")):
        r = ksearch(*args)
        assert r.returncode == 0, r.stderr
        assert "<bool>" not in r.stdout and "<str>" not in r.stdout and "<int" not in r.stdout, r.stdout
    assert "--rounds" in ksearch("run", "--help").stdout
