"""`ksearch export`: a whole search as JSON, or as one self-contained HTML report.

The JSON holds everything the database knows about the search (tree, attempts with evaluations,
candidate sources, edit log, LLM calls). The report is one file with no script and no external
resource: summary, the score over rounds, the tree, the best path with its reasoning, the best
kernel with its evaluation and diff, every attempt, and the spend per phase. `--solution` writes the
best kernel of a search on a FlashInfer-Bench definition as a FlashInfer-Bench Solution JSON.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ksearch.server.web.attempt_html import attempt_detail
from ksearch.server.web.html import Markup, h
from ksearch.server.web.pages import document
from ksearch.server.web.parts import attempt_status, notes_label, speed, status_badge, table, text_block
from ksearch.server.web.search_html import chart, node_detail, summary, tree
from ksearch.server.web.snapshot import SearchView, load_view, resolve_base
from ksearch.worldmodel.models import Attempt, Candidate, Edit, FinalVerdict, LLMCall, Node, Search, utcnow
from ksearch.worldmodel.render import no_best
from ksearch.worldmodel.store import LLMTotals, Store

if TYPE_CHECKING:
    from ksearch.gpu.task import Task

EXPORT_FORMAT = "ksearch.search/1"
STYLE_FILE = Path(__file__).parent.parent / "web" / "static" / "style.css"


class SearchExport(BaseModel):
    format: str = EXPORT_FORMAT
    exported_at: datetime
    search: Search
    nodes: list[Node]
    attempts: list[Attempt]
    candidates: dict[str, Candidate]
    edits: list[Edit]
    llm_calls: list[LLMCall]
    llm_totals: LLMTotals
    # the final evaluation's outcomes and what it did to the best (a best that failed it lost its place)
    final: FinalVerdict | None = None


async def export_data(store: Store, ref: int | str, *, llm_text: bool = True) -> SearchExport:
    """Everything about one search. `llm_text=False` leaves out the prompts and responses (large)."""
    view = await load_view(store, ref)
    sid = view.search.id
    cands: dict[str, Candidate] = {}
    for a in view.attempts:
        if a.candidate_id not in cands:
            cands[a.candidate_id] = await store.get_candidate(a.candidate_id)
    calls = await store.list_llm_calls(sid)
    if not llm_text:
        calls = [c.model_copy(update={"request": "", "response": ""}) for c in calls]
    return SearchExport(
        exported_at=utcnow(),
        search=view.search,
        nodes=view.nodes,
        attempts=view.attempts,
        candidates=cands,
        edits=await store.list_edits(sid),
        llm_calls=calls,
        llm_totals=view.llm,
        final=await store.final_verdict(sid),
    )


async def export_json(store: Store, ref: int | str, *, llm_text: bool = True) -> str:
    return (await export_data(store, ref, llm_text=llm_text)).model_dump_json(indent=1)


def _phase_table(calls: list[LLMCall]) -> Markup:
    by: dict[tuple[str, str], list[LLMCall]] = {}
    for c in calls:
        by.setdefault((c.phase, c.model), []).append(c)
    rows: list[list[object]] = []
    for (phase, model), cs in sorted(by.items()):
        rows.append(
            [
                phase,
                model,
                str(len(cs)),
                f"{sum(c.tokens_in for c in cs):,}",
                f"{sum(c.tokens_out for c in cs):,}",
                f"${sum(c.cost_usd for c in cs):.2f}",
                f"{sum(c.latency_s for c in cs):.0f}s",
                str(sum(1 for c in cs if c.error)),
            ]
        )
    return table(["phase", "model", "calls", "tokens in", "tokens out", "cost", "latency", "errors"], rows)


def _attempts_table(view: SearchView) -> Markup:
    rows: list[list[object]] = []
    for a in view.attempts:
        node = view.by_id.get(a.node_id) if a.node_id is not None else None
        ev = a.evaluation
        rows.append(
            [
                f"#{a.id}" + (" (best)" if a.id == view.search.best_attempt_id else ""),
                str(a.round),
                f"#{node.id} {node.title}" if node and node.kind == "intent" else ("root" if node else "–"),
                a.author,
                status_badge(attempt_status(a)),
                speed(a.speedup),
                speed(ev.speedup_vs_compile if ev and ev.status == "ok" else None),
                (ev.error or "")[:200] if ev else "",
            ]
        )
    return table(["attempt", "round", "node", "author", "status", "vs eager", "vs compile", "error"], rows)


def _best_path(view: SearchView, edits: list[Edit]) -> Markup | None:
    best = view.best_attempt
    if best is None or best.node_id is None:
        return None
    chain: list[Node] = []
    node: Node | None = view.by_id.get(best.node_id)
    while node is not None:
        chain.append(node)
        node = view.by_id.get(node.parent_id) if node.parent_id is not None else None
    items = []
    for n in reversed(chain):
        items.append(
            h(
                "li",
                None,
                h("strong", None, f"#{n.id} " + (n.title if n.kind == "intent" else "root")),
                h("span", {"class": "muted"}, f" · best here {speed(view.stats[n.id].best_speedup)}"),
                text_block("Rationale" if n.kind == "intent" else "Kernel analysis", n.rationale),
                text_block(notes_label(n, edits), n.notes),
            )
        )
    return h("ol", {"class": "best-path"}, items)


def _no_best_path(view: SearchView) -> str:
    best = view.best_attempt
    if best is not None:  # the search's best, recorded on no node (e.g. submitted without --node)
        return f"The best attempt, #{best.id} ({speed(best.speedup)} vs eager), is on no node of the tree."
    return f"No best attempt yet: {no_best(view.cpu_correct)}."


async def export_html(store: Store, ref: int | str) -> str:
    view = await load_view(store, ref)
    s = view.search
    edits = await store.list_edits(s.id)
    calls = await store.list_llm_calls(s.id)
    best = view.best_attempt
    best_html: Markup
    if best is not None:
        cand = await store.get_candidate(best.candidate_id)
        best_html = attempt_detail(best, cand, await resolve_base(store, best))
    else:
        best_html = h("p", {"class": "muted"}, "No correct, timed attempt yet.")
    verdict = await store.final_verdict(s.id)
    if verdict is not None and verdict.note():
        best_html = h("div", None, h("p", {"class": "final-lost"}, verdict.note() + "."), best_html)
    nodes_html = [
        h(
            "details",
            {"id": f"node-{n.id}", "class": "panel"},
            h(
                "summary",
                None,
                f"#{n.id} " + (n.title if n.kind == "intent" else "root"),
                " ",
                status_badge(n.status.value),
            ),
            node_detail(view, n, edits),
        )
        for n in view.nodes
    ]
    body = h(
        "body",
        {"class": "report"},
        h(
            "header",
            {"class": "topbar"},
            h("span", {"class": "home"}, "ksearch report"),
            h("h1", None, s.name),
            h("span", {"class": "live"}, f"exported {utcnow():%Y-%m-%d %H:%M} UTC"),
        ),
        h(
            "main",
            None,
            h("section", {"class": "panel"}, summary(view)),
            h(
                "section",
                {"class": "panel chart-panel"},
                h("h2", None, "Score over rounds"),
                chart(view),
            ),
            h(
                "section",
                {"class": "panel tree-panel"},
                h("h2", None, "World model"),
                tree(view, link=True),
            ),
            h(
                "section",
                {"class": "panel"},
                h("h2", None, "Best path"),
                _best_path(view, edits) or h("p", {"class": "muted"}, _no_best_path(view)),
            ),
            h("section", {"class": "panel"}, h("h2", None, "Best kernel"), best_html),
            h(
                "section",
                {"class": "panel"},
                h("h2", None, f"All attempts ({len(view.attempts)})"),
                _attempts_table(view),
            ),
            h(
                "section",
                {"class": "panel"},
                h("h2", None, "LLM spend"),
                h(
                    "p",
                    None,
                    f"{view.llm.calls} calls · {view.llm.tokens_in:,} tokens in · {view.llm.tokens_out:,} "
                    f"tokens out · ${view.llm.usd:.2f}",
                ),
                _phase_table(calls) if calls else None,
            ),
            h("section", None, h("h2", {"class": "panel"}, "Nodes"), nodes_html),
        ),
    )
    style = Markup("<style>\n" + STYLE_FILE.read_text().replace("</", "<\\/") + "\n</style>")
    return document(f"{s.name} · ksearch report", style, body)


async def export_solution(store: Store, s: Search, task: Task) -> str:
    """The search's best kernel as a FlashInfer-Bench Solution JSON for the task's definition.

    Raises ksearch.gpu.tasks.fib_solution.SolutionError when there is nothing to export or it cannot be one."""
    from ksearch.gpu.tasks.fib_solution import Identity, SolutionError, solution_from_candidate
    from ksearch.worldmodel.render import no_best

    if task.style != "flashinfer":
        raise SolutionError(
            f"search {s.name!r} is on {task.name!r}, a {task.style} task: a Solution JSON exists only for a "
            "FlashInfer-Bench definition (a search whose task is a definition's .json)"
        )
    a = await store.best_attempt(s.id)
    if a is None or a.evaluation is None:
        cpu = len((await store.attempt_speedups(s.id)).cpu_interpreted)
        raise SolutionError(f"search {s.name!r} has no best kernel to export yet: {no_best(cpu)}")
    cand = await store.get_candidate(a.candidate_id)
    ev = a.evaluation
    device = next((t.device for t in ev.timings), None) or (ev.env.device if ev.env else None)
    node = await store.get_node(a.node_id) if a.node_id is not None else None
    what = f" ({node.title})" if node is not None and node.kind == "intent" else ""
    speed = f"; {ev.speedup_vs_eager:.3f}x vs eager PyTorch on {device}" if ev.speedup_vs_eager else ""
    who = Identity(
        name=re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{task.name}_ksearch_{s.name}_a{a.id}"),
        author=re.sub(r"[^A-Za-z0-9_.-]+", "-", f"ksearch-{a.author}").strip("-"),
        description=f"ksearch search {s.name!r}, attempt #{a.id}{what}{speed}",
        target_hardware=[re.sub(r"\s+", "_", device.strip()) if device else "cuda"],
    )
    return solution_from_candidate(cand.source, cand.language, task, who).to_json()
