"""HTML fragment of one attempt: its numbers, errors, timings, correctness, compile report, diff and code."""

from __future__ import annotations

import difflib

from ksearch.server.web.html import Markup, h
from ksearch.server.web.parts import attempt_status, num, sci, speed, stats, status_badge, table
from ksearch.worldmodel.models import Attempt, Candidate, Evaluation

MAX_DIFF_LINES = 4000


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
    # One device (the usual case) is named once in the heading: a column less keeps the table within
    # its panel on a laptop-wide window.
    devices = sorted({t.device for t in ev.timings})
    per_row = len(devices) > 1
    rows = []
    for t in ev.timings:
        rows.append(
            [
                t.workload,
                *([t.device] if per_row else []),
                num(t.time_us, 2),
                num(t.iqr_us, 2),
                f"{t.ci_low_us:.2f}–{t.ci_high_us:.2f}",
                str(t.n),
                num(t.eager_us, 2),
                speed(t.speedup_vs_eager),
                num(t.compile_us, 2),
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
    where = "" if per_row else f" on {devices[0]}"
    stat = "mean" if ev.timings[0].statistic == "mean" else "median"
    if ev.timing_protocol:
        where += f", timed by the {ev.timing_protocol} protocol"
    return h(
        "section",
        {"class": "block"},
        h("h4", None, f"Timings per workload{where} (device time per call)"),
        table(
            [
                "workload",
                *(["device"] if per_row else []),
                f"{stat} us",
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
            (f"vs {ev.compile_label}", speed(ev.speedup_vs_compile if ev.status == "ok" else None)),
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
