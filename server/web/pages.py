"""Whole pages: a search's live page (its first view rendered here), the list of searches, a 404."""

from __future__ import annotations

from dataclasses import dataclass

from ksearch.server.web.html import Markup, h, join
from ksearch.server.web.parts import speed, status_badge, table
from ksearch.server.web.search_html import chart, summary, tree
from ksearch.server.web.snapshot import SearchView
from ksearch.tools.submit_kernel import MAX_SOURCE_BYTES
from ksearch.tools.suites.suite import SuiteReport

STYLE_PATH = "/static/style.css"
SCRIPT_PATH = "/static/app.js"
SEARCHES_PATH = "/searches"  # the list of searches, whatever search the UI opens on


@dataclass
class FirstView:
    """The node (and its attempt) a search's page opens on, already rendered."""

    node_id: int
    node_html: Markup
    attempt_id: int | None = None
    attempt_html: Markup | None = None


def submit_form() -> Markup:
    """A person's kernel for the selected node: pasted or a file's text, its language, and the evaluation's
    progress (the script shows the form on the root and on open or active intents)."""
    return h(
        "form",
        {"id": "submit-kernel", "class": "add-intent submit-only", "data-max-bytes": MAX_SOURCE_BYTES},
        h(
            "div",
            {"class": "steer-row"},
            h(
                "label",
                {"class": "grow"},
                "your kernel for this node ",
                h(
                    "textarea",
                    {
                        "id": "kernel-src",
                        "rows": 5,
                        "spellcheck": "false",
                        "placeholder": "paste a Python module defining the task's entry point (e.g. class ModelNew), "
                        "or choose a file",
                    },
                ),
            ),
        ),
        h(
            "div",
            {"class": "steer-row"},
            h(
                "label",
                None,
                "file ",
                h(
                    "input",
                    {
                        "id": "kernel-file",
                        "type": "file",
                        "accept": ".py,.json,text/x-python,application/json",
                    },
                ),
            ),
            h(
                "label",
                None,
                "language ",
                h(
                    "select",
                    {"id": "kernel-lang"},
                    h("option", {"value": "auto", "selected": True}, "auto (detected from the source)"),
                    [h("option", {"value": lang}, lang) for lang in ("triton", "cuda", "cpp_ext")],
                ),
            ),
            h("button", {"id": "submit-kernel-btn", "type": "submit"}, "Submit kernel"),
        ),
        h(
            "div",
            {"id": "submit-progress", "class": "steer-row submit-progress", "hidden": True, "role": "status"},
            h("progress", {"id": "submit-bar", "max": 1, "value": 0}),
            h("span", {"id": "submit-step"}, ""),
        ),
    )


