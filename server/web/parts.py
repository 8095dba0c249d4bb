"""The small pieces every fragment of the page is made of: numbers, badges, tables, labelled values.

Every value from the database is escaped through `ksearch.server.web.html`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ksearch.server.web.html import Markup, h
from ksearch.worldmodel.models import Attempt, Edit, Node
from ksearch.worldmodel.render import fmt_speedup


def speed(x: float | None) -> str:
    return fmt_speedup(x) if x is not None else "–"


def num(x: float | None, digits: int = 1) -> str:
    return f"{x:.{digits}f}" if x is not None else "–"


def sci(x: float | None) -> str:
    return f"{x:.3g}" if x is not None else "–"


def status_badge(status: str) -> Markup:
    return h("span", {"class": f"badge st-{status}"}, status)


def scrolling(table_html: Markup) -> Markup:
    """A table in a box that scrolls sideways when the table is wider than its panel (never cut off)."""
    return h("div", {"class": "table-scroll"}, table_html)


def table(head: Iterable[str], rows: Iterable[Iterable[object]], cls: str = "") -> Markup:
    return scrolling(
        h(
            "table",
            {"class": f"grid-table {cls}".strip()},
            h("thead", None, h("tr", None, [h("th", None, c) for c in head])),
            h("tbody", None, [h("tr", None, [h("td", None, c) for c in r]) for r in rows]),
        )
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


def notes_label(n: Node, edits: list[Edit]) -> str:
    """What to call a node's notes: by whoever wrote them last (a tuner search has no model to credit)."""
    author = n.author
    for e in edits:  # oldest first: the last edit that set the notes wins
        if e.node_id != n.id:
            continue
        if (e.op == "insert" and e.payload.get("notes")) or (
            e.op == "update" and "notes" in e.payload.get("changes", {})
        ):
            author = e.author
    if author.startswith("llm:replay:"):  # a recording played back: not this run's model
        return f"Notes (replayed from {author.removeprefix('llm:replay:')})"
    if author.startswith("llm:"):
        return f"Notes by {author.removeprefix('llm:')}"
    if author.startswith("llm"):
        return "Model's notes"
    if author == "tuner":
        return "Tuner's notes"
    if author.startswith("human"):
        return "Notes (by a person)"
    return "Notes"
