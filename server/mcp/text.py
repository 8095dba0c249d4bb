"""What a host reads of a tool's result: an evaluation as its few decisive lines (the whole record stays in the
structured result and the attempt resource), anything else as its JSON with its long texts (a phase prompt)
set out after it as text."""

from __future__ import annotations

import json
from typing import Any

from ksearch.tools.bank.ops import QueryBankOut
from ksearch.tools.benchmark_batch import BatchOut, pace_line
from ksearch.tools.common import (
    INSIDE_STEPS,
    compile_fact_lines,
    errors_text,
    failed_label,
    seconds_text,
)
from ksearch.tools.final_eval import FinalOut
from ksearch.tools.loop.call_clock import CallClock, took_text
from ksearch.tools.run_correctness import EvaluationOut
from ksearch.worldmodel.models import CPU_INTERPRETER, compile_label


def text_of(out: Any, structured: Any, took: str = "") -> str:
    """What the model reads: an evaluation as its few decisive lines, short enough to read after every
    attempt (the whole record stays in the structured result and the attempt resource); anything else as
    its JSON with its long texts set out (`json_with_texts`). `took`: an evaluation's took line for the whole
    call (`took_of`)."""
    if isinstance(out, EvaluationOut):
        return "\n".join(evaluation_lines(out, took))
    if isinstance(out, QueryBankOut):  # the entries in words; the records stay in the structured result
        return out.text
    if isinstance(out, BatchOut):  # its took line follows as a block of its own, as other long calls' do
        return "\n".join(batch_lines(out))
    return json_with_texts(structured)


def batch_lines(out: BatchOut) -> list[str]:
    """Each item as a benchmark's few lines, under its index (with why it was not evaluated or not recorded), then
    the batch's pace; the records stay in the structured result."""
    lines: list[str] = []
    for r in out.results:
        lines.append(
            f"## item {r.index}" + ("" if r.recorded or not r.result else " (evaluated, not recorded)")
        )
        if r.result is not None:
            lines += evaluation_lines(r.result)
        if r.refused:
            lines.append(f"not {'recorded' if r.result is not None else 'evaluated'}: {r.refused}")
    return [*lines, pace_line(out.results, out.seconds)]


LONG_TEXT = 300  # a one-line string field at least this long is read as text too


def json_with_texts(structured: Any) -> str:
    """The JSON, but each long or multi-line string field (a phase prompt, a summary) after it as text, under its
    name, rather than one JSON string of escaped newlines. `next` is left out: the server sends the loop's next
    step as a text block of its own, after this one (once: it was said twice)."""
    if not isinstance(structured, dict):
        return json.dumps(structured, indent=2)
    texts = {
        k: v
        for k, v in structured.items()
        if isinstance(v, str) and ("\n" in v or len(v) >= LONG_TEXT) and k != "next"
    }
    nxt = structured.get("next")
    rest = {
        k: v for k, v in structured.items() if k not in texts and not (k == "next" and isinstance(nxt, str))
    }
    parts = [json.dumps(rest, indent=2)]
    parts += [f"{k}:\n{v.strip()}" for k, v in texts.items()]
    return "\n\n".join(parts)


def _clip(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.6g}"


def took_of(out: Any, clock: CallClock) -> tuple[Any, str]:
    """The result with its took line for the whole call, and that line: an evaluation's steps (those of a final
    evaluation's re-measurements summed) beside the call's waits outside them, which `clock` timed, so that the
    parts add up to the seconds the host waited. An evaluation's summary then ends with it."""
    if isinstance(out, EvaluationOut):
        ev = out.evaluation
        took = seconds_text(ev, clock)
        alone = seconds_text(ev)
        if out.summary.endswith(alone):  # the summary's own line spoke for the evaluation alone
            out = out.model_copy(update={"summary": out.summary[: -len(alone)] + took})
        return out, took
    if isinstance(out, FinalOut):
        steps: dict[str, float] = {}
        for row in out.rows:
            for k, v in row.seconds_by_step.items():
                steps[k] = steps.get(k, 0.0) + v
        inside = ", ".join(
            f"{what} {steps[k]:.1f}" for k, what in INSIDE_STEPS.items() if steps.get(k, 0.0) >= 0.05
        )
        outer = {k: v for k, v in steps.items() if k not in INSIDE_STEPS}
        return out, took_text(clock, outer, f"{inside} of them" if inside else "")
    if isinstance(out, BatchOut):
        # the items' evaluations overlap where there are several workers, and wait for the one worker where there is
        # one: their steps are said per item above; the batch's own line is its wall time and what its items waited
        waited = sum(
            r.result.evaluation.seconds_by_step.get("wait_for_worker", 0.0) for r in out.results if r.result
        )
        return out, (
            f"took {clock.elapsed():.1f} s for {len(out.results)} item(s) (each item's own line says where its "
            f"seconds went; {waited:.1f} s of them in all were waits for a worker other items held)"
        )
    return out, took_text(clock)


