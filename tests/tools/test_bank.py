"""The kernel bank through the tools, over a real store: what a search's records give (a gain with its interval and
code, a failure and how, a prune and why, a person's veto credited, the best kernel), the lessons a later search
on a related task reads in its analyse and reflect prompts (an unrelated task's do not), what its page says it
was shown, the tuner's first moves, and a shared bank file.

The searches' results are evaluations shaped as the sandbox writes them on a GPU (tests/fixtures/evals.py):
there is no GPU here, and the bank's rules are about what was measured, not about measuring."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.server.driver.policies.tuner import TunerPolicy
from ksearch.server.web.search_html import bank_used
from ksearch.server.web.snapshot import load_view
from ksearch.tools.bank import ops as bank
from ksearch.tools.bank.record import record_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.prompting.phases import analyse_kernel, implement_intent, init_context
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.bank import BankEntry
from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import CompileReport, EvalSettings, Evaluation, IntentSpec, SearchConfig
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

SRC = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass  # {}\n"
TUNED = (
    'TUNABLES = {{"BLOCK_N": [1024, 2048, 4096], "num_warps": [4, 8, 16]}}\nBLOCK_N = {}\nnum_warps = 16\n'
)


def _compile_error() -> Evaluation:
    return Evaluation(
        status="compile_error",
        compile=CompileReport(
            ok=False, language="triton", seconds=0.1, log="error: tl.dot needs 16x16 tiles"
        ),
        settings=EvalSettings(seed=1, workloads=["w"]),
        error="tl.dot needs 16x16 tiles",
    )


async def softmax_search(ws: Workspace, name: str = "sm") -> dict[str, int]:
    """A finished-looking softmax search: a base kernel at 1.0x, a gain to 1.5x, a compile failure, a prune, a
    person's veto."""
    store = ws.store
    s = await store.create_search(name, "softmax", SearchConfig())
    rows, dot, exp2, wide = await apply_intents(
        store,
        s.id,
        [
            IntentSpec(
                title="one row per program, row in registers", params={"BLOCK_N": 4096, "num_warps": 16}
            ),
            IntentSpec(title="use tl.dot for the row sums"),
            IntentSpec(title="exp2 instead of exp"),
            IntentSpec(title="two rows per program"),
        ],
        "llm:m",
        1,
    )
    base_c = await store.put_candidate(SRC.format("base"), "triton")
    fast_c = await store.put_candidate(TUNED.format(4096) + SRC.format("fast"), "triton")
    bad_c = await store.put_candidate(SRC.format("dot"), "triton")
    base = await store.record_attempt(s.id, None, base_c.id, evals.gpu_eval(1.0), round=0, author="llm:m")
    fast = await store.record_attempt(
        s.id, rows.id, fast_c.id, evals.gpu_eval(1.5), base_attempt_id=base.id, round=1, author="llm:m"
    )
    await store.record_attempt(
        s.id, dot.id, bad_c.id, _compile_error(), base_attempt_id=base.id, round=2, author="llm:m"
    )
    await store.close_node(rows.id, "closed")
    await store.close_node(dot.id, "failed")
    await apply_intents(
        store,
        s.id,
        [IntentSpec(title="rows in registers, 2 warps", parent_id=rows.id)],
        "llm:m",
        1,
        reason="registers were the win: 1.5x at 4096",
    )
    await apply_edits(
        store, s.id, [{"op": "prune", "node_id": exp2.id, "reason": "exp is not the bottleneck"}], "llm:m", 2
    )
    # an edit of the rows intent in round 0, before it ran: a reflection on something else, not on it
    await apply_edits(
        store,
        s.id,
        [{"op": "update", "node_id": rows.id, "priority": 0.9, "reason": "ranked first at the start"}],
        "llm:m",
        0,
    )
    # a person's veto goes through the tool: it is credited and recorded into the bank at once
    await edit_tree(
        ws,
        EditTreeIn(
            search=s.id, edits=[{"op": "veto", "node_id": wide.id}], reason="registers spill past one row"
        ),
    )
    return {"search": s.id, "rows": rows.id, "dot": dot.id, "exp2": exp2.id, "wide": wide.id, "fast": fast.id}


def _by_title(entries: list[BankEntry]) -> dict[str, BankEntry]:
    return {e.title: e for e in entries}


async def test_a_search_s_records_become_entries_with_outcomes_device_and_protocol(
    bare_ws: Workspace,
) -> None:
    ids = await softmax_search(bare_ws)
    vetoed = _by_title(await bank.list_bank(bare_ws))
    assert vetoed["two rows per program"].outcome.kind == "vetoed"  # recorded by the veto itself
    assert vetoed["two rows per program"].credited == ["human"]
    assert await record_search(bare_ws, ids["search"]) == 5
    got = _by_title(await bank.list_bank(bare_ws))
    gain = got["one row per program, row in registers"]
    assert gain.outcome.kind == "gain" and 1.45 < gain.outcome.gain < 1.55
    assert gain.outcome.gain_ci[0] > 1.0 and gain.outcome.device == "NVIDIA H200" and gain.outcome.protocol
    assert gain.code and "BLOCK_N = 4096" in gain.code and "registers were the win" in gain.notes
    assert "ranked first at the start" not in gain.notes
    assert gain.signature.patterns == ["reduction", "softmax"]
    failed = got["use tl.dot for the row sums"].outcome
    assert failed.kind == "compile_error" and "tl.dot needs 16x16 tiles" in failed.detail
    assert got["exp2 instead of exp"].outcome.detail == "pruned by llm:m: exp is not the bottleneck"
    assert "vetoed by human: registers spill past one row" in got["two rows per program"].outcome.detail
    best = next(e for e in got.values() if e.kind == "best")
    assert best.source.attempt_id == ids["fast"] and best.params == {"BLOCK_N": 4096, "num_warps": 16}
    assert "1.5x vs eager" in bank.measured_words(best) and "NVIDIA H200" in bank.measured_words(best)
    # recording again is harmless: the same entries, not twice as many
    assert await record_search(bare_ws, ids["search"]) == 5 and len(await bank.list_bank(bare_ws)) == 5


