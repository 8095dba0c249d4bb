"""Prompts: the files in tools/prompting/prompts/, filled from a phase's context.

The same text serves the built-in driver (through an LLM policy) and MCP clients (as MCP prompts), so
the guidance exists once. Templates use `{{name}}` for a value and `{{#name}}...{{/name}}` for a block
kept only when the value is non-empty (`{{^name}}...{{/name}}`: only when it is empty).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from ksearch.tools.loop.state import GAIN_RULE
from ksearch.tools.prompting.phase_models import (
    AttemptOutcome,
    InitContext,
    TaskBrief,
    UpdateContext,
    WriteContext,
)
from ksearch.worldmodel.models import EXPECTED_SPEEDUP

Phase = Literal["init", "write_code", "update"]
PHASES: tuple[Phase, ...] = ("init", "write_code", "update")
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

_CONTEXTS: dict[str, type] = {"init": InitContext, "write_code": WriteContext, "update": UpdateContext}
_SECTION = re.compile(r"\{\{([#^])(\w+)\}\}(.*?)\{\{/\2\}\}(\n?)", re.DOTALL)
_VALUE = re.compile(r"\{\{(\w+)\}\}")

# Long texts (compiler logs, reference files) are clipped in the middle so head and tail both survive.
FEEDBACK_LIMIT = 12_000
SUMMARY_LIMIT = 2_000
HISTORY_LINE_LIMIT = 240


@cache
def load_template(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.md")))
        raise FileNotFoundError(f"no prompt file {path}; the prompt files are: {known}")
    return path.read_text()


def fill(template: str, fields: dict[str, str]) -> str:
    """Fill a template; a placeholder with no field is an error (a typo in a prompt file must not ship)."""

    def section(m: re.Match[str]) -> str:
        kind, name, body, after = m.group(1), m.group(2), m.group(3), m.group(4)
        if name not in fields:
            raise KeyError(f"prompt section {{{{{kind}{name}}}}} names no field; fields: {sorted(fields)}")
        # A block whose tags sit on their own lines leaves no line of its own; an inline one keeps its text.
        block = body.startswith("\n") and body.endswith("\n")
        if block:
            body, after = body[1:], ""
        present = bool(fields[name].strip())
        return (body if present == (kind == "#") else "") + after

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in fields:
            raise KeyError(f"prompt placeholder {{{{{name}}}}} names no field; fields: {sorted(fields)}")
        return fields[name]

    # Sections first (their bodies may hold placeholders), values last: re.sub inserts a function's result
    # literally, so braces inside filled-in text (source code, logs) are never taken for template syntax.
    # Blank lines left by dropped sections are squeezed before filling, so filled-in code keeps its own.
    # Sections may nest: a kept outer section's body still holds its inner ones, so repeat until none is left.
    text, before = template, None
    while text != before:
        before, text = text, _SECTION.sub(section, text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return _VALUE.sub(value, text).strip() + "\n"


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def fmt_value(v: Any) -> str:
    return repr(v) if isinstance(v, str) else json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in params.items())


def fmt_tunables(tunables: dict[str, list[Any]]) -> str:
    return "\n".join(f"- {k}: {', '.join(fmt_value(v) for v in vs)}" for k, vs in tunables.items())


def fmt_speedup(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}x"


def fmt_outcome(o: AttemptOutcome, *, full: bool) -> str:
    head = f"- attempt {o.attempt_id if o.attempt_id is not None else '?'}"
    if o.node_id is not None:
        head += f" (intent #{o.node_id})"
    if o.cpu_interpreter:
        head += f": {o.status} (CPU interpreter: speed not measured)"
    else:
        head += f": {o.status}; vs eager {fmt_speedup(o.speedup_vs_eager)}, {_vs_base(o)}"
    if o.params:
        head += f"; {fmt_params(o.params)}"
    summary = o.summary.strip()
    if not summary:
        return head
    if not full:
        first = summary.splitlines()[0]
        return f"{head} — {clip(first, HISTORY_LINE_LIMIT)}"
    body = clip(summary, SUMMARY_LIMIT)
    return head + "\n" + "\n".join("    " + line for line in body.splitlines())


def _vs_base(o: AttemptOutcome) -> str:
    if o.base_attempt_id is None:
        return "no base attempt (written from the seed or from scratch)"
    return f"vs its base #{o.base_attempt_id} {fmt_speedup(o.speedup_vs_base)}"


def fmt_open_intent(i: dict[str, Any]) -> str:
    line = f"- #{i.get('id', '?')} {i.get('title', '')}"
    meta = []
    if "priority" in i:
        meta.append(f"p={float(i['priority']):.2f}")
    if "difficulty" in i:
        meta.append(f"d={i['difficulty']}")
    if i.get("expected_speedup"):
        meta.append(f"expect {float(i['expected_speedup']):.2f}x")
    if meta:
        line += f" ({', '.join(meta)})"
    if i.get("params"):
        line += f"; {fmt_params(i['params'])}"
    return line


def language_rules(language: str, call_site: str) -> str:
    return fill(load_template(f"lang_{language}"), {"entry_call_site": call_site})


def _task_fields(t: TaskBrief) -> dict[str, str]:
    return {
        "task_name": t.name,
        "task_title": t.title,
        "op": t.op or "unspecified",
        "dtype": t.dtype or "unspecified",
        "bound": t.bound or "unknown",
        "description": t.description.strip(),
        "reference_source": t.reference_source.rstrip(),
        "workloads": "\n".join(f"- {w}" for w in t.workloads) or "- (the task's default workload)",
        "language": t.language,
        "hardware": t.hardware.strip() or "not measured yet",
        "facts": t.facts.strip(),
        "tolerance": t.tolerance.strip() or "the task's default tolerances",
        "reference_times": t.reference_times.strip(),
        "expected_speedup_means": EXPECTED_SPEEDUP,
        "entry": t.entry,
        "keep_rule": t.keep_rule,
    }


def fields_for(phase: Phase, ctx: InitContext | WriteContext | UpdateContext) -> dict[str, str]:
    f = _task_fields(ctx.task)
    f["tree_view"] = ctx.tree_view.strip()
    f["bank"] = ctx.bank.strip()
    if isinstance(ctx, InitContext):
        f["seed_source"] = ctx.seed_source.rstrip()
        f["tunables"] = fmt_tunables(ctx.tunables)
    elif isinstance(ctx, WriteContext):
        f.update(
            intent_id=str(ctx.intent_id),
            intent_title=ctx.intent_title,
            intent_rationale=ctx.intent_rationale.strip(),
            intent_params=fmt_params(ctx.intent_params),
            base_source=ctx.base_source.rstrip(),
            base_label=f"attempt {ctx.base_attempt_id}, the best of this intent's path so far"
            if ctx.base_attempt_id is not None
            else "the task's seed",
            attempt_cap=str(ctx.attempt_cap) if ctx.attempt_cap else "",
            base_summary=clip(ctx.base_summary.strip(), SUMMARY_LIMIT),
            feedback=clip(ctx.feedback.strip(), FEEDBACK_LIMIT),
            attempt_number=str(ctx.attempt_index + 1),
            # "2 (attempt #9)": its place in this refine phase and its id in the search, never one for the other
            previous_attempt=str(ctx.attempt_index)
            + (f" (attempt #{ctx.feedback_attempt_id})" if ctx.feedback_attempt_id is not None else ""),
            tunables=fmt_tunables(ctx.tunables),
        )
    else:
        f.update(
            round=str(ctx.round),
            intent_id=str(ctx.intent_id),
            intent_title=ctx.intent_title,
            intent_status=ctx.intent_status,
            intent_params=fmt_params(ctx.intent_params),
            prediction=fmt_speedup(ctx.prediction) if ctx.prediction else "",
            outcomes="\n".join(fmt_outcome(o, full=True) for o in ctx.outcomes) or "- (no attempt finished)",
            history="\n".join(fmt_outcome(o, full=False) for o in ctx.history),
            open_intents="\n".join(fmt_open_intent(i) for i in ctx.open_intents),
            rejected="\n".join(f"- {r}" for r in ctx.rejected),
            best_speedup=fmt_speedup(ctx.best_speedup),
            gain_rule=GAIN_RULE,
            tunables=fmt_tunables(ctx.tunables),
        )
    return f


# A line of its own in a phase's template that ends a stable part: what comes before it (and after the previous one)
# is the same for the next calls of the phase (the bank's kernels, the intent and its base code), what follows the
# last one is this call's own.
STABLE_END = "{{=}}"


@dataclass(frozen=True)
class PromptParts:
    """One phase's prompt, its stable part first so that consecutive calls share a byte-identical prefix (what
    providers' prompt caches reuse): `system` (the rules) and `task` (the task brief) are the same for every call
    of a search, each `context` part for the next calls of the same phase (on the same intent), `ask` is this
    call's. The user text is `task`, the context and `ask` in that order."""

    system: str
    task: str
    context: tuple[str, ...]
    ask: str

    @property
    def user(self) -> str:
        return "\n".join((self.task, *self.context, self.ask))


