"""`ksearch submit`: a person's own kernel, evaluated by the real sandbox (Triton interpreter on CPU) and
recorded like any attempt, with author "human"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from uihelp import REPO, with_store

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import IntentSpec, SearchConfig
from tests.fixtures import ROW_SUM

Ks = Callable[..., Result]  # the `ks` fixture: run a ksearch command
SEED = (REPO / "gpu" / "tasks" / "builtin" / "row_sum" / "seed_triton.py").read_text()


def said(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def rowsum(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A search on the built-in row_sum task (with a 9-row smoke workload, tests/fixtures) with two intents, one
    of them pruned."""
    db = tmp_path / "submit.db"

    async def build(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("rs", ROW_SUM, SearchConfig())
        a, b = await apply_intents(
            store,
            s.id,
            [IntentSpec(title="smaller column blocks"), IntentSpec(title="two rows per program")],
            author="human",
            round=0,
        )
        await apply_edits(store, s.id, [{"op": "prune", "node_id": b.id}], author="human", round=0)
        other = await store.create_search("other", ROW_SUM, SearchConfig())
        return {"search": s.id, "intent": a.id, "pruned": b.id, "other_root": (await store.root(other.id)).id}

    return db, with_store(db, build)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_submit_records_a_human_attempt(ks: Ks, rowsum: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, ids = rowsum
    good = tmp_path / "mine.py"
    good.write_text(SEED.replace("BLOCK_N = 1024", "BLOCK_N = 512"))
    r = ks("submit", "rs", good, "--node", ids["intent"], "--db", db)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "correct on smoke" in r.stdout and "recorded as attempt #" in r.stdout
    # the loop measures the task's seed (on the root) before the first round; submit did it, and said so
    assert "measuring the task's seed" in r.stderr + r.stdout
    seed, *atts = with_store(db, lambda s: s.list_attempts(ids["search"]))
    assert seed.author == "seed" and seed.node_id != ids["intent"] and seed.evaluation.status == "ok"
    assert len(atts) == 1
    a = atts[0]
    assert (a.author, a.node_id, a.evaluation.status) == ("human", ids["intent"], "ok")
    assert with_store(db, lambda s: s.get_candidate(a.candidate_id)).source == good.read_text()
    node = with_store(db, lambda s: s.get_node(ids["intent"]))
    # submitting on an open intent claimed it (its refine phase runs until `ksearch finish`)
    assert node.best_attempt_id == a.id and node.status.value == "active"
    assert "claimed intent" in r.stderr + r.stdout

    # A wrong kernel is evaluated and recorded too, and the command says so with exit code 1.
    bad = tmp_path / "wrong.py"
    bad.write_text(SEED.replace("tl.sum(acc, axis=0))", "tl.sum(acc, axis=0) * 2.0)"))
    r = ks("submit", "rs", bad, "--db", db)
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert "INCORRECT on smoke" in r.stdout and "on the search (no node)" in r.stdout
    # CPU-interpreter timings never rank, so the search has no best to default the base to
    assert "base: none" in r.stdout
    atts = with_store(db, lambda s: s.list_attempts(ids["search"]))
    assert [(x.author, x.node_id, x.evaluation.status, x.base_attempt_id) for x in atts[2:]] == [
        ("human", None, "incorrect", None)
    ]
    assert with_store(db, lambda s: s.get_search(ids["search"])).best_attempt_id is None


@pytest.mark.slow
def test_submit_refusals_record_nothing(ks: Ks, rowsum: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, ids = rowsum
    good = tmp_path / "k.py"
    good.write_text(SEED)
    empty = tmp_path / "empty.py"
    empty.write_text("  \n")
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\xff\xfe\x00import torch")
    broken = tmp_path / "broken.py"
    broken.write_text("def ModelNew(:\n")
    cases = [
        ((tmp_path / "missing.py",), "not found"),
        ((tmp_path,), "is a directory"),
        ((empty,), "is empty"),
        ((binary,), "not UTF-8"),
        ((good, "--language", "fortran"), "unknown language 'fortran'"),
        ((good, "--node", 999), "no node #999"),
        ((good, "--node", ids["other_root"]), "belongs to another search"),
        ((good, "--node", ids["pruned"]), "pruned"),
        ((good, "--base", 999), "no attempt #999"),
        ((broken,), "does not parse"),
    ]
    for args, needle in cases:
        r = ks("submit", "rs", *args, "--db", db)
        assert r.exit_code == 2, (args, r.stdout, r.stderr)
        assert needle in said(r.stderr), (args, r.stderr)
    assert with_store(db, lambda s: s.list_attempts(ids["search"])) == []


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_unparsable_source_has_one_rule_on_the_cli_and_over_mcp(
    ks: Ks, rowsum: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """Refused and nothing recorded outside a refine phase (test_submit_refusals_record_nothing); within one, an
    attempt like any compile error, as `benchmark` with node_id records it over MCP: its error is the next attempt's
    feedback and it counts toward the cap, but not the stagnation window, so a typo does not end a phase whose window
    is 1 (the quickstart's: a newcomer's first typo on a pinned intent ended its phase)."""
    db, _ = rowsum

    async def build(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("q", ROW_SUM, SearchConfig(stagnation=1))
        (a,) = await apply_intents(store, s.id, [IntentSpec(title="wider blocks")], author="human", round=0)
        return s.id, a.id

    sid, intent = with_store(db, build)
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    r = ks("submit", "q", broken, "--node", intent, "--db", db)  # claims the intent, then records the typo
    assert r.exit_code == 1, (r.stdout, r.stderr)
    out = said(r.stdout + r.stderr)
    assert "compile_error" in out and "does not parse" in out, out
    last = with_store(db, lambda s: s.list_attempts(sid))[-1]
    assert (last.author, last.node_id, last.evaluation.status) == ("human", intent, "compile_error")
    assert with_store(db, lambda s: s.get_candidate(last.candidate_id)).source == broken.read_text()
    # the phase goes on: the corrected kernel is the next attempt of the same intent
    good = tmp_path / "mine.py"
    good.write_text(SEED)
    r = ks("submit", "q", good, "--node", intent, "--db", db)
    assert r.exit_code == 0 and "recorded as attempt #" in r.stdout, (r.stdout, r.stderr)
    assert [a.evaluation.status for a in with_store(db, lambda s: s.list_attempts(sid, intent))] == [
        "compile_error",
        "ok",
    ]
