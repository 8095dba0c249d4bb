"""The score over rounds as an inline SVG: every attempt, the best so far, round bands, declined intents.

Drawn on the server from numbers only (labels escaped), so the page and the exported report show the
same chart with no script and no external resource. Colours come from CSS classes; a legend under the plot
names every kind of mark.
"""

from __future__ import annotations

import math
from itertools import groupby

from ksearch.server.web.html import Markup, h
from ksearch.tools.loop.declines import Decline
from ksearch.worldmodel.models import Attempt
from ksearch.worldmodel.render import fmt_speedup

WIDTH, HEIGHT = 1000, 232
LEFT, RIGHT, TOP, BOTTOM = 46, 14, 16, 54
CHAR_W = 6.0  # a generous width of one legend character (10 px system font), so labels never overlap


def _ticks(lo: float, hi: float) -> list[float]:
    """Round values between lo and hi for a log axis: 1-2-5 per decade, finer when the range is narrow."""
    for mults in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)):
        ticks = [
            m * 10.0**e
            for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
            for m in mults
            if lo <= m * 10.0**e <= hi
        ]
        if len(ticks) >= 3:
            break
    while len(ticks) > 8:  # keep every other one (1x stays: it is the eager line)
        keep = ticks.index(1.0) % 2 if 1.0 in ticks else 0
        ticks = ticks[keep::2]
    return ticks


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _label(a: Attempt) -> str:
    ev = a.evaluation
    where = f"node #{a.node_id}" if a.node_id is not None else "no node"
    if _ranks(a):
        what = f"{fmt_speedup(a.speedup)} vs eager" if a.speedup is not None else "correct"
    elif ev is not None and ev.status == "ok" and ev.cpu_interpreted:
        what = "correct (CPU interpreter: not timed)"
    else:
        what = ev.status if ev else "not evaluated"
    return f"attempt #{a.id} · round {a.round} · {where} · {a.author} · {what}"


def _ranks(a: Attempt) -> bool:
    return a.evaluation is not None and a.evaluation.ranks and a.speedup is not None


def _human(a: Attempt) -> bool:
    return a.author.startswith("human")


def _declined_label(d: Decline, titles: dict[int, str]) -> str:
    title = titles.get(d.node_id)
    what = f"intent #{d.node_id}" + (f" {title!r}" if title else "")
    when = (
        "before any attempt (its round was given back)" if d.attempts == 0 else f"after {d.attempts} attempts"
    )
    return f"round {d.round}: {what} declined by the {d.by} policy {when}: {d.why}"


def _legend(y: float) -> Markup:
    """One row naming every kind of mark, laid out from the labels' lengths."""
    cy = y - 4
    items: list[tuple[str, Markup]] = [
        ("GPU-timed", h("circle", {"class": "pt auto", "cx": 0, "cy": cy, "r": 3.6})),
        ("human", h("circle", {"class": "pt human", "cx": 0, "cy": cy, "r": 3.6})),
        (
            "CPU interpreter: correct, not timed",
            h("circle", {"class": "pt-cpu", "cx": 0, "cy": cy, "r": 3.2}),
        ),
        ("failed", h("path", {"class": "pt-fail", "d": f"M-3,{cy - 3}l6,6m-6,0l6,-6"})),
        (
            "inconclusive",
            h("path", {"class": "pt-fail pt-inconclusive", "d": f"M-3,{cy - 3}l6,6m-6,0l6,-6"}),
        ),
        ("intent declined", h("path", {"class": "declined", "d": f"M-4,{cy - 4}h8l-4,7z"})),
        ("best so far", h("line", {"class": "best-line", "x1": -7, "x2": 7, "y1": cy, "y2": cy})),
        ("search best", h("circle", {"class": "pt-best", "cx": 0, "cy": cy, "r": 5})),
        ("eager (1x)", h("line", {"class": "eager", "x1": -7, "x2": 7, "y1": cy, "y2": cy})),
    ]
    parts: list[Markup] = []
    x = float(LEFT + 8)
    for label, mark in items:
        parts.append(h("g", {"class": "key", "transform": f"translate({x:.1f},0)"}, mark))
        parts.append(h("text", {"class": "tick key-label", "x": f"{x + 10:.1f}", "y": y}, label))
        x += 10 + CHAR_W * len(label) + 18
    return h("g", {"class": "legend"}, parts)


