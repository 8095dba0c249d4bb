"""The score over rounds as an inline SVG: every attempt, the best so far, round bands.

Drawn on the server from numbers only (labels escaped), so the page and the exported report show the
same chart with no script and no external resource. Colours come from CSS classes.
"""

from __future__ import annotations

import math
from itertools import groupby

from ksearch.server.web.html import Markup, h, join
from ksearch.worldmodel.models import Attempt
from ksearch.worldmodel.render import fmt_speedup

WIDTH, HEIGHT = 1000, 210
LEFT, RIGHT, TOP, BOTTOM = 46, 14, 16, 34


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


def score_chart(attempts: list[Attempt], best_attempt_id: int | None) -> Markup:
    """SVG of speedup vs eager per attempt (in order), the running best, and the search's best ringed.

    The y axis is logarithmic and fitted to the data (0.05x and 0.4x are as far apart as 1x and 8x), with
    the eager line (1x) always in view. Only correct GPU-timed attempts are plotted as speedups: a correct
    attempt timed on the CPU interpreter is a hollow mark on the floor, a failed one a cross."""
    atts = sorted(attempts, key=lambda a: a.id)
    if not atts:
        return h(
            "svg",
            {
                "class": "chart",
                "viewBox": f"0 0 {WIDTH} 60",
                "role": "img",
                "aria-label": "score over rounds: no attempts yet",
            },
            h("text", {"x": 12, "y": 34, "class": "chart-empty"}, "No attempts yet."),
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
    # One mark per attempt: a dot when it ran correctly and was timed, a cross at the floor otherwise.
    for i, a in enumerate(atts):
        tip = h("title", None, _label(a))
        cls = "human" if a.author == "human" else "auto"
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
                        "class": "pt-cpu",
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
            )
            parts.append(h("path", {"class": fail, "d": d, "data-attempt": a.id}, tip))
    parts.append(
        h(
            "text",
            {"class": "axis-label", "x": LEFT, "y": TOP - 4},
            "speedup vs eager, per attempt (bands: rounds)",
        )
    )
    legend = join(
        [
            h("circle", {"class": "pt auto", "cx": WIDTH - 300, "cy": TOP - 8, "r": 3.6}),
            h("text", {"class": "tick", "x": WIDTH - 292, "y": TOP - 4}, "attempt"),
            h("circle", {"class": "pt human", "cx": WIDTH - 240, "cy": TOP - 8, "r": 3.6}),
            h("text", {"class": "tick", "x": WIDTH - 232, "y": TOP - 4}, "human"),
            h("path", {"class": "pt-fail", "d": f"M{WIDTH - 183},{TOP - 11}l6,6m-6,0l6,-6"}),
            h("text", {"class": "tick", "x": WIDTH - 172, "y": TOP - 4}, "failed"),
            h(
                "line",
                {"class": "best-line", "x1": WIDTH - 128, "x2": WIDTH - 110, "y1": TOP - 8, "y2": TOP - 8},
            ),
            h("text", {"class": "tick", "x": WIDTH - 104, "y": TOP - 4}, "best so far"),
        ]
    )
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
