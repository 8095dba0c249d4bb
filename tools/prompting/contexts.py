"""Build what a policy (or an MCP prompt) sees from the store: the task brief, the tree view, outcomes.

The driver and the MCP prompts use these same builders, so an assistant following the prompts gets
exactly the information ksearch's own driver gives its model.
"""

from __future__ import annotations

from typing import Any

from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.gpu.tasks.tunables import TunableError, read_tunables
from ksearch.tools.bank import ops as bank
from ksearch.tools.common import baseline_settings, gpu_lacking, summarize
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.protocols import protocol_line
from ksearch.tools.prompting.facts_wait import facts_for, within_reading
from ksearch.tools.prompting.phase_models import AttemptOutcome, TaskBrief, UpdateContext, WriteContext
from ksearch.tools.select_action import base_attempt
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import CPU_INTERPRETER, Attempt, Node, Search, compile_baseline_how
from ksearch.worldmodel.render import render_tree

TREE_BUDGET = 6000


async def hardware_text(ws: Workspace, s: Search | None = None) -> str:
    """This machine's hardware facts; on a machine without a GPU, also the GPU `s`'s attempts were timed on, if any
    (a search run on a GPU machine and read here: its numbers are that GPU's, not this machine's)."""
    sb = await ws.sandbox()
    hw = await within_reading(sb.hardware())
    if hw is None:  # an assistant's reading: the facts wait for a worker, which the background work holds
        if await sb.runs_without_gpu():
            return (
                "this machine has no GPU: candidates run in the Triton interpreter on the CPU (its versions follow "
                "in a later reading, once a worker is free: read this prompt again in a few seconds)"
            )
        return (
            "being measured: the GPU's worker is measuring the ceilings and the baselines in the background (the "
            "device, versions and measured ceilings follow: read this prompt again in a few seconds)"
        )
    facts = hw.model_dump(exclude_none=True)
    text = "; ".join(f"{k}={v}" for k, v in facts.items())
    if s is not None and hw.cpu_mode:
        timed = {
            t.device
            for a in await ws.store.list_attempts(s.id)
            if a.evaluation is not None
            for t in a.evaluation.timings
            if t.device != CPU_INTERPRETER
        }
        if timed:
            text += (
                f" (this machine, which serves the search); its attempts were timed on {', '.join(sorted(timed))}: "
                "their numbers are that GPU's"
            )
    return text


async def task_brief(ws: Workspace, s: Search) -> TaskBrief:
    task = ws.search_task(s)
    # Shapes, dtypes, bytes and FLOPs from one (fake-tensor) run of the reference: a task that declares
    # none of them is still described truly. Cached per file content; the first call runs a subprocess.
    needs = await gpu_lacking(ws, task)
    facts = None if needs else await facts_for(task)
    if needs:  # its reference or inputs are pinned to CUDA: no run of it here, so nothing is pending either
        gone = "not derivable without a GPU (see Task facts)"
        op, dtype, bound = task.op or gone, gone, gone
        said = f"not derivable on this machine: the task needs a GPU ({needs}) and this machine has none"
    elif facts is None:  # an assistant's reading that did not wait for them (tools/prompting/facts_wait.py)
        pending = "being derived (see Task facts)"
        op, dtype, bound, said = task.op or pending, pending, pending, FACTS_PENDING
    else:
        op = facts.op or task.op
        dtype = facts.dtype if facts.dtype_source != "none" else ""
        bound = facts.bound if facts.bound_source != "none" else ""
        said = facts.text() if not facts.error else f"could not be derived: {facts.error[:300]}"
    return TaskBrief(
        name=task.name,
        title=task.title,
        op=op,
        dtype=dtype,
        bound=bound,
        facts=said,
        description=task.description,
        reference_source=contract.reference_text(task),
        entry=contract.entry_signature(task),
        entry_rules=contract.entry_rules(task),
        entry_call_site=contract.entry_call_site(task),
        keep_rule=contract.keep_rule(task),
        timing=protocol_line(s.config.timing_protocol),
        workloads=[f"{w.name}: {w.params}" for w in task.by_split("search")],
        language=s.config.language,
        hardware=await hardware_text(ws, s),
        tolerance=tolerance_text(task, dtype if facts is not None else ""),
        reference_times=await reference_times_text(ws, s),
    )


FACTS_PENDING = (
    "being derived from the reference in the background (started when the search was created; a task's first "
    "reading takes seconds): read this prompt again for the shapes, dtype, bytes, FLOPs and bound of each workload"
)