async def test_a_related_search_reads_the_lessons_and_an_unrelated_one_does_not(ws: Workspace) -> None:
    await softmax_search(ws)
    await record_search(ws, "sm")
    related = await ws.store.create_search("xent", "cross_entropy", SearchConfig())
    other = await ws.store.create_search("conv", "conv2d", SearchConfig())
    prompt = await analyse_kernel(ws, related.id)
    assert "## Lessons from earlier searches (the kernel bank)" in prompt
    assert '"one row per program, row in registers"' in prompt and "worked: 1.5x over its base" in prompt
    assert "compile error:" in prompt and "same patterns reduction+softmax" in prompt
    assert "kernel bank" not in await analyse_kernel(ws, other.id)
    # the page says which entries the related search was shown, and why; the unrelated one was shown none
    shown = str(bank_used(await load_view(ws, related.id)))
    assert "entries from earlier searches shown to its prompts" in shown and "row in registers" in shown
    assert "no entry" in str(bank_used(await load_view(ws, other.id)))
    uses = await bank.bank_uses(ws, related.id)
    assert {u.phase for u in uses} == {"analyse"} and all(u.similarity >= 0.55 for u in uses)
    # writing code, the model is pointed at the related kernels that carry code (the gain's, and the best)
    (intent,) = await apply_intents(
        ws.store, related.id, [IntentSpec(title="one row per program")], "llm:m", 1
    )
    await ws.store.set_node_status(intent.id, "active")
    writing = await implement_intent(ws, related.id, intent.id)
    assert "## Related kernels from earlier searches (the kernel bank)" in writing
    assert "one row per program, row in registers" in writing and "ksearch bank show UID" in writing
    assert "implement" in {u.phase for u in await bank.bank_uses(ws, related.id)}
    other_intent = (await apply_intents(ws.store, other.id, [IntentSpec(title="tile it")], "llm:m", 1))[0]
    await ws.store.set_node_status(other_intent.id, "active")
    assert "kernel bank" not in await implement_intent(ws, other.id, other_intent.id)


async def test_the_tuner_starts_from_the_setting_that_won_on_the_nearest_task(ws: Workspace) -> None:
    await softmax_search(ws)
    await record_search(ws, "sm")
    s = await ws.store.create_search("xent", "cross_entropy", SearchConfig())
    ctx = await init_context(ws, s.id)
    assert ctx.bank_settings and ctx.bank_settings[0].params["num_warps"] == 16
    first = (await TunerPolicy().init(ctx)).intents[0]
    # BLOCK_N is not in cross_entropy's space; num_warps=16 is, and the seed has 8
    assert (
        first.title.startswith("start from the setting that won on softmax")
        and first.params["num_warps"] == 16
    )
    assert first.priority > 0.95
    alone = await ws.store.create_search("xent2", "cross_entropy", SearchConfig())
    plain = await init_context(ws, alone.id)
    plain.bank_settings = []
    assert not (await TunerPolicy().init(plain)).intents[0].title.startswith("start from")


async def test_a_shared_bank_file_collects_searches_of_several_databases(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "team-bank.db"
    async with await Workspace.open(tmp_path / "alice.db", bank=shared) as alice:
        await softmax_search(alice)
        assert await record_search(alice, "sm") == 5
        assert await bank.list_bank(alice) and bank.where(alice) == f"shared bank {shared}"
    async with await Workspace.open(tmp_path / "bob.db", bank=shared) as bob:
        s = await bob.store.create_search("sm", "softmax", SearchConfig())  # same name, another database
        out = await bank.query_bank(bob, bank.QueryBankIn(search=s.id))
        assert len(out.hits) >= 3  # alice's lessons are bob's: his search is not hers, whatever its name
        assert all(h.similarity and h.similarity > 0.9 for h in out.hits)
        exported = tmp_path / "bank.json"
        assert await bank.export_bank(bob, exported) == 5
    async with await Workspace.open(tmp_path / "carol.db") as carol:  # her own bank: empty until she imports
        assert (await bank.query_bank(carol, bank.QueryBankIn())).text == "This database's bank is empty."
        done = await bank.import_bank(carol, exported)
        assert done.added == 5 and len(await bank.list_bank(carol)) == 5


async def test_a_bank_path_that_is_not_a_ksearch_database_is_refused_with_the_way_forward(
    tmp_path: Path,
) -> None:
    not_db = tmp_path / "bank.json"
    not_db.write_text('{"format": "ksearch-bank"}')
    async with await Workspace.open(tmp_path / "k.db", bank=not_db) as w:
        with pytest.raises(Exception, match="ksearch bank import FILE"):
            await w.bank()
    assert not_db.read_text() == '{"format": "ksearch-bank"}'  # left as it was
