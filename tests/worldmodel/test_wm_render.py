"""Rendering: hard budget, what is always kept (root analysis, best path, frontier, notes), JSON, Mermaid."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import Attempt, AttemptSpeedups, Evaluation, Node, Search, WorkloadTiming
from ksearch.worldmodel.render import render_search, render_tree, tree_json, tree_mermaid
from ksearch.worldmodel.store import Store

LINE = re.compile(r"^\s*#(\d+) ")


def mk(nid: int, parent: int | None, **kw: Any) -> Node:
    kind = "root" if parent is None else "intent"
    kw.setdefault("title", f"idea {nid}")
    return Node(id=nid, search_id=1, parent_id=parent, kind=kind, **kw)


def shown(text: str) -> list[int]:
    return [int(m.group(1)) for line in text.splitlines() if (m := LINE.match(line))]


def big_tree(n: int, seed: int = 0) -> tuple[list[Node], dict[int, float | None], int]:
    """n nodes: random shape, a mix of statuses, notes on many; returns (nodes, speedups, best attempt id)."""
    rng = random.Random(seed)
    nodes = [mk(1, None, rationale="ANALYSIS: memory bound, 3 bytes/flop", notes="root notes")]
    speedups: dict[int, float | None] = {}
    for nid in range(2, n + 1):
        parent = rng.randint(1, nid - 1) if nid > 10 else 1
        status = rng.choice(["open", "open", "closed", "failed", "pruned"])
        if nodes[parent - 1].status == "pruned":  # as in a real tree: pruning takes the subtree
            status = "pruned"
        best = None
        if status == "closed":
            best = 1000 + nid
            speedups[best] = round(rng.uniform(0.5, 2.0), 3)
        nodes.append(
            mk(
                nid,
                parent,
                status=status,
                priority=round(rng.random(), 2),
                difficulty=rng.randint(1, 5),
                notes=f"belief about {nid}" if rng.random() < 0.5 else "",
                rationale=f"why {nid}" if rng.random() < 0.5 else "",
                best_attempt_id=best,
            )
        )
    best_id = max(speedups, key=lambda a: speedups[a] or 0)
    return nodes, speedups, best_id


def test_small_tree_is_shown_whole_with_notes() -> None:
    nodes = [
        mk(1, None, rationale="softmax over rows: memory bound", notes="H200: 4.8 TB/s"),
        mk(
            2,
            1,
            status="closed",
            priority=0.8,
            difficulty=2,
            best_attempt_id=10,
            notes="one pass works",
            visits=3,
        ),
        mk(3, 2, priority=0.6, rationale="fewer barriers\nand fewer loads", pinned=True),
        mk(4, 1, status="pruned", priority=0.1),
    ]
    text = render_tree(nodes, {10: 1.84}, 6000)
    assert shown(text) == [1, 2, 3, 4]
    assert "analysis: softmax over rows: memory bound" in text and "notes: H200: 4.8 TB/s" in text
    assert "#2 [closed] p0.80 d2 best 1.840x tries 3 <-BEST" in text
    assert "PINNED" in text and "notes: one pass works" in text
    assert "why: fewer barriers\n" in text and "and fewer loads" in text
    assert "not shown" not in text
    # a bare speedup map does not say how many workloads the figure covers: named as the search set's
    head = "tree: 4 nodes (1 open, 1 closed, 1 pruned); best 1.840x on the search set at #2 (attempt #10)"
    assert text.splitlines()[0].startswith(head), text.splitlines()[0]


def test_large_tree_keeps_root_best_path_frontier_and_notes_within_budget() -> None:
    nodes, speedups, best_id = big_tree(3000)
    by_id = {n.id: n for n in nodes}
    best_node = next(n for n in nodes if n.best_attempt_id == best_id)
    for budget in (1500, 4000, 6000):
        text = render_tree(nodes, speedups, budget, best_attempt_id=best_id)
        assert len(text) <= budget
        ids = shown(text)
        assert "ANALYSIS: memory bound" in text
        path = []
        x: int | None = best_node.id
        while x is not None:
            path.append(x)
            x = by_id[x].parent_id
        assert set(path) <= set(ids), "the best path must be shown"
        frontier = sorted((n for n in nodes if n.status == "open"), key=lambda n: (-n.priority, n.id))
        assert frontier[0].id in ids
        if budget >= 4000:
            assert frontier[1].id in ids and frontier[2].id in ids
        for nid in ids:  # every shown node keeps its notes
            if by_id[nid].notes and "notes elided" not in text:
                assert f"notes: {by_id[nid].notes}" in text
        footer = text.splitlines()[-1]
        hidden = int(re.match(r"\[(\d+) of 3000 nodes not shown", footer).group(1))  # type: ignore[union-attr]
        assert hidden == 3000 - len(ids)


def test_lower_value_nodes_go_before_reasoning_is_cut() -> None:
    long_notes = "x" * 900
    nodes = [mk(1, None, rationale="root analysis")]
    nodes += [mk(i, 1, status="closed", priority=0.1, notes=long_notes) for i in range(2, 12)]  # low value
    nodes.append(mk(20, 1, priority=0.9, notes="frontier belief " * 10))
    text = render_tree(nodes, {}, 1200)
    assert len(text) <= 1200
    assert "#20 [open]" in text and "frontier belief frontier belief" in text
    assert "notes elided" not in text  # whole low-value nodes were dropped instead


def test_over_long_reasoning_on_the_best_path_is_elided_not_overflowed() -> None:
    huge = "y" * 4000
    nodes = [mk(1, None, rationale="root analysis")]
    nodes += [mk(i, i - 1, status="closed", notes=huge) for i in range(2, 6)]
    nodes[-1] = mk(5, 4, status="closed", notes=huge, best_attempt_id=99)
    text = render_tree(nodes, {99: 3.0}, 3000, best_attempt_id=99)
    assert len(text) <= 3000
    assert shown(text) == [1, 2, 3, 4, 5]
    assert len(re.findall(r"\(notes elided: 40\d\d chars\)", text)) == 4
    assert "<-BEST" in text


def test_root_analysis_over_the_budget_is_cut_with_a_marker() -> None:
    nodes = [mk(1, None, rationale="z" * 10_000), mk(2, 1)]
    text = render_tree(nodes, {}, 800)
    assert len(text) <= 800
    assert "analysis cut at" in text


def test_budget_must_be_usable() -> None:
    with pytest.raises(ValueError, match="at least 400"):
        render_tree([mk(1, None)], {}, 50)
    with pytest.raises(ValueError, match="no root"):
        render_tree([mk(2, 1)], {}, 1000)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), budget=st.integers(400, 5000))
def test_budget_is_hard_for_any_tree(seed: int, n: int, budget: int) -> None:
    rng = random.Random(seed)
    nodes = [mk(1, None, rationale="r" * rng.randint(0, 3000))]
    speedups: dict[int, float | None] = {}
    for nid in range(2, n + 1):
        best = nid if rng.random() < 0.3 else None
        if best:
            speedups[best] = rng.uniform(0.1, 5)
        nodes.append(
            mk(
                nid,
                rng.randint(1, nid - 1),
                title="t" * rng.randint(3, 200),
                notes="n\n" * rng.randint(0, 300),
                status=rng.choice(["open", "closed", "failed", "pruned", "active"]),
                best_attempt_id=best,
                pinned=rng.random() < 0.05,
            )
        )
    text = render_tree(nodes, speedups, budget)
    assert len(text) <= budget
    assert shown(text)[0] == 1
    if n > 1 and len(shown(text)) < n:
        assert "nodes not shown" in text.splitlines()[-1]


def test_attempt_objects_are_accepted_too() -> None:
    att = Attempt(
        id=5,
        search_id=1,
        node_id=2,
        candidate_id="c1",
        evaluation=Evaluation(status="ok", speedup_vs_eager=2.5),
    )
    text = render_tree([mk(1, None), mk(2, 1, status="closed", best_attempt_id=5)], {5: att})
    assert "best 2.500x" in text


def test_tree_json() -> None:
    nodes = [mk(1, None), mk(2, 1, status="closed", best_attempt_id=7), mk(3, 2), mk(4, 1)]
    data = tree_json(nodes, {7: 1.5})
    assert data["root_id"] == 1 and data["best_node_id"] == 2 and data["best_path"] == [1, 2]
    by_id = {n["id"]: n for n in data["nodes"]}
    assert by_id[1]["children"] == [2, 4] and by_id[2]["children"] == [3]
    assert by_id[2]["best_speedup"] == 1.5 and by_id[3]["best_speedup"] is None
    assert data["counts"] == {"open": 2, "closed": 1}


def test_tree_mermaid() -> None:
    nodes = [
        mk(1, None),
        mk(2, 1, title='use "fast" <path>', status="closed", best_attempt_id=7),
        mk(3, 2, pinned=True),
        mk(4, 1, vetoed=True),
    ]
    text = tree_mermaid(nodes, {7: 1.5})
    assert '"#3 open PINNED p' in text and '"#4 open VETOED p' in text and "#2 closed p" in text
    assert text.startswith("flowchart TD")
    assert "n1 --> n2" in text and "n2 --> n3" in text
    assert "#quot;fast#quot; #lt;path#gt;" in text and '"fast"' not in text
    assert "class n2 best" in text
    big, speedups, best = big_tree(500)
    limited = tree_mermaid(big, speedups, best_attempt_id=best, max_nodes=40)
    assert len(re.findall(r'^  n\d+\["', limited, re.M)) == 40
    assert "460 more nodes not shown" in limited


@pytest.mark.anyio
async def test_render_search_from_the_store(store: Store, search: Search) -> None:
    root = await store.root(search.id)
    await apply_edits(
        store,
        search.id,
        [{"op": "update", "node_id": root.id, "rationale": "reduction over the last dim"}],
        "llm:m",
        0,
    )
    a, _ = await apply_intents(
        store,
        search.id,
        [{"title": "online softmax", "notes": "single pass"}, {"title": "warp per row"}],
        "llm:m",
        1,
    )
    cand = await store.put_candidate("src", "triton")
    await store.record_attempt(search.id, a.id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.9))
    await store.close_node(a.id, "closed")  # its refine phase ended
    text = await render_search(store, search.id, 1000)
    assert len(text) <= 1000
    assert text.startswith("search 'demo' on softmax (round 0, new)")
    assert "analysis: reduction over the last dim" in text
    assert f"#{a.id} [closed]" in text and "best 1.900x" in text and "notes: single pass" in text


# ------------------------------------------------------------------ CPU-interpreter timings rank nothing

CPU_TEXT = "best correct (CPU interpreter: not timed)"


def cpu_attempt(aid: int, node: int, speedup: float) -> Attempt:
    timing = WorkloadTiming(
        workload="smoke",
        device="cpu-interpreter",
        median_us=1.0,
        iqr_us=0.1,
        ci_low_us=0.9,
        ci_high_us=1.1,
        n=3,
    )
    ev = Evaluation(status="ok", timings=[timing], speedup_vs_eager=speedup)
    return Attempt(id=aid, search_id=1, node_id=node, candidate_id="c1", evaluation=ev)


def test_cpu_interpreter_best_is_shown_as_correct_never_as_a_speedup() -> None:
    nodes = [
        mk(1, None),
        mk(2, 1, status="closed", best_attempt_id=5),
        mk(3, 1, status="closed", best_attempt_id=7),
    ]
    speedups = AttemptSpeedups({5: None, 7: 1.5}, cpu_interpreted=[5])
    text = render_tree(nodes, speedups, best_attempt_id=7)
    assert f"#2 [closed] p0.50 d3 {CPU_TEXT} idea 2" in text
    assert "#3 [closed] p0.50 d3 best 1.500x <-BEST idea 3" in text
    # Attempt objects say the same: a CPU speedup of 9x is not shown and does not win the fallback.
    attempts = {
        5: cpu_attempt(5, 2, 9.0),
        7: Attempt(
            id=7,
            search_id=1,
            node_id=3,
            candidate_id="c2",
            evaluation=Evaluation(status="ok", speedup_vs_eager=1.5),
        ),
    }
    text = render_tree(nodes, attempts)
    assert f"#2 [closed] p0.50 d3 {CPU_TEXT} idea 2" in text and "9.00x" not in text
    assert "best 1.500x <-BEST" in text


def test_cpu_only_tree_has_no_best_marker() -> None:
    nodes = [mk(1, None), mk(2, 1, status="closed", best_attempt_id=5), mk(3, 2)]
    for attempts in (AttemptSpeedups({5: None}, cpu_interpreted=[5]), {5: cpu_attempt(5, 2, 4.0)}):
        # also when a database from before the rule names the CPU attempt as the search's best
        for best in (None, 5):
            text = render_tree(nodes, attempts, best_attempt_id=best)
            assert "BEST" not in text and "x " not in text.split("\n", 1)[1]
            assert text.splitlines()[0].endswith("no best yet: 1 correct, none timed on a GPU (at nodes #2)")
            assert f"#2 [closed] p0.50 d3 {CPU_TEXT} idea 2" in text
            data = tree_json(nodes, attempts, best_attempt_id=best)
            assert (data["best_node_id"], data["best_path"]) == (None, [])
            by_id = {n["id"]: n for n in data["nodes"]}
            assert (by_id[2]["best_speedup"], by_id[2]["best_cpu_interpreter"]) == (None, True)
            assert by_id[3]["best_cpu_interpreter"] is False
            mermaid = tree_mermaid(nodes, attempts, best_attempt_id=best)
            assert "correct (CPU interpreter: not timed)" in mermaid and "class n2 best" not in mermaid


@pytest.mark.anyio
async def test_render_search_with_cpu_interpreter_attempts(store: Store, search: Search) -> None:
    a, b = await apply_intents(
        store, search.id, [{"title": "online softmax"}, {"title": "warp per row"}], "human", 0
    )
    cand = await store.put_candidate("src", "triton")
    await store.record_attempt(search.id, a.id, cand.id, cpu_attempt(1, a.id, 3.0).evaluation)
    text = await render_search(store, search.id, 1000)
    assert f"#{a.id} [" in text and f"{CPU_TEXT} tries 1 online softmax" in text
    assert "BEST" not in text and "3.000x" not in text
    assert "no best yet: 1 correct, none timed on a GPU" in text and "no timed correct" not in text
    gpu = Evaluation(status="ok", speedup_vs_eager=1.25)
    await store.record_attempt(search.id, b.id, cand.id, gpu)
    text = await render_search(store, search.id, 1000)
    assert "best 1.250x tries 1 <-BEST warp per row" in text and f"{CPU_TEXT} tries 1 online softmax" in text
    assert f"best 1.250x on the search set at #{b.id} (attempt #" in text


def test_kernel_resources_show_an_unreported_count_as_unknown() -> None:
    from ksearch.worldmodel.models import KernelResources
    from ksearch.worldmodel.render import kernel_resources

    known = KernelResources(
        name="k", registers=40, spill_stores_bytes=0, spill_loads_bytes=0, shared_bytes=32, stack_bytes=0
    )
    assert kernel_resources(known) == "regs=40 spills=0/0B smem=32B stack=0B"
    # after a launch Triton's metadata has no spill loads nor stack: they are unknown, not "None"
    launched = KernelResources(name="k", registers=39, spill_stores_bytes=0, shared_bytes=64)
    assert kernel_resources(launched) == "regs=39 spills=0/?B smem=64B stack=?"


def test_the_best_names_its_workloads_and_after_a_final_evaluation_shows_the_final_figure_first() -> None:
    nodes = [mk(1, None), mk(2, 1, status="closed", best_attempt_id=10)]
    speedups = AttemptSpeedups({10: 10.038}, (), {10: 3})
    head = render_tree(nodes, speedups, 6000, best_attempt_id=10).splitlines()[0]
    assert head.endswith("best 10.038x over 3 search workloads at #2 (attempt #10)"), head
    head = render_tree(nodes, speedups, 6000, best_attempt_id=10, final=(9.985, 7)).splitlines()[0]
    assert head.endswith(
        "best 9.985x over all 7 workloads (final evaluation; 10.038x over 3 search workloads) at #2 (attempt #10)"
    ), head
    # the node's own line keeps its search-set figure
    assert "#2 [closed] p0.50 d3 best 10.038x" in render_tree(nodes, speedups, 6000, best_attempt_id=10)