def tolerance_text(task: Task, dtype: str = "") -> str:
    """The correctness rule, as the evaluator applies it (a task's own rule when it brings one), for the
    task's dtype when it is known (all dtypes otherwise)."""
    if task.style == "gpumode":
        return "the task's own check_implementation decides (GPU MODE rule)"
    t = task.tolerance
    dtypes = [dtype] if dtype in t.atol else list(t.atol)
    parts = [f"{d}: atol {t.atol[d]:g}, rtol {t.rtol.get(d, 0.0):g}" for d in dtypes]
    rule = "|got - ref| <= atol + rtol * |ref| elementwise; " + "; ".join(parts)
    if t.mismatch_ratio:
        rule += f"; up to {100 * t.mismatch_ratio:g}% of elements may fall outside"
    return rule + "; integer and bool outputs must match exactly"


async def reference_times_text(ws: Workspace, s: Search) -> str:
    """The reference's measured eager and torch.compile times per search workload (GPU only)."""
    sb = await ws.sandbox()
    times = getattr(sb, "reference_times", None)
    if times is None:
        return ""
    # not hardware(): it would wait for a worker, which the background measurement of these very times may hold
    if await sb.runs_without_gpu():
        return "not measured: this machine has no GPU (candidates run in the Triton interpreter)"
    task = ws.search_task(s)
    mode, protocol = s.config.compile_mode, s.config.timing_protocol
    got = await times(task, baseline_settings(task, s), wait=False)  # a prompt never waits for a measurement
    if got is None:
        return (
            f"timed: {protocol_line(protocol)}\n- being measured in the background (started when the search was "
            "created or first read); every benchmark result carries them per workload"
        )

    def us(x: float | None) -> str:
        return "not measured" if x is None else f"{x:.1f} us"

    how = f"torch.compile ({compile_baseline_how(mode)})"
    lines = [f"- {wl}: eager {us(v.get('eager'))}, {how} {us(v.get('compile'))}" for wl, v in got.items()]
    return "\n".join([f"timed: {protocol_line(protocol)}", *lines])


def tunables_of(source: str) -> dict[str, list[Any]]:
    """The space a candidate declares (TUNABLES), or {} when it declares none or declares it badly."""
    try:
        return {name: t.values for name, t in read_tunables(source).items()}
    except TunableError:
        return {}


def params_of(source: str) -> dict[str, Any]:
    """The tunable values a candidate's source sets: what an attempt actually measured."""
    try:
        return {name: t.current for name, t in read_tunables(source).items()}
    except TunableError:
        return {}


ROOT_TITLE = ":root"  # how a node map names the root (no intent's title starts with ':')


async def tree_view(ws: Workspace, search_id: int, budget: int = TREE_BUDGET) -> str:
    s = await ws.search(search_id)
    nodes = await ws.store.list_nodes(search_id)
    attempts = await ws.store.attempt_speedups(search_id)
    verdict = await ws.store.final_verdict(search_id)
    return render_tree(
        nodes,
        attempts,
        budget_chars=budget,
        best_attempt_id=s.best_attempt_id,
        no_result=s.best_attempt_id is None and verdict is not None and verdict.current(s.round),
        final=verdict.final_figure(s.best_attempt_id) if verdict is not None else None,
    )


async def base_source(ws: Workspace, s: Search, node: Node) -> tuple[str, Attempt | None]:
    """The code an intent starts from: the base fixed when its refine phase was claimed, else the best
    attempt on its path, else the task's seed; "" when the task has none (write from scratch)."""
    rnd, base_id = await loop.refine_start(ws, node)
    if rnd is None:  # never claimed: its path's best
        att = await base_attempt(ws, node)
    else:
        att = await ws.store.get_attempt(base_id) if base_id is not None else None
    if att is not None:
        return (await ws.store.get_candidate(att.candidate_id)).source, att
    return ws.search_task(s).seeds.get(s.config.language, ""), None


async def write_context(
    ws: Workspace, s: Search, node: Node, *, brief: TaskBrief | None = None
) -> WriteContext:
    """What the next attempt on a claimed intent is written from: the phase's best code so far (else its
    base), and the evaluator's feedback on the phase's last attempt."""
    refine = await loop.refine_state(ws, s, node)
    src, base = await base_source(ws, s, node)
    build_on = refine.best_attempt_id or refine.base_attempt_id
    if build_on is not None and (base is None or base.id != build_on):
        base = await ws.store.get_attempt(build_on)
        src = (await ws.store.get_candidate(base.candidate_id)).source
    phase = await loop.phase_attempts(ws, node)
    last = phase[-1] if phase else None
    kernels = await bank.kernels_for(ws, s)
    return WriteContext(
        task=brief or await task_brief(ws, s),
        intent_id=node.id,
        intent_title=node.title,
        intent_rationale=node.rationale,
        intent_params=node.params,
        base_source=src,
        base_attempt_id=base.id if base else None,
        base_summary=summarize(base.evaluation) if base and base.evaluation else "",
        feedback=summarize(last.evaluation) if last and last.evaluation else "",
        feedback_attempt_id=last.id if last else None,
        bank=kernels,
        attempt_index=refine.attempts,
        attempt_cap=refine.cap,
        tunables=tunables_of(src),
        tree_view=await tree_view(ws, s.id),
    )


