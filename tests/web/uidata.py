"""A small search written through the real store, for the UI, export and steering tests.

Evaluations are built by hand (no GPU here): plausible numbers, with the hostile strings a model could
put in titles, notes and code, so every view is exercised against injection.
"""

from __future__ import annotations

from pathlib import Path

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import (
    CompileReport,
    Diagnostic,
    EvalSettings,
    Evaluation,
    IntentSpec,
    SearchConfig,
    WorkloadCorrectness,
    WorkloadTiming,
)
from ksearch.worldmodel.store import Store

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
WORKLOADS = ("rows4096_cols1024", "rows512_cols8192")
EAGER_US = {"rows4096_cols1024": 42.0, "rows512_cols8192": 55.0}

SEED_SRC = """import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + offs, e / tl.sum(e, axis=0), mask=offs < n_cols)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""


def variant(tag: str, extra: str = "") -> str:
    """The seed with a marker line, so each attempt is a distinct candidate with a small diff."""
    return SEED_SRC.replace("    row = tl.program_id(0)\n", f"    row = tl.program_id(0)  # {tag}\n{extra}")


def ok_eval(speedup: float, seed: int = 7) -> Evaluation:
    timings = []
    for w in WORKLOADS:
        eager = EAGER_US[w]
        med = eager / speedup
        timings.append(
            WorkloadTiming(
                workload=w,
                device="NVIDIA H200",
                median_us=med,
                iqr_us=med * 0.02,
                ci_low_us=med * 0.99,
                ci_high_us=med * 1.01,
                n=120,
                eager_us=eager,
                compile_us=eager * 0.8,
                speedup_vs_eager=speedup,
                speedup_vs_compile=speedup * 0.8,
                roofline_fraction=min(0.95, 0.3 * speedup),
            )
        )
    return Evaluation(
        status="ok",
        compile=CompileReport(ok=True, language="triton", seconds=1.7, mode="triton jit"),
        correctness=[
            WorkloadCorrectness(workload=w, passed=True, kind="ok", trials=3, max_abs_err=3e-7)
            for w in WORKLOADS
        ],
        timings=timings,
        speedup_vs_eager=speedup,
        speedup_vs_compile=speedup * 0.8,
        settings=EvalSettings(seed=seed, workloads=list(WORKLOADS)),
        seconds=6.5,
    )


def compile_error_eval() -> Evaluation:
    return Evaluation(
        status="compile_error",
        compile=CompileReport(
            ok=False,
            language="triton",
            seconds=0.4,
            mode="triton jit",
            diagnostics=[
                Diagnostic(severity="error", line=9, message="unsupported tensor index: <i>" + HOSTILE)
            ],
            log="CompilationError at 9:8: tl.load got an unexpected keyword </pre>" + HOSTILE,
        ),
        error="the kernel does not compile: see line 9",
        seconds=0.5,
    )


def incorrect_eval() -> Evaluation:
    return Evaluation(
        status="incorrect",
        compile=CompileReport(ok=True, language="triton", seconds=1.2),
        correctness=[
            WorkloadCorrectness(
                workload=WORKLOADS[0],
                passed=False,
                kind="wrong_values",
                trials=1,
                max_abs_err=0.031,
                max_rel_err=0.9,
                mismatches=1024,
                numel=4194304,
                first_mismatch_index=[0, 1023],
                expected_at_first=0.00091,
                got_at_first=0.0,
                message="last column not written",
            )
        ],
        error="wrong values on rows4096_cols1024",
        seconds=2.0,
    )


async def build(db: Path, name: str = "softmax-demo") -> dict[str, int]:
    """Create the sample search; returns the ids tests refer to."""
    store = await Store.open(db)
    try:
        s = await store.create_search(name, "softmax", SearchConfig(policy="tuner"))
        root = await store.root(s.id)

        async def attempt(
            node_id: int | None, src: str, ev: Evaluation, base: int | None, rnd: int, author: str = "tuner"
        ) -> int:
            cand = await store.put_candidate(src, "triton")
            a = await store.record_attempt(
                s.id, node_id, cand.id, ev, base_attempt_id=base, round=rnd, author=author
            )
            return a.id

        seed_att = await attempt(root.id, SEED_SRC, ok_eval(1.0), None, 0)
        await store.bump_round(s.id)
        rows_node, warps_node, exp2_node, hostile_node = await apply_intents(
            store,
            s.id,
            [
                IntentSpec(
                    title="one row per program, row kept in registers",
                    priority=0.8,
                    difficulty=2,
                    rationale="The row fits in registers for n<=8192: one read, one write.",
                    base_attempt_id=seed_att,
                ),
                IntentSpec(
                    title="split long rows across warps",
                    priority=0.4,
                    difficulty=4,
                    rationale="For 8192 columns a single warp group under-uses bandwidth.",
                ),
                IntentSpec(title="exp2 with a log2(e) prescale", priority=0.3, difficulty=1),
                IntentSpec(
                    title="hostile " + HOSTILE,
                    priority=0.2,
                    difficulty=3,
                    rationale=HOSTILE,
                    notes="notes: " + HOSTILE,
                ),
            ],
            author="llm:demo",
            round=1,
        )
        a_rows1 = await attempt(rows_node.id, variant("rows v1"), ok_eval(1.4), seed_att, 1)
        a_rows2 = await attempt(
            rows_node.id, variant("rows v2", "    # num_warps=8\n"), ok_eval(1.9), a_rows1, 1
        )
        await store.bump_round(s.id)
        vec_node, online_node = await apply_intents(
            store,
            s.id,
            [
                IntentSpec(
                    title="128-bit vectorized loads",
                    parent_id=rows_node.id,
                    priority=0.7,
                    difficulty=2,
                    base_attempt_id=a_rows2,
                ),
                IntentSpec(
                    title="online softmax in a single pass",
                    parent_id=rows_node.id,
                    priority=0.6,
                    difficulty=3,
                ),
            ],
            author="llm:demo",
            round=2,
        )
        a_vec = await attempt(
            vec_node.id, variant("vectorized", "    # loads widened to 128 bits\n"), ok_eval(2.3), a_rows2, 2
        )
        a_bad = await attempt(
            online_node.id,
            variant("online", "    m = tl.load(x_ptr, mask=, other=0)\n"),
            compile_error_eval(),
            a_rows2,
            2,
        )
        a_wrong = await attempt(
            online_node.id, variant("online v2", "    # forgot the last column\n"), incorrect_eval(), a_bad, 2
        )
        await store.close_node(online_node.id, "failed")
        await apply_edits(
            store,
            s.id,
            [{"op": "prune", "node_id": exp2_node.id, "reason": "tl.exp already uses exp2"}],
            author="llm:demo",
            round=2,
        )
        await store.bump_round(s.id)
        a_hostile = await attempt(
            hostile_node.id, variant("hostile", f"    # </code></pre>{HOSTILE}\n"), ok_eval(0.7), seed_att, 3
        )
        await store.log_llm_call(
            search_id=s.id,
            phase="init",
            provider="anthropic",
            model="demo-model",
            tokens_in=5200,
            tokens_out=900,
            cost_usd=0.03,
            latency_s=11.0,
            request="analyse the kernel",
            response="memory bound; " + HOSTILE,
        )
        await store.log_llm_call(
            search_id=s.id,
            phase="update",
            provider="anthropic",
            model="demo-model",
            tokens_in=7400,
            tokens_out=1300,
            cost_usd=0.05,
            latency_s=14.0,
            request="reflect",
            response="prune exp2",
        )
        return {
            "search": s.id,
            "root": root.id,
            "rows": rows_node.id,
            "warps": warps_node.id,
            "exp2": exp2_node.id,
            "hostile": hostile_node.id,
            "vec": vec_node.id,
            "online": online_node.id,
            "seed_attempt": seed_att,
            "rows_attempt": a_rows2,
            "best_attempt": a_vec,
            "bad_attempt": a_bad,
            "wrong_attempt": a_wrong,
            "hostile_attempt": a_hostile,
        }
    finally:
        await store.close()


async def build_showcase(db: Path, name: str = "softmax-demo") -> dict[str, int]:
    """The sample search with what a person pairing adds to it: a pinned intent, a kernel of their own, and an
    intent the tuner declined (for the screenshots in docs/; the tests use `build`)."""
    from ksearch.tools.edit_tree import EditTreeIn, edit_tree
    from ksearch.tools.loop.declines import decline_intent
    from ksearch.tools.select_action import SelectActionIn, select_action
    from ksearch.tools.workspace import Workspace
    from ksearch.worldmodel.models import EditSpec

    ids = await build(db, name)
    async with await Workspace.open(db) as ws:
        s = await ws.search(ids["search"])
        await edit_tree(
            ws,
            EditTreeIn(
                search=s.id,
                edits=[EditSpec(op="pin", node_id=ids["vec"], reason="build on the best first")],
                author="human",
            ),
        )
        sel = await select_action(ws, SelectActionIn(search=s.id, node_id=ids["warps"]), budget_checked=True)
        assert sel.node is not None
        await decline_intent(
            ws, s, sel.node, "it names no tunable to set", by="tuner", attempts=0, author="tuner"
        )
    store = await Store.open(db)
    try:
        cand = await store.put_candidate(variant("by hand", "    # two rows per program\n"), "triton")
        a = await store.record_attempt(
            s.id,
            ids["vec"],
            cand.id,
            ok_eval(2.1),
            base_attempt_id=ids["best_attempt"],
            round=3,
            author="human",
        )
        ids["human_attempt"] = a.id
    finally:
        await store.close()
    return ids


if __name__ == "__main__":  # python tests/web/uidata.py OUT.db: the showcase database, for screenshots
    import asyncio
    import sys

    print(asyncio.run(build_showcase(Path(sys.argv[1]))))