def evaluation_lines(out: EvaluationOut, took: str = "") -> list[str]:
    """Status; the error and compile errors with their line numbers; where it is wrong; each workload's
    median and speedups (none on the CPU interpreter, whose timings rank nothing); flags. The loop's next
    step follows as a block of its own."""
    ev = out.evaluation
    head = f"candidate {out.candidate_id}"
    if out.attempt_id is not None:
        built = f" (built on #{out.base_attempt_id})" if out.base_attempt_id is not None else ""
        if out.base_assumed and out.base_attempt_id is not None:  # not the caller's: say it was assumed
            built = f" (built on #{out.base_attempt_id}, assumed: no base_attempt_id was given)"
        head = f"recorded as attempt #{out.attempt_id}{built}, {head}; record: ksearch://attempts/{out.attempt_id}"
    lines = [head, f"status: {ev.status}"]
    if ev.pure_pytorch:
        lines.append("PURE PYTORCH: no kernel of its own ran, so it is never a best: write the kernel itself")
    error = ev.error or ""
    if error:
        first, *rest = error.splitlines() or [""]
        lines += [f"error: {_clip(first)}", *(f"  {_clip(x)}" for x in rest[:3] if x.strip())]
    if ev.compile is not None and not ev.compile.ok:
        said = [d for d in ev.compile.diagnostics if d.severity == "error" and d.message not in error]
        lines += [
            f"compile error{f' at line {d.line}' if d.line else ''}: {_clip(d.message)}" for d in said[:5]
        ]
    if ev.compile is not None:
        lines += compile_fact_lines(ev.compile)
    passed = [r for r in ev.correctness if r.passed]
    if passed:
        errs = [r.max_abs_err for r in passed if r.max_abs_err is not None]
        names = (
            f"all {len(passed)} workloads"
            if len(passed) == len(ev.correctness) > 1
            else ", ".join(r.workload for r in passed[:6])
            + (f" +{len(passed) - 6}" if len(passed) > 6 else "")
        )
        rels = [r.max_rel_err for r in passed if r.max_rel_err is not None]
        used = [r.tolerance_used for r in passed if r.tolerance_used is not None]
        err = errors_text(
            max(errs) if errs else None, max(rels) if rels else None, max(used) if used else None
        )
        lines.append(f"correct on {names} ({passed[0].trials} trials{err})")
    for r in ev.correctness:
        if r.passed:
            continue
        why = "" if not r.message else " (the error above)" if r.message in error else f": {_clip(r.message)}"
        lines.append(f"{failed_label(ev.status)} on {r.workload}: {r.kind}{why}")
        if r.first_mismatch_index is not None:
            lines.append(
                f"  first mismatch at {r.first_mismatch_index}: expected {_num(r.expected_at_first)}, got "
                f"{_num(r.got_at_first)}; {r.mismatches}/{r.numel} elements off"
            )
    timed = [t for t in ev.timings if t.device != CPU_INTERPRETER]
    if timed:
        stat = "mean" if timed[0].statistic == "mean" else "median"
        lines.append(
            f"timed on {timed[0].device} by the {ev.timing_protocol} protocol: {stat} per call (95% CI)"
        )
    for t in ev.timings:
        if t.device == CPU_INTERPRETER:
            stat = "mean" if t.statistic == "mean" else "median"  # the protocol's statistic, as on a GPU
            lines.append(f"{t.workload}: {stat} {t.time_us:.0f} us in the CPU interpreter (not a speed)")
            continue
        parts = [f"  {t.workload}: {t.time_us:.1f} us ({t.ci_low_us:.1f}-{t.ci_high_us:.1f})"]
        if t.speedup_vs_eager is not None:
            parts.append(f"{t.speedup_vs_eager:.2f}x vs eager")
        if t.speedup_vs_compile is not None:
            parts.append(f"{t.speedup_vs_compile:.2f}x vs {compile_label([t.compile_mode])}")
        if t.roofline_fraction is not None:
            parts.append(f"{100 * t.roofline_fraction:.0f}% roofline")
        lines.append(", ".join(parts))
        lines += [f"    flag: {_clip(f)}" for f in t.flags[:2]]
    if len(timed) > 1 and ev.speedup_vs_eager is not None:
        vs_compile = f", {ev.speedup_vs_compile:.2f}x vs {ev.compile_label}" if ev.speedup_vs_compile else ""
        lines.append(f"geomean: {ev.speedup_vs_eager:.2f}x vs eager{vs_compile}")
    if ev.profile is not None:
        p = ev.profile
        lines.append(
            f"profile ({p.kernel}): {p.duration_us} us, DRAM {p.dram_throughput_pct}%, SM "
            f"{p.sm_throughput_pct}%, occupancy {p.achieved_occupancy_pct}%"
        )
    flags = [f for f in ev.flags if not f.startswith("note:") and f not in error]  # the error said it
    lines += [f"flag: {_clip(f)}" for f in flags[:3]]
    lines.append(took or seconds_text(ev))
    return lines