async def update_context(
    ws: Workspace, s: Search, node: Node, *, rejected: list[str] | None = None
) -> UpdateContext:
    """What the reflection on an intent's refine phase reads: its attempts and the history (each against the
    attempt it was built on, the same "vs base" everywhere), the tree, the open intents and the search's best."""
    rnd, _ = await loop.refine_start(ws, node)
    src, _ = await base_source(ws, s, node)
    phase = await loop.phase_attempts(ws, node)
    # the space the intent's own code declares now (its last correct attempt's, else its last one's), not its base's:
    # an attempt may declare other tunables than the code it was built on
    latest = next(
        (a for a in reversed(phase) if a.evaluation and a.evaluation.correct), phase[-1] if phase else None
    )
    declared = tunables_of((await ws.store.get_candidate(latest.candidate_id)).source) if latest else {}
    best = await ws.store.best_attempt(s.id)
    brief = await task_brief(ws, s)  # first: it reads the task's facts, which the bank's match uses too
    lessons, _ = await bank.lessons_for(ws, s, "reflect")
    return UpdateContext(
        task=brief,
        round=rnd if rnd is not None else s.round,
        intent_id=node.id,
        intent_title=node.title,
        intent_status=node.status.value,
        intent_params=node.params,
        prediction=node.expected_speedup,
        outcomes=[await built_on(ws, a) for a in phase],
        history=await history(ws, s.id),
        tree_view=await tree_view(ws, s.id),
        open_intents=open_intents(nodes := await ws.store.list_nodes(s.id)),
        node_titles={n.id: ROOT_TITLE if n.kind == "root" else n.title for n in nodes},
        attempt_ids=[a.id for a in await ws.store.list_attempts(s.id)],
        best_speedup=best.speedup if best else None,
        tunables=declared or tunables_of(src),
        rejected=rejected or [],
        bank=lessons,
    )


def outcome(att: Attempt, source: str, base: Attempt | None) -> AttemptOutcome:
    ev = att.evaluation
    cpu = ev is not None and ev.cpu_interpreted
    # Interpreter timings are functional checks: no speedup of them is stated, anywhere.
    sp = None if cpu else att.speedup
    base_sp = (
        base.speedup
        if base is not None and not (base.evaluation and base.evaluation.cpu_interpreted)
        else None
    )
    return AttemptOutcome(
        attempt_id=att.id,
        node_id=att.node_id,
        base_attempt_id=base.id if base is not None else None,
        params=params_of(source),
        status=ev.status if ev else "missing",
        speedup_vs_eager=sp,
        speedup_vs_base=(sp / base_sp) if (sp and base_sp) else None,
        cpu_interpreter=cpu,
        summary=summarize(ev) if ev else "",
    )


async def history(ws: Workspace, search_id: int, limit: int = 40) -> list[AttemptOutcome]:
    out = []
    for a in (await ws.store.list_attempts(search_id))[-limit:]:
        o = await built_on(ws, a)
        o.summary = ""  # compact: the full feedback stays in the store
        out.append(o)
    return out


async def built_on(ws: Workspace, att: Attempt) -> AttemptOutcome:
    """An attempt's outcome against the attempt it was built on (its recorded base)."""
    base = await ws.store.get_attempt(att.base_attempt_id) if att.base_attempt_id is not None else None
    return await outcome_of(ws, att, base)


async def outcome_of(ws: Workspace, att: Attempt, base: Attempt | None) -> AttemptOutcome:
    return outcome(att, (await ws.store.get_candidate(att.candidate_id)).source, base)


def open_intents(nodes: list[Node]) -> list[dict[str, Any]]:
    return [
        {
            "id": n.id,
            "title": n.title,
            "priority": n.priority,
            "difficulty": n.difficulty,
            "params": n.params,
            "parent_id": n.parent_id,
            "base_attempt_id": n.base_attempt_id,  # the code its expected_speedup is relative to, if named
        }
        for n in nodes
        if n.kind == "intent" and n.status == "open" and not n.vetoed
    ]