def prompt_parts(phase: Phase, ctx: InitContext | WriteContext | UpdateContext) -> PromptParts:
    """The prompt for one phase, in parts. The ask is for the answer's content; how to deliver it (a tool
    call, a JSON object) is added by the caller."""
    if phase not in _CONTEXTS:
        raise ValueError(f"unknown phase {phase!r}; phases are: {', '.join(PHASES)}")
    if not isinstance(ctx, _CONTEXTS[phase]):
        raise TypeError(f"phase {phase!r} takes a {_CONTEXTS[phase].__name__}, got {type(ctx).__name__}")
    fields = fields_for(phase, ctx)
    # each part filled on its own: a section never spans a part's end, and filled-in text is never split
    parts = [
        fill(t, fields) for t in re.split(rf"^{re.escape(STABLE_END)}\n", load_template(phase), flags=re.M)
    ]
    *context, ask = parts
    return PromptParts(
        system=_system(ctx),
        task=fill(load_template("task"), fields),
        context=tuple(c for c in context if c.strip()),
        ask=ask,
    )


def render_prompt(phase: Phase, ctx: InitContext | WriteContext | UpdateContext) -> tuple[str, str]:
    """The (system, user) prompt for one phase (prompt_parts, the user text in one piece)."""
    p = prompt_parts(phase, ctx)
    return p.system, p.user


def _system(ctx: InitContext | WriteContext | UpdateContext) -> str:
    return fill(
        load_template("system"),
        {
            "language_rules": language_rules(ctx.task.language, ctx.task.entry_call_site).strip(),
            "entry_rules": ctx.task.entry_rules.strip(),
            "timing": f"by the search's timing protocol, {ctx.task.timing}"
            if ctx.task.timing
            else "with CUDA events",
            "expected_speedup_means": EXPECTED_SPEEDUP,
        },
    )