def score_chart(
    attempts: list[Attempt],
    best_attempt_id: int | None,
    declines: list[Decline] | None = None,
    titles: dict[int, str] | None = None,
) -> Markup:
    """SVG of speedup vs eager per attempt (in order), the running best, the search's best ringed, and where
    a policy declined an intent (`declines`; `titles`: node id -> title, for their labels).

    The y axis is logarithmic and fitted to the data (0.05x and 0.4x are as far apart as 1x and 8x), with
    the eager line (1x) always in view. Only correct GPU-timed attempts are plotted as speedups: a correct
    attempt timed on the CPU interpreter is a hollow mark on the floor, a failed one a cross; a person's
    attempts are drawn in their own colour, whatever their kind."""
    atts = sorted(attempts, key=lambda a: a.id)
    declines = declines or []
    titles = titles or {}
    if not atts:
        k = len(declines)
        said = f" ({k} intent{'' if k == 1 else 's'} declined by a policy)" if k else ""
        return h(
            "svg",
            {
                "class": "chart",
                "viewBox": f"0 0 {WIDTH} 60",
                "role": "img",
                "aria-label": "score over rounds: no attempts yet",
            },
            h("text", {"x": 12, "y": 34, "class": "chart-empty"}, f"No attempts yet{said}."),
        )
    n = len(atts)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    speeds = [a.speedup for a in atts if _ranks(a) and a.speedup is not None and a.speedup > 0]
    lo, hi = min([1.0, *speeds]) / 1.3, max([1.0, *speeds]) * 1.3
    floor = TOP + ph - 5  # where marks without a speedup sit

    def x(i: int) -> float:
        return LEFT + (i + 0.5) * pw / n

    def y(v: float) -> float:
        frac = (math.log(max(v, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return TOP + (ph - 12) * (1 - frac)

    parts: list[Markup] = []
    # Round bands, alternating shade, labelled when wide enough.
    i0 = 0
    for k, (rnd, grp) in enumerate(groupby(atts, key=lambda a: a.round)):
        cnt = len(list(grp))
        bx, bw = LEFT + i0 * pw / n, cnt * pw / n
        parts.append(
            h(
                "rect",
                {
                    "class": f"band band{k % 2}",
                    "x": f"{bx:.1f}",
                    "y": TOP,
                    "width": f"{bw:.1f}",
                    "height": ph,
                },
            )
        )
        if bw >= 22 or n <= 40:
            parts.append(
                h(
                    "text",
                    {
                        "class": "tick",
                        "x": f"{bx + bw / 2:.1f}",
                        "y": HEIGHT - BOTTOM + 14,
                        "text-anchor": "middle",
                    },
                    f"r{rnd}",
                )
            )
        i0 += cnt
    # Horizontal grid with speedup labels (log scale); the eager line (1x) dashed.
    for v in _ticks(lo, hi):
        parts.append(
            h(
                "line",
                {"class": "grid", "x1": LEFT, "x2": WIDTH - RIGHT, "y1": f"{y(v):.1f}", "y2": f"{y(v):.1f}"},
            )
        )
        parts.append(
            h(
                "text",
                {"class": "tick", "x": LEFT - 6, "y": f"{y(v) + 4:.1f}", "text-anchor": "end"},
                f"{_fmt(v)}x",
            )
        )
    parts.append(
        h(
            "line",
            {"class": "eager", "x1": LEFT, "x2": WIDTH - RIGHT, "y1": f"{y(1.0):.1f}", "y2": f"{y(1.0):.1f}"},
        )
    )
    # Best so far: a step line through the running maximum of measured speedups.
    pts: list[str] = []
    best: float | None = None
    for i, a in enumerate(atts):
        if _ranks(a) and a.speedup is not None and (best is None or a.speedup > best):
            if best is not None:
                pts.append(f"{x(i):.1f},{y(best):.1f}")
            best = a.speedup
        if best is not None:
            pts.append(f"{x(i):.1f},{y(best):.1f}")
    if pts:
        if len(pts) == 1:
            pts.append(pts[0])
        last = pts[-1].split(",")[1]
        pts.append(f"{WIDTH - RIGHT:.1f},{last}")
        parts.append(h("polyline", {"class": "best-line", "points": " ".join(pts)}))
    # Where a policy declined an intent: between the attempts recorded before and after it, in its round.
    at: dict[int, int] = {}
    for dec in declines:
        i = sum(1 for a in atts if a.created_at <= dec.at)
        k = at.get(i, 0)
        at[i] = k + 1
        dx = min(max(LEFT + i * pw / n, LEFT + 5), WIDTH - RIGHT - 5)
        dy = TOP + 1 + 9 * k
        parts.append(
            h(
                "g",
                {"class": "declined-mark", "data-node": dec.node_id},
                h("title", None, _declined_label(dec, titles)),
                h(
                    "line",
                    {
                        "class": "declined-line",
                        "x1": f"{dx:.1f}",
                        "x2": f"{dx:.1f}",
                        "y1": TOP,
                        "y2": TOP + ph,
                    },
                ),
                h("path", {"class": "declined", "d": f"M{dx - 4:.1f},{dy:.1f}h8l-4,7z"}),
            )
        )
    # One mark per attempt: a dot when it ran correctly and was timed, a cross at the floor otherwise.
    for i, a in enumerate(atts):
        tip = h("title", None, _label(a))
        cls = "human" if _human(a) else "auto"
        mine = " human" if _human(a) else ""  # a person's failed or untimed attempt keeps their colour
        ev = a.evaluation
        if _ranks(a) and a.speedup is not None:
            parts.append(
                h(
                    "circle",
                    {
                        "class": f"pt {cls}",
                        "cx": f"{x(i):.1f}",
                        "cy": f"{y(a.speedup):.1f}",
                        "r": 3.6,
                        "data-attempt": a.id,
                    },
                    tip,
                )
            )
            if a.id == best_attempt_id:
                parts.append(
                    h(
                        "circle",
                        {"class": "pt-best", "cx": f"{x(i):.1f}", "cy": f"{y(a.speedup):.1f}", "r": 7.5},
                        h("title", None, "search best: " + _label(a)),
                    )
                )
        elif ev is not None and ev.status == "ok":  # correct, but no speedup that ranks (CPU interpreter)
            parts.append(
                h(
                    "circle",
                    {
                        "class": f"pt-cpu{mine}",
                        "cx": f"{x(i):.1f}",
                        "cy": f"{floor:.1f}",
                        "r": 3.2,
                        "data-attempt": a.id,
                    },
                    tip,
                )
            )
        else:
            cx, cy = x(i), floor
            d = f"M{cx - 3:.1f},{cy - 3:.1f}L{cx + 3:.1f},{cy + 3:.1f}M{cx - 3:.1f},{cy + 3:.1f}L{cx + 3:.1f},{cy - 3:.1f}"
            # inconclusive (the CPU interpreter ran out of time) is greyed: it did not fail
            fail = (
                "pt-fail pt-inconclusive"
                if a.evaluation is not None and a.evaluation.inconclusive
                else "pt-fail"
            ) + mine
            parts.append(h("path", {"class": fail, "d": d, "data-attempt": a.id}, tip))
    parts.append(
        h(
            "text",
            {"class": "axis-label", "x": LEFT, "y": TOP - 4},
            "speedup vs eager, per attempt (bands: rounds)",
        )
    )
    legend = _legend(HEIGHT - 10)
    return h(
        "svg",
        {
            "class": "chart",
            "viewBox": f"0 0 {WIDTH} {HEIGHT}",
            "role": "img",
            "aria-label": f"score over rounds: {n} attempts",
        },
        parts,
        legend,
    )
