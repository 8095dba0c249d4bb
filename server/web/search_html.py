"""HTML fragments of a search: its summary, score chart, tree and one node's details.

Used by the live page (rendered into the first view, then swapped in by a small script) and by the
exported report (inlined), so both show the same thing.
"""

from __future__ import annotations

import json

from ksearch.server.web.chart import score_chart
from ksearch.server.web.html import Markup, h, join
from ksearch.server.web.parts import (
    attempt_status,
    notes_label,
    num,
    scrolling,
    speed,
    stats,
    status_badge,
    table,
    text_block,
)
from ksearch.server.web.snapshot import SearchView
from ksearch.tools.llm_calls import cache_text
from ksearch.tools.loop.protocols import protocol_line
from ksearch.worldmodel.models import Attempt, Edit, Node
from ksearch.worldmodel.render import no_best

# --------------------------------------------------------------------------- summary


def summary(view: SearchView) -> Markup:
    s = view.search
    best = view.best_attempt
    counts: dict[str, int] = {}
    for n in view.nodes:
        if n.kind == "intent":
            counts[n.status.value] = counts.get(n.status.value, 0) + 1
    ok = sum(1 for a in view.attempts if a.evaluation is not None and a.evaluation.ranks)
    device = next(
        (
            a.evaluation.timings[0].device
            for a in reversed(view.attempts)
            if a.evaluation is not None and a.evaluation.timings
        ),
        None,
    )
    items = [
        ("task", s.task),
        ("status", status_badge(view.status)),
        (
            "round",
            f"{s.round} of {s.config.budgets.rounds}"
            if s.config.budgets.rounds is not None
            else str(s.round),
        ),
        ("policy", s.config.policy + (f" ({s.config.model})" if s.config.model else "")),
        ("timed", protocol_line(s.config.timing_protocol)),
        ("attempts", f"{len(view.attempts)} ({ok} correct & timed on a GPU)"),
        ("intents", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none yet"),
        (
            "best",
            join(
                [
                    h("span", {"class": "best-num", "id": "best-speedup"}, speed(None)),
                    h("span", {"class": "muted"}, f" {no_best(view.cpu_correct)}"),
                ]
            )
            if best is None
            else join(
                [
                    h("span", {"class": "best-num", "id": "best-speedup"}, speed(best.speedup)),
                    h(
                        "span",
                        {"class": "muted"},
                        f" vs eager · {speed(best.evaluation.speedup_vs_compile if best.evaluation else None)}"
                        f" vs {best.evaluation.compile_label if best.evaluation else 'torch.compile'}"
                        f" · attempt #{best.id}"
                        + (
                            f" · timed: {best.evaluation.timing_protocol}"
                            if best.evaluation and best.evaluation.timing_protocol
                            else ""
                        )
                        + (f" on #{best.node_id}" if best.node_id is not None else ""),
                    ),
                ]
            ),
        ),
        ("device", device or "–"),
        ("bank", bank_used(view)),
        (
            "spend",
            f"{view.llm.tokens_in + view.llm.tokens_out:,} tokens · ${view.llm.usd:.2f} · {view.llm.calls} LLM calls",
        ),
    ]
    cache = cache_text(view.llm)
    if cache:  # what the model's prompt cache served of its input, and what that cost
        items.append(("prompt cache", cache))
    return stats(items)


def bank_used(view: SearchView) -> Markup | str:
    """The kernel-bank entries the search's prompts showed: each once, with its best similarity and why."""
    seen: dict[str, tuple[float, str, str, set[str]]] = {}
    for u in view.bank_uses:
        score, title, why, phases = seen.get(u.uid, (0.0, u.title, u.why, set()))
        phases.add(u.phase)
        seen[u.uid] = (max(score, u.similarity), title, why if u.similarity >= score else u.why, phases)
    if not seen:
        return "no entry from earlier searches was shown to this search"
    items = [
        h(
            "li",
            {"title": why},
            f"{uid} {title[:80]} (similarity {score:.2f}; {', '.join(sorted(phases))})",
        )
        for uid, (score, title, why, phases) in seen.items()
    ]
    return join(
        [
            f"{len(seen)} entries from earlier searches shown to its prompts:",
            h("ul", {"class": "bank"}, join(items)),
        ]
    )


def chart(view: SearchView) -> Markup:
    titles = {n.id: n.title for n in view.nodes if n.kind == "intent"}
    return score_chart(view.attempts, view.search.best_attempt_id, view.declines, titles)


# --------------------------------------------------------------------------- the tree


def _node_card(view: SearchView, n: Node, link: bool, selected: int | None) -> Markup:
    st = view.stats[n.id]
    classes = ["node", f"st-{n.status.value}"]
    if n.id == selected:
        classes.append("selected")
    if n.id in view.best_path:
        classes.append("on-best-path")
    if view.best_attempt is not None and view.best_attempt.node_id == n.id:
        classes.append("holds-best")
    if n.pinned:
        classes.append("pinned")
    if n.vetoed:
        classes.append("vetoed")
    meta: list[object] = []
    if n.kind == "root":
        meta.append(h("span", {"class": "badge st-root"}, "root"))
    else:
        meta += [
            status_badge(n.status.value),
            h(
                "meter",
                {"min": 0, "max": 1, "value": f"{n.priority:.2f}", "title": f"priority {n.priority:.2f}"},
            ),
            h("span", {"class": "prio"}, f"p{n.priority:.2f}"),
            h("span", {"class": "diff", "title": "difficulty 1-5"}, f"d{n.difficulty}"),
        ]
    meta.append(
        h("span", {"class": "spd", "title": "best speedup vs eager on this node"}, speed(st.best_speedup))
    )
    if st.attempts:
        meta.append(
            h("span", {"class": "att", "title": f"{st.ok} correct, {st.failed} failed"}, f"{st.attempts} att")
        )
    if n.pinned:
        meta.append(h("span", {"class": "badge flag-pin"}, "pinned"))
    if n.vetoed:
        meta.append(h("span", {"class": "badge flag-veto"}, "vetoed"))
    if n.author.startswith("human"):
        meta.append(h("span", {"class": "badge by-human"}, "human"))
    title = n.title if n.kind == "intent" else f"root · {view.search.task}"
    return h(
        "div",
        {
            "class": " ".join(classes),
            "data-node": n.id,
            "tabindex": 0,
            "role": "treeitem",
            "aria-selected": "true" if n.id == selected else "false",
        },
        h(
            "div",
            {"class": "node-line"},
            h("span", {"class": "nid"}, f"#{n.id}"),
            h("a", {"class": "ntitle", "title": n.title, "href": f"#node-{n.id}"}, title)
            if link
            else h("span", {"class": "ntitle", "title": n.title}, title),
        ),
        h("div", {"class": "node-meta"}, meta),
    )


def _subtree(view: SearchView, n: Node, link: bool, selected: int | None) -> Markup:
    kids = view.children.get(n.id, [])
    sub = h("ul", {"role": "group"}, [_subtree(view, c, link, selected) for c in kids]) if kids else None
    return h("li", {"class": "tn"}, _node_card(view, n, link, selected), sub)


def tree(view: SearchView, link: bool = False, selected: int | None = None) -> Markup:
    """The tree as nested lists, children in creation order. `link`: titles link to `#node-<id>`;
    `selected`: the node shown as selected."""
    return h("ul", {"class": "tree", "role": "tree"}, _subtree(view, view.root, link, selected))


# --------------------------------------------------------------------------- a node


def _attempt_rows(attempts: list[Attempt], best_id: int | None, selected: int | None) -> Markup:
    workloads: list[str] = []
    for a in attempts:
        for t in a.evaluation.timings if a.evaluation else []:
            if t.workload not in workloads:
                workloads.append(t.workload)
    workloads = workloads[:6]
    head = [
        "attempt",
        "round",
        "author",
        "status",
        "vs eager",
        "vs compile",
        *[f"{w} (us)" for w in workloads],
    ]
    body = []
    for a in reversed(attempts):
        ev = a.evaluation
        med = {t.workload: t.median_us for t in ev.timings} if ev else {}
        cells = [
            h(
                "td",
                None,
                f"#{a.id}",
                h("span", {"class": "badge best-tag"}, "best") if a.id == best_id else None,
            ),
            h("td", None, str(a.round)),
            h("td", None, a.author),
            h("td", None, status_badge(attempt_status(a))),
            h("td", {"class": "num"}, speed(a.speedup)),
            h("td", {"class": "num"}, speed(ev.speedup_vs_compile if ev and ev.status == "ok" else None)),
            *[h("td", {"class": "num"}, num(med.get(w))) for w in workloads],
        ]
        cls = "attempt-row selected" if a.id == selected else "attempt-row"
        body.append(h("tr", {"class": cls, "data-attempt": a.id, "tabindex": 0}, cells))
    return scrolling(
        h(
            "table",
            {"class": "grid-table attempts"},
            h("thead", None, h("tr", None, [h("th", None, c) for c in head])),
            h("tbody", None, body),
        )
    )


def node_detail(view: SearchView, n: Node, edits: list[Edit], selected: int | None = None) -> Markup:
    """One node: its numbers, texts, attempts (`selected` marked) and edit history."""
    attempts = [a for a in view.attempts if a.node_id == n.id]
    st = view.stats[n.id]
    info: list[tuple[str, object]] = [("status", status_badge(n.status.value))]
    if n.kind == "intent":
        info += [
            ("priority", f"{n.priority:.2f}"),
            ("difficulty", f"{n.difficulty} / 5"),
            ("expected", speed(n.expected_speedup)),
        ]
    info += [
        (
            "best here",
            speed(st.best_speedup) + (f" (attempt #{n.best_attempt_id})" if n.best_attempt_id else ""),
        ),
        ("author", n.author),
        ("rounds", f"created {n.round_created}, updated {n.round_updated}"),
        ("visits", str(n.visits)),
    ]
    if n.base_attempt_id:
        info.append(("starts from", f"attempt #{n.base_attempt_id}"))
    if n.pinned or n.vetoed:
        info.append(
            ("human flags", ", ".join(f for f, on in (("pinned", n.pinned), ("vetoed", n.vetoed)) if on))
        )
    node_edits = [e for e in edits if e.node_id == n.id]
    parts: list[object] = [
        h(
            "h3",
            {"class": "node-title"},
            h("span", {"class": "nid"}, f"#{n.id}"),
            " ",
            n.title if n.kind == "intent" else f"root · {view.search.task}",
        ),
        stats(info),
        text_block("Kernel analysis" if n.kind == "root" else "Rationale", n.rationale),
        text_block(notes_label(n, edits), n.notes),
        text_block("Params", json.dumps(n.params, indent=1, sort_keys=True), "mono") if n.params else None,
        h(
            "section",
            {"class": "block"},
            h("h4", None, f"Attempts ({len(attempts)})"),
            _attempt_rows(attempts, n.best_attempt_id, selected)
            if attempts
            else h("p", {"class": "muted"}, "No attempts yet."),
        ),
    ]
    if n.kind == "root":
        loose = view.unattached_attempts()
        if loose:
            parts.append(
                h(
                    "section",
                    {"class": "block"},
                    h("h4", None, f"Attempts on no node ({len(loose)})"),
                    _attempt_rows(loose, view.search.best_attempt_id, selected),
                )
            )
    if node_edits:
        parts.append(
            h(
                "details",
                {"class": "block edits"},
                h("summary", None, f"History ({len(node_edits)} edit{'' if len(node_edits) == 1 else 's'})"),
                table(
                    ["round", "op", "author", "reason", "change"],
                    [
                        [str(e.round), e.op, e.author, e.reason, json.dumps(e.payload, sort_keys=True)[:300]]
                        for e in node_edits
                    ],
                ),
            )
        )
    return h("div", {"class": "node-detail", "data-node": n.id}, parts)


def default_attempt(view: SearchView, n: Node) -> int | None:
    """Which attempt a node's page opens on: its best, else its latest."""
    if n.best_attempt_id is not None:
        return n.best_attempt_id
    mine = [a.id for a in view.attempts if a.node_id == n.id]
    if not mine and n.kind == "root":
        mine = [a.id for a in view.unattached_attempts()]
    return mine[-1] if mine else None


def first_selection(view: SearchView) -> tuple[Node, int | None]:
    """What a search's page opens on: the search's best attempt on its node; without one (or when it is
    on no node) the root and its default attempt."""
    best = view.best_attempt
    if best is not None:
        node = view.by_id.get(best.node_id) if best.node_id is not None else view.root
        return node or view.root, best.id
    return view.root, default_attempt(view, view.root)
