"""HTML fragments of a search: summary, tree, node details, attempt details, spend.

Used by the live page (swapped in by a small script) and by the exported report (inlined), so both
show the same thing. Every value from the database is escaped through `server.web.html`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable

from server.web.chart import score_chart
from server.web.html import Markup, h, join
from server.web.snapshot import SearchView
from worldmodel.models import Attempt, Candidate, Edit, Evaluation, Node
from worldmodel.render import fmt_speedup, no_best

MAX_DIFF_LINES = 4000


# --------------------------------------------------------------------------- small formatters


def speed(x: float | None) -> str:
    return fmt_speedup(x) if x is not None else "–"


def num(x: float | None, digits: int = 1) -> str:
    return f"{x:.{digits}f}" if x is not None else "–"


def sci(x: float | None) -> str:
    return f"{x:.3g}" if x is not None else "–"


def status_badge(status: str) -> Markup:
    return h("span", {"class": f"badge st-{status}"}, status)


def table(head: Iterable[str], rows: Iterable[Iterable[object]], cls: str = "") -> Markup:
    return h(
        "table",
        {"class": f"grid-table {cls}".strip()},
        h("thead", None, h("tr", None, [h("th", None, c) for c in head])),
        h("tbody", None, [h("tr", None, [h("td", None, c) for c in r]) for r in rows]),
    )


def stats(pairs: Iterable[tuple[str, object]]) -> Markup:
    """Labelled values in a wrapping row: compact on a wide screen, still readable on a narrow one."""
    return h(
        "div",
        {"class": "summary-grid"},
        [
            h("div", {"class": "stat"}, h("div", {"class": "stat-k"}, k), h("div", {"class": "stat-v"}, v))
            for k, v in pairs
        ],
    )


def text_block(title: str, text: str, cls: str = "prose") -> Markup | None:
    if not text.strip():
        return None
    return h("section", {"class": "block"}, h("h4", None, title), h("div", {"class": cls}, text))


def attempt_status(a: Attempt) -> str:
    if a.evaluation is None:
        return "pending"
    if a.evaluation.status == "ok" and a.evaluation.pure_pytorch:
        return "pure_pytorch"  # correct, but no kernel of its own ran: never a best (its numbers are kept)
    return a.evaluation.status


# --------------------------------------------------------------------------- summary and spend


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
        ("round", str(s.round)),
        ("policy", s.config.policy + (f" ({s.config.model})" if s.config.model else "")),
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
                        f" vs torch.compile · attempt #{best.id}"
                        + (f" on #{best.node_id}" if best.node_id is not None else ""),
                    ),
                ]
            ),
        ),
        ("device", device or "–"),
        (
            "spend",
            f"{view.llm.tokens_in + view.llm.tokens_out:,} tokens · ${view.llm.usd:.2f} · {view.llm.calls} LLM calls",
        ),
    ]
    return stats(items)


def chart(view: SearchView) -> Markup:
    return score_chart(view.attempts, view.search.best_attempt_id)


# --------------------------------------------------------------------------- the tree


def _node_card(view: SearchView, n: Node, link: bool) -> Markup:
    st = view.stats[n.id]
    classes = ["node", f"st-{n.status.value}"]
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
            "aria-selected": "false",
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


def _subtree(view: SearchView, n: Node, link: bool) -> Markup:
    kids = view.children.get(n.id, [])
    sub = h("ul", {"role": "group"}, [_subtree(view, c, link) for c in kids]) if kids else None
    return h("li", {"class": "tn"}, _node_card(view, n, link), sub)


def tree(view: SearchView, link: bool = False) -> Markup:
    """The tree as nested lists, children in creation order. `link`: titles link to `#node-<id>`."""
    return h("ul", {"class": "tree", "role": "tree"}, _subtree(view, view.root, link))


# --------------------------------------------------------------------------- a node


def _attempt_rows(attempts: list[Attempt], best_id: int | None) -> Markup:
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
        body.append(h("tr", {"class": "attempt-row", "data-attempt": a.id, "tabindex": 0}, cells))
    return h(
        "table",
        {"class": "grid-table attempts"},
        h("thead", None, h("tr", None, [h("th", None, c) for c in head])),
        h("tbody", None, body),
    )


def node_detail(view: SearchView, n: Node, edits: list[Edit]) -> Markup:
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
        text_block("Model's notes", n.notes),
        text_block("Params", json.dumps(n.params, indent=1, sort_keys=True), "mono") if n.params else None,
        h(
            "section",
            {"class": "block"},
            h("h4", None, f"Attempts ({len(attempts)})"),
            _attempt_rows(attempts, n.best_attempt_id)
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
                    _attempt_rows(loose, view.search.best_attempt_id),
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


# --------------------------------------------------------------------------- an attempt


def _code(source: str, marks: set[int] | None = None) -> Markup:
    marks = marks or set()
    lines = source.split("\n")
    return h(
        "pre",
        {"class": "code"},
        h(
            "code",
            None,
            [
                (h("span", {"class": "ln diag" if i in marks else "ln", "data-ln": i}, line), "\n")
                for i, line in enumerate(lines, start=1)
            ],
        ),
    )


def diff_lines(base: str, new: str, base_label: str, new_label: str) -> list[str]:
    out = list(
        difflib.unified_diff(
            base.splitlines(), new.splitlines(), fromfile=base_label, tofile=new_label, lineterm="", n=3
        )
    )
    return out


def _diff(lines: list[str]) -> Markup:
    if not lines:
        return h("p", {"class": "muted"}, "Identical source.")
    shown = lines[:MAX_DIFF_LINES]

    def cls(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "dl meta"
        if line.startswith("@@"):
            return "dl hunk"
        if line.startswith("+"):
            return "dl add"
        if line.startswith("-"):
            return "dl del"
        return "dl"

    body: list[object] = [(h("span", {"class": cls(line)}, line), "\n") for line in shown]
    if len(lines) > len(shown):
        body.append(h("span", {"class": "dl meta"}, f"… {len(lines) - len(shown)} more diff lines"))
    return h("pre", {"class": "code diff"}, h("code", None, body))


def _timings(ev: Evaluation) -> Markup | None:
    if not ev.timings:
        return None
    rows = []
    for t in ev.timings:
        rows.append(
            [
                t.workload,
                t.device,
                num(t.median_us, 2),
                num(t.iqr_us, 2),
                f"{t.ci_low_us:.2f}–{t.ci_high_us:.2f}",
                str(t.n),
                num(t.eager_median_us, 2),
                speed(t.speedup_vs_eager),
                num(t.compile_median_us, 2),
                speed(t.speedup_vs_compile),
                f"{100 * t.roofline_fraction:.0f}%" if t.roofline_fraction is not None else "–",
                "; ".join(t.flags),
            ]
        )
    note = None
    if ev.timings[0].device == "cpu-interpreter":
        note = h(
            "p",
            {"class": "muted"},
            "CPU interpreter timings: functional only, not comparable with GPU timings.",
        )
    return h(
        "section",
        {"class": "block"},
        h("h4", None, "Timings per workload (device time per call)"),
        table(
            [
                "workload",
                "device",
                "median us",
                "IQR",
                "95% CI",
                "n",
                "eager us",
                "vs eager",
                "compile us",
                "vs compile",
                "roofline",
                "flags",
            ],
            rows,
            "timings",
        ),
        note,
    )


def _correctness(ev: Evaluation) -> Markup | None:
    if not ev.correctness:
        return None
    rows = []
    for c in ev.correctness:
        where = ""
        if c.first_mismatch_index is not None:
            where = f"{c.first_mismatch_index}: expected {c.expected_at_first}, got {c.got_at_first}"
        rows.append(
            [
                h(
                    "span",
                    {"class": "badge " + ("st-ok" if c.passed else "st-incorrect")},
                    "pass" if c.passed else "FAIL",
                ),
                c.workload,
                c.kind,
                str(c.trials),
                sci(c.max_abs_err),
                sci(c.max_rel_err),
                f"{c.mismatches}/{c.numel}" if c.mismatches is not None else "–",
                where,
                c.message,
            ]
        )
    return h(
        "section",
        {"class": "block"},
        h("h4", None, "Correctness"),
        table(
            [
                "",
                "workload",
                "kind",
                "trials",
                "max abs err",
                "max rel err",
                "mismatches",
                "first mismatch",
                "message",
            ],
            rows,
            "correctness",
        ),
    )


def _compile(ev: Evaluation) -> Markup | None:
    c = ev.compile
    if c is None:
        return None
    parts: list[object] = [
        h(
            "p",
            None,
            status_badge("ok" if c.ok else "compile_error"),
            f" {c.mode or c.language} · {c.seconds:.2f}s" + (" · cached" if c.cached else ""),
        )
    ]
    if c.diagnostics:
        parts.append(
            table(
                ["severity", "line", "message"],
                [[d.severity, str(d.line) if d.line else "–", d.message] for d in c.diagnostics[:200]],
                "diagnostics",
            )
        )
    if c.kernels:
        parts.append(
            table(
                ["kernel", "regs", "spill st/ld B", "smem B", "stack B", "warps", "stages"],
                [
                    [
                        k.name,
                        str(k.registers),
                        f"{k.spill_stores_bytes}/{k.spill_loads_bytes}",
                        str(k.shared_bytes),
                        str(k.stack_bytes),
                        str(k.num_warps),
                        str(k.num_stages),
                    ]
                    for k in c.kernels
                ],
                "kernels",
            )
        )
    if c.log.strip():
        parts.append(
            h(
                "details",
                {"open": not c.ok},
                h("summary", None, "Compiler log"),
                h("pre", {"class": "code log"}, c.log),
            )
        )
    return h("section", {"class": "block"}, h("h4", None, "Compile"), parts)


def attempt_detail(a: Attempt, cand: Candidate, base: tuple[str, Attempt, Candidate] | None) -> Markup:
    """Everything about one attempt. `base` is (why it is the base, base attempt, its candidate)."""
    ev = a.evaluation
    head = h(
        "h3",
        None,
        f"Attempt #{a.id} ",
        status_badge(attempt_status(a)),
        h(
            "span",
            {"class": "muted"},
            f" · round {a.round} · {a.author} · {cand.language} · {cand.id}"
            + (f" · node #{a.node_id}" if a.node_id is not None else " · on no node"),
        ),
    )
    parts: list[object] = [head]
    if ev is not None:
        nums = [
            ("vs eager", speed(ev.speedup_vs_eager if ev.status == "ok" else None)),
            ("vs torch.compile", speed(ev.speedup_vs_compile if ev.status == "ok" else None)),
            ("roofline", f"{100 * ev.roofline_fraction:.0f}%" if ev.roofline_fraction is not None else "–"),
            ("evaluated in", f"{ev.seconds:.1f}s"),
        ]
        if ev.env is not None:
            nums.append(("environment", f"{ev.env.device} · torch {ev.env.torch} · triton {ev.env.triton}"))
        parts.append(stats(nums))
        if ev.error:
            parts.append(
                h(
                    "div",
                    {"class": "block error-box"},
                    h("h4", None, "Error"),
                    h("div", {"class": "prose"}, ev.error),
                )
            )
        if ev.flags:
            parts.append(
                h(
                    "div",
                    {"class": "block error-box"},
                    h("h4", None, "Flags"),
                    h("ul", None, [h("li", None, f) for f in ev.flags]),
                )
            )
        parts += [_timings(ev), _correctness(ev), _compile(ev)]
        if ev.profile is not None:
            p = ev.profile
            parts.append(
                h(
                    "section",
                    {"class": "block"},
                    h("h4", None, f"Profile ({p.kernel} on {p.workload})"),
                    stats(
                        [
                            ("duration", f"{num(p.duration_us, 2)} us"),
                            (
                                "DRAM / SM throughput",
                                f"{num(p.dram_throughput_pct)}% / {num(p.sm_throughput_pct)}%",
                            ),
                            ("occupancy", f"{num(p.achieved_occupancy_pct)}%"),
                            ("stalls", ", ".join(f"{k} {v:.1f}" for k, v in p.top_stalls[:5]) or "–"),
                        ]
                    ),
                    h("ul", None, [h("li", None, x) for x in p.advice[:8]]) if p.advice else None,
                )
            )
    else:
        parts.append(h("p", {"class": "muted"}, "Not evaluated yet."))
    diag_lines = {d.line for d in (ev.compile.diagnostics if ev and ev.compile else []) if d.line}
    if base is not None:
        why, ba, bc = base
        lines = diff_lines(bc.source, cand.source, f"attempt #{ba.id}", f"attempt #{a.id}")
        parts.append(
            h(
                "section",
                {"class": "block"},
                h("h4", None, f"Diff to base attempt #{ba.id} ({why})"),
                _diff(lines),
            )
        )
    else:
        parts.append(h("p", {"class": "muted block"}, "No base attempt recorded: nothing to diff against."))
    parts.append(
        h(
            "section",
            {"class": "block"},
            h("h4", None, f"Code ({cand.language})"),
            _code(cand.source, diag_lines),
        )
    )
    return h("div", {"class": "attempt-detail", "data-attempt": a.id}, parts)


# --------------------------------------------------------------------------- pages


STYLE_PATH = "/static/style.css"
SCRIPT_PATH = "/static/app.js"


def live_page(search_id: int, name: str) -> Markup:
    """The page shell; the script fills it from the JSON endpoints and keeps it current."""
    steer = h(
        "section",
        {"id": "steer", "class": "panel steer", "hidden": True},
        h("h4", None, "Steer ", h("span", {"id": "steer-target"}, "")),
        h(
            "div",
            {"class": "steer-row intent-only"},
            h(
                "label",
                None,
                "priority ",
                h("input", {"id": "prio", "type": "number", "min": 0, "max": 1, "step": 0.05}),
            ),
            h("button", {"id": "set-prio", "type": "button"}, "Set"),
            h("button", {"id": "pin", "type": "button"}, "Pin"),
            h("button", {"id": "veto", "type": "button"}, "Veto"),
            h("button", {"id": "prune", "type": "button", "class": "danger"}, "Prune"),
            h("button", {"id": "reopen", "type": "button"}, "Reopen"),
        ),
        h(
            "div",
            {"class": "steer-row"},
            h(
                "label",
                {"class": "grow"},
                "reason ",
                h(
                    "input",
                    {
                        "id": "reason",
                        "type": "text",
                        "maxlength": 2000,
                        "placeholder": "optional, kept in the edit log",
                    },
                ),
            ),
        ),
        h(
            "form",
            {"id": "add-intent", "class": "add-intent"},
            h(
                "div",
                {"class": "steer-row"},
                h(
                    "label",
                    {"class": "grow"},
                    "new intent under this node ",
                    h(
                        "input",
                        {
                            "id": "intent-title",
                            "name": "title",
                            "type": "text",
                            "minlength": 3,
                            "maxlength": 200,
                            "required": True,
                            "placeholder": "e.g. keep the row in registers",
                        },
                    ),
                ),
            ),
            h(
                "div",
                {"class": "steer-row"},
                h(
                    "label",
                    {"class": "grow"},
                    "why ",
                    h("textarea", {"id": "intent-why", "name": "why", "rows": 2, "maxlength": 4000}),
                ),
            ),
            h(
                "div",
                {"class": "steer-row"},
                h(
                    "label",
                    None,
                    "priority ",
                    h(
                        "input",
                        {
                            "id": "intent-prio",
                            "type": "number",
                            "min": 0,
                            "max": 1,
                            "step": 0.05,
                            "value": "0.7",
                        },
                    ),
                ),
                h(
                    "label",
                    None,
                    "difficulty ",
                    h(
                        "select",
                        {"id": "intent-diff"},
                        [h("option", {"value": d, "selected": d == 3}, str(d)) for d in range(1, 6)],
                    ),
                ),
                h("button", {"id": "add-intent-btn", "type": "submit"}, "Add intent"),
            ),
        ),
        h("div", {"id": "steer-msg", "class": "msg", "role": "status"}),
    )
    body = h(
        "body",
        {"data-search": search_id},
        h(
            "header",
            {"class": "topbar"},
            h("a", {"href": "/", "class": "home"}, "ksearch"),
            h("h1", None, name),
            h("span", {"id": "live", "class": "live"}, "connecting…"),
        ),
        h("section", {"id": "summary", "class": "panel"}),
        h("section", {"id": "chart", "class": "panel chart-panel"}),
        h(
            "main",
            {"class": "cols"},
            h(
                "section",
                {"class": "panel tree-panel"},
                h(
                    "h2",
                    None,
                    "World model ",
                    h("span", {"class": "muted small"}, "click a node · best path highlighted"),
                ),
                h("div", {"id": "tree"}),
            ),
            h(
                "section",
                {"class": "panel detail-panel"},
                h("div", {"id": "node"}, h("p", {"class": "muted"}, "Select a node in the tree.")),
                steer,
                h("div", {"id": "attempt"}),
            ),
        ),
        h("script", {"src": SCRIPT_PATH}),
    )
    return document(f"{name} · ksearch", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


def searches_page(rows: list[tuple[int, str, str, str, int, int, float | None]]) -> Markup:
    """The index: one row per search (id, name, task, status, round, attempts, best speedup)."""
    listing = table(
        ["id", "search", "task", "status", "round", "attempts", "best vs eager"],
        [
            [str(i), h("a", {"href": f"/s/{i}"}, name), task, status_badge(st), str(r), str(n), speed(b)]
            for i, name, task, st, r, n, b in rows
        ],
        "searches",
    )
    body = h(
        "body",
        None,
        h("header", {"class": "topbar"}, h("span", {"class": "home"}, "ksearch"), h("h1", None, "Searches")),
        h(
            "section",
            {"class": "panel"},
            listing if rows else h("p", None, "No searches in this database yet."),
        ),
    )
    return document("ksearch", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


def document(title: str, head_extra: Markup, body: Markup) -> Markup:
    return Markup(
        "<!doctype html>\n"
        + h(
            "html",
            {"lang": "en"},
            h(
                "head",
                None,
                Markup('<meta charset="utf-8">'),
                Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                h("title", None, title),
                Markup('<link rel="icon" href="data:,">'),
                head_extra,
            ),
            body,
        )
    )
