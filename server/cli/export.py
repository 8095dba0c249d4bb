"""`ksearch export`: a whole search as JSON, or as one self-contained HTML report.

The JSON holds everything the database knows about the search (tree, attempts with evaluations,
candidate sources, edit log, LLM calls). The report is one file with no script and no external
resource: summary, the score over rounds, the tree, the best path with its reasoning, the best
kernel with its evaluation and diff, every attempt, and the spend per phase. Both are read through
ksearch.tools.read_search. With `--attempt N` the JSON is that attempt's record alone and the report's kernel
section shows it instead of the best. The kernel formats (`--solution`, `--submission`, `--kernelbench`) are
written by ksearch.tools.files.solutions and ksearch.tools.export_kernel (server/cli/exporting.py is the command).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from ksearch.server.web.attempt_html import attempt_detail
from ksearch.server.web.html import Markup, h
from ksearch.server.web.pages import document
from ksearch.server.web.parts import attempt_status, notes_label, speed, status_badge, table, text_block
from ksearch.server.web.search_html import chart, node_detail, summary, tree
from ksearch.server.web.snapshot import SearchView, base_of, view_of
from ksearch.tools.llm_calls import cache_text
from ksearch.tools.read_search import AttemptRecord, LLMTotals, read_attempt, read_search
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Attempt, Candidate, Edit, FinalVerdict, LLMCall, Node, Search, utcnow
from ksearch.worldmodel.render import no_best

EXPORT_FORMAT = "ksearch.search/1"
ATTEMPT_FORMAT = "ksearch.attempt/1"
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


async def export_data(ws: Workspace, ref: int | str, *, llm_text: bool = True) -> SearchExport:
    """Everything about one search. `llm_text=False` leaves out the prompts and responses (large)."""
    snap = await read_search(ws, ref, history=True, sources=True, llm_text=llm_text)
    return SearchExport(
        exported_at=utcnow(),
        search=snap.search,
        nodes=snap.nodes,
        attempts=snap.attempts,
        candidates=snap.candidates,
        edits=snap.edits,
        llm_calls=snap.llm_calls,
        llm_totals=snap.llm_totals,
        final=snap.final,
    )


async def export_json(ws: Workspace, ref: int | str, *, llm_text: bool = True) -> str:
    return (await export_data(ws, ref, llm_text=llm_text)).model_dump_json(indent=1)


class AttemptExport(BaseModel):
    format: str = ATTEMPT_FORMAT
    exported_at: datetime
    search: Search
    attempt: Attempt
    node: Node | None
    candidate: Candidate


async def search_attempt(ws: Workspace, s: Search, attempt_id: int) -> AttemptRecord:
    """One attempt of the search, any status (NotFound naming the search's attempts otherwise)."""
    try:
        rec: AttemptRecord | None = await read_attempt(ws, attempt_id)
    except NotFound:
        rec = None
    if rec is None or rec.attempt.search_id != s.id:
        ids = [a.id for a in (await read_search(ws, s.id)).attempts]
        have = f"its attempts are #{ids[0]}–#{ids[-1]}" if ids else "it has no attempt yet"
        raise NotFound(f"search {s.name!r} has no attempt #{attempt_id}: {have}")
    return rec


async def export_attempt_json(ws: Workspace, ref: int | str, attempt_id: int) -> str:
    """One attempt of a search as JSON: the search, the attempt with its evaluation, its node and candidate."""
    s = await ws.search(ref)
    rec = await search_attempt(ws, s, attempt_id)
    node = await ws.records.get_node(rec.attempt.node_id) if rec.attempt.node_id is not None else None
    doc = AttemptExport(
        exported_at=utcnow(), search=s, attempt=rec.attempt, node=node, candidate=rec.candidate
    )
    return doc.model_dump_json(indent=1)


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
                _cache_cell(cs),
                f"{sum(c.tokens_out for c in cs):,}",
                f"${sum(c.cost_usd for c in cs):.2f}",
                f"{sum(c.latency_s for c in cs):.0f}s",
                str(sum(1 for c in cs if c.error)),
            ]
        )
    return table(
        [
            "phase",
            "model",
            "calls",
            "tokens in",
            "cache read / written",
            "tokens out",
            "cost",
            "latency",
            "errors",
        ],
        rows,
    )


def _cache_cell(calls: list[LLMCall]) -> str:
    """The input tokens the prompt cache served and took, over the calls that said; those that did not, counted."""
    with_input = [c for c in calls if c.tokens_in]
    if not with_input:
        return "–"
    read = [c.cache_read_tokens for c in with_input if c.cache_read_tokens is not None]
    wrote = [c.cache_write_tokens for c in with_input if c.cache_write_tokens is not None]
    if not read and not wrote:
        return "not reported"
    cell = f"{sum(read):,} / " + (f"{sum(wrote):,}" if wrote else "not reported")
    unsaid = len(with_input) - len(read)
    return cell + (f" ({unsaid} calls did not say)" if unsaid else "")


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


async def export_html(ws: Workspace, ref: int | str, attempt_id: int | None = None) -> str:
    """The report; `attempt_id`: its kernel section shows that attempt (any status) instead of the best."""
    snap = await read_search(ws, ref, history=True)
    view = view_of(snap)
    s = view.search
    edits, calls = snap.edits, snap.llm_calls
    best = view.best_attempt
    best_html: Markup
    kernel_title = "Best kernel"
    if attempt_id is not None:
        rec = await search_attempt(ws, s, attempt_id)
        kernel_title = f"Attempt #{attempt_id}" + (
            " (the best kernel)" if best and best.id == attempt_id else ""
        )
        best_html = attempt_detail(rec.attempt, rec.candidate, base_of(rec.base))
    elif best is not None:
        rec = await read_attempt(ws, best.id)
        best_html = attempt_detail(rec.attempt, rec.candidate, base_of(rec.base))
    else:
        # why there is none: a CPU machine's correct attempts are never timed, so never a best
        why = no_best(view.cpu_correct)
        more = (
            " (the CPU interpreter's timings never rank candidates; `ksearch attempt` reads any attempt's code)"
            if view.cpu_correct
            else ""
        )
        best_html = h("p", {"class": "muted"}, f"No best kernel: {why}{more}.")
    verdict = snap.final
    if attempt_id is None and verdict is not None and verdict.note():
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
            h("section", {"class": "panel"}, h("h2", None, kernel_title), best_html),
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
                h("p", None, f"prompt cache: {cache}") if (cache := cache_text(view.llm)) else None,
                _phase_table(calls) if calls else None,
            ),
            h("section", None, h("h2", {"class": "panel"}, "Nodes"), nodes_html),
        ),
    )
    style = Markup("<style>\n" + STYLE_FILE.read_text().replace("</", "<\\/") + "\n</style>")
    return document(f"{s.name} · ksearch report", style, body)