def live_page(view: SearchView, first: FirstView, doing: str = "") -> Markup:
    """A search's page with its first view rendered: summary, chart, tree, a node and its attempt are in
    the HTML itself (a reader, a screenshot or a page without script sees them at once); the script
    then keeps it current from the JSON endpoints. `data-version` lets it skip a first fetch of the same.
    `doing`: what its loop is doing now (ksearch.tools.now_doing), shown in the banner."""
    name = view.search.name
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
            h(
                "div",
                {"class": "steer-row"},
                h(
                    "label",
                    {"class": "grow"},
                    "params ",
                    h(
                        "input",
                        {
                            "id": "intent-params",
                            "type": "text",
                            "maxlength": 2000,
                            "placeholder": "optional settings, e.g. BLOCK_N=512, num_warps=4 (what the tuner sets)",
                        },
                    ),
                ),
            ),
        ),
        submit_form(),
        h(
            "form",
            {"id": "budgets", "class": "add-intent"},
            h(
                "div",
                {"class": "steer-row"},
                h(
                    "label",
                    None,
                    "more rounds ",
                    h("input", {"id": "more-rounds", "type": "number", "min": 1, "max": 1000, "value": "3"}),
                ),
                h(
                    "button",
                    {"id": "raise-budget", "type": "submit"},
                    "Raise the round budget",
                ),
            ),
        ),
        h("div", {"id": "steer-msg", "class": "msg", "role": "status"}),
    )
    body = h(
        "body",
        {
            "data-search": view.search.id,
            "data-version": view.version,
            "data-root": view.root.id,
            "data-node": first.node_id,
            "data-attempt": first.attempt_id,
        },
        h(
            "header",
            {"class": "topbar"},
            h("a", {"href": SEARCHES_PATH, "class": "home", "title": "all searches"}, "ksearch"),
            h("h1", None, name),
            h(
                "span",
                {"id": "doing", "class": "doing", "title": "what the search's loop is doing now"},
                doing,
            ),
            h("span", {"id": "live", "class": "live"}, "connecting…"),
        ),
        h("section", {"id": "summary", "class": "panel"}, summary(view)),
        h("section", {"id": "chart", "class": "panel chart-panel"}, chart(view)),
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
                h("div", {"id": "tree"}, tree(view, selected=first.node_id)),
            ),
            h(
                "section",
                {"class": "panel detail-panel"},
                h("div", {"id": "node"}, first.node_html),
                steer,
                h("div", {"id": "attempt"}, first.attempt_html),
            ),
        ),
        h("script", {"src": SCRIPT_PATH}),
    )
    return document(f"{name} · ksearch", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


def topbar(title: str) -> Markup:
    """The list pages' header: the link home and the page's title."""
    return h(
        "header",
        {"class": "topbar"},
        h("a", {"href": SEARCHES_PATH, "class": "home"}, "ksearch"),
        h("h1", None, title),
    )


def searches_page(
    rows: list[tuple[int, str, str, str, int, int, float | None]], suites: list[tuple[str, str]] | None = None
) -> Markup:
    """The index: one row per search (id, name, task, status, round, attempts, best speedup), and the suites
    (name, how far it got) linked to their pages."""
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
        topbar("Searches"),
        h(
            "section",
            {"class": "panel"},
            listing if rows else h("p", None, "No searches in this database yet."),
        ),
        *(
            [
                h(
                    "section",
                    {"class": "panel", "id": "suites"},
                    h("h2", None, "Suites"),
                    h(
                        "ul",
                        None,
                        join(
                            [
                                h("li", None, h("a", {"href": f"/suites/{n}"}, n), f" {what}")
                                for n, what in suites
                            ]
                        ),
                    ),
                )
            ]
            if suites
            else []
        ),
    )
    return document("ksearch", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


def suite_page(r: SuiteReport, ids: dict[str, int]) -> Markup:
    """A suite: one row per task (its search linked, its status, the best's correctness and speedups), then the
    suite's fast_p (KernelBench's definition) vs eager and vs torch.compile. `ids`: search name -> id."""
    rows = []
    for row in r.rows:
        search: Markup | str = (
            h("a", {"href": f"/s/{ids[row.search]}"}, row.search) if row.search and row.search in ids else "–"
        )
        said = (
            row.error[:160]
            if row.status in ("failed", "refused")
            else ("correct" if row.correct else "no correct attempt yet")
        )
        rows.append(
            [
                str(row.idx),
                row.task.rsplit("/", 1)[-1],
                search,
                row.status,
                said,
                speed(row.speedup_vs_eager),
                speed(row.speedup_vs_compile),
                row.protocol or "–",
                row.device or "–",
            ]
        )
    listing = table(
        ["#", "task", "search", "status", "result", "vs eager", "vs torch.compile", "protocol", "device"],
        rows,
        "suite",
    )
    head = (
        f"{r.tasks} tasks: {r.done} done, {r.running} running, {r.pending} pending, {r.failed} failed, "
        f"{r.refused} refused; {r.correct} correct, {r.timed} timed on a GPU"
    )
    fast = [
        h("p", None, f"fast_p vs {vs}: " + ", ".join(f"{k} {v:.2f}" for k, v in got.items()))
        for vs, got in (("eager", r.fast_p_eager), ("torch.compile", r.fast_p_compile))
        if got is not None
    ]
    body = h(
        "body",
        None,
        topbar(f"Suite {r.suite}"),
        h(
            "section",
            {"class": "panel"},
            h("p", None, head),
            listing,
            *fast,
            h("p", {"class": "muted"}, r.note),
        ),
    )
    return document(f"suite {r.suite}", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


def not_found_page(message: str) -> Markup:
    body = h(
        "body",
        None,
        h("p", None, message),
        h("p", None, h("a", {"href": SEARCHES_PATH}, "all searches")),
    )
    return document("not found", Markup(f'<link rel="stylesheet" href="{STYLE_PATH}">'), body)


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
