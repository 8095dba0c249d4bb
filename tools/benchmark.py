"""benchmark: compile, check and time a candidate; on a node, record the attempt there.

Recording is the only path that writes results (the store enforces it): the node's best attempt and
the search's best move only when the evaluator says the new attempt is correct and faster.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from pydantic import Field

from ksearch.gpu.task import Task
from ksearch.tools.common import (
    MeasuredJob,
    Progress,
    check_workloads,
    eval_settings,
    node_in,
    refuse_oversized,
    refuse_without_gpu,
    resolve_candidate,
    sandbox_of,
    summarize,
    task_for,
)
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.call_clock import EVALUATION, part
from ksearch.tools.run_correctness import EvaluationOut
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import baselines
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import (
    CPU_INTERPRETER,
    Attempt,
    Candidate,
    EvalSettings,
    Evaluation,
    Node,
    NodeRef,
    Search,
)


class BenchmarkIn(MeasuredJob):
    node_id: NodeRef | None = Field(
        None, description="Intent this candidate implements (its id or handle): records the attempt there"
    )
    base_attempt_id: int | None = Field(
        None,
        ge=1,
        description="Attempt whose code this one modifies (default: of the phase's correct code, the one its source is "
        "closest to; the result says which it assumed)",
    )
    profile: bool = Field(False, description="Also run Nsight Compute on the first workload (GPU only)")
    author: str = Field(
        "human",
        min_length=1,
        max_length=80,
        description="human | llm:<model> | tuner (the task's own seed, candidate {seed: true}, is always 'seed')",
    )


@dataclass
class Prepared:
    """A benchmark's checked arguments, before its evaluation: what the evaluation and the recording need."""

    inp: BenchmarkIn
    search: Search | None
    task: Task
    node: Node | None
    refine: loop.RefineState | None
    author: str
    candidate: Candidate | None  # None: its source did not parse (`unparsable` says why)
    unparsable: ToolFailure | None
    base_attempt_id: int | None
    assumed: str
    settings: EvalSettings | None
    audit_threshold: dict[str, float] | None


async def benchmark(ws: Workspace, inp: BenchmarkIn, progress: Progress | None = None) -> EvaluationOut:
    job = await prepare(ws, inp)
    return await finish(ws, job, await evaluate(ws, job, progress))


async def prepare(ws: Workspace, inp: BenchmarkIn) -> Prepared:
    """Check a benchmark's arguments and resolve its candidate, refusing (ToolFailure) before anything runs."""
    s, task = await task_for(ws, inp.search, inp.task)
    # Whoever asks for it measured, nobody in the search wrote the task's seed: it is credited to "seed".
    author = "seed" if inp.candidate.seed else inp.author
    refine: loop.RefineState | None = None
    node = None
    if inp.node_id is not None:
        if s is None:
            raise ToolFailure("`node_id` needs `search`: an attempt is recorded on a node of a search")
        node = await node_in(ws, s, inp.node_id)
    if inp.base_attempt_id is not None:  # checked now: after the evaluation it would be too late to say
        if s is None:
            raise ToolFailure("`base_attempt_id` needs `search`: it names an attempt of that search")
        try:
            base = await ws.store.get_attempt(inp.base_attempt_id)
        except NotFound as e:
            raise ToolFailure(f"base_attempt_id: {e} in search {s.name!r}") from e
        if base.search_id != s.id:
            raise ToolFailure(
                f"base_attempt_id: attempt #{base.id} belongs to another search, not {s.name!r}"
            )
    check_workloads(task, inp.workloads)
    if inp.candidate.candidate_id is not None:
        await resolve_candidate(
            ws, inp.candidate, task
        )  # an unknown id is the argument's fault: say so first
    if node is not None and s is not None:
        # the loop's own refusal comes after the arguments' (a broken field is named first)
        refine = await refinable(ws, s, node)
    await refuse_without_gpu(ws, task)
    await refuse_oversized(ws, task, inp.workloads or [])  # the defaults without a GPU are the smoke ones
    job = Prepared(inp, s, task, node, refine, author, None, None, inp.base_attempt_id, "", None, None)
    try:
        job.candidate = await resolve_candidate(ws, inp.candidate, task)
    except ToolFailure as e:
        if refine is None or inp.candidate.source is None or s is None:
            raise
        # An attempt of a refine phase that does not parse is still an attempt: it counts against the cap
        # and the stagnation window, and its error is the next attempt's feedback, as any compile error is.
        job.unparsable = e
        return job
    if job.base_attempt_id is None and refine is not None:
        job.base_attempt_id, job.assumed = await assume_base(ws, refine, job.candidate.source)
    job.settings = await eval_settings(ws, s, task, inp.workloads, inp.trials)
    job.audit_threshold = await _audit_threshold(ws, node)
    return job


async def evaluate(ws: Workspace, job: Prepared, progress: Progress | None = None) -> Evaluation:
    """The candidate compiled, checked and timed (the compile error of one that did not parse)."""
    if job.candidate is None or job.settings is None:
        return Evaluation(status="compile_error", error=str(job.unparsable))
    sb = await sandbox_of(ws)
    with part(EVALUATION, "evaluating"):
        return await sb.evaluate(
            job.candidate,
            job.task,
            job.settings,
            timing=True,
            profile_workload=job.settings.workloads[0] if job.inp.profile else None,
            progress=progress,
            audit_unless_slower_than=job.audit_threshold,
        )


async def finish(ws: Workspace, job: Prepared, ev: Evaluation) -> EvaluationOut:
    """Record the evaluation where the arguments said (nowhere without a search) and say what comes next."""
    s, refine, inp = job.search, job.refine, job.inp
    if job.candidate is None:
        assert s is not None and refine is not None and inp.candidate.source is not None  # prepare's rule
        cand = await ws.store.put_candidate(inp.candidate.source, inp.candidate.language)
        if job.base_attempt_id is None:
            job.base_attempt_id, job.assumed = await assume_base(ws, refine, cand.source)
        return await _recorded(ws, s, refine, cand.id, ev, job.base_attempt_id, job.author, job.assumed)
    cand = job.candidate
    if s is None:
        return EvaluationOut(candidate_id=cand.id, summary=summarize(ev), evaluation=ev)
    ev = await baselines.apply(ws.store, s.id, ev)  # divided by the search's one baseline, as recorded
    if refine is not None:
        return await _recorded(ws, s, refine, cand.id, ev, job.base_attempt_id, job.author, job.assumed)
    with part("recording", "recording the attempt"):
        node_id = job.node.id if job.node is not None else None
        att = await record(ws, s.id, node_id, cand.id, ev, job.base_attempt_id, s.round, job.author)
    return EvaluationOut(
        candidate_id=cand.id,
        summary=summarize(ev),
        evaluation=ev,
        attempt_id=att.id,
        base_attempt_id=job.base_attempt_id,
        next=await _seed_off_root(ws, s, inp, att),
    )


async def _seed_off_root(ws: Workspace, s: Search, inp: BenchmarkIn, att: Attempt) -> str:
    """Why a seed benchmarked without node_id leaves the seed step due (empty otherwise: the loop's own next step
    follows): the seed is the baseline only as an attempt on the root, and the bare "measure the seed first" that
    follows such a call read as if the call had been ignored."""
    if not inp.candidate.seed or att.node_id is not None or not await loop.seed_unmeasured(ws, s):
        return ""
    root = await ws.store.root(s.id)
    return (
        f"This seed's attempt #{att.id} does not count as the seed step: it was recorded without node_id, on no "
        f"node, and the seed is the baseline only as an attempt on the root (node #{root.id}). "
        + (await loop.loop_state(ws, s.id)).next
    )


async def _audit_threshold(ws: Workspace, node: Node | None) -> dict[str, float] | None:
    """Per workload, the time a new attempt on `node` must be slower than everywhere for its kernel audit to be left
    out: the upper end of the confidence interval of the node's best (audited, GPU-timed). Slower than that on every
    workload, the attempt can become neither the node's best nor the search's (the search's is at least as fast).
    None (always audit) where the node has no such best."""
    if node is None or node.best_attempt_id is None:
        return None
    best = await ws.store.get_attempt(node.best_attempt_id)
    ev = best.evaluation
    if ev is None or not ev.ranks or ev.audited is False:
        return None
    return {t.workload: t.ci_high_us for t in ev.timings if t.device != CPU_INTERPRETER} or None


async def _recorded(
    ws: Workspace,
    s: Search,
    refine: loop.RefineState,
    candidate_id: str,
    ev: Evaluation,
    base_attempt_id: int | None,
    author: str,
    assumed: str = "",
) -> EvaluationOut:
    """Record an attempt of a refine phase (in the phase's round) and say where the phase now stands."""
    with part("recording", "recording the attempt"):
        att = await record(
            ws, s.id, refine.node_id, candidate_id, ev, base_attempt_id, refine.round, author, refine=refine
        )
        after = await loop.refine_state(ws, s, await ws.store.get_node(refine.node_id))
    return EvaluationOut(
        candidate_id=candidate_id,
        summary=summarize(ev),
        evaluation=ev,
        attempt_id=att.id,
        base_attempt_id=base_attempt_id,
        base_assumed=assumed,
        refine=after,
        # a base chosen among several is said where the model reads next; a phase's only code goes without saying
        next=_next_step(s.name, after, ev) + (f" Base: {assumed}." if "closest" in assumed else ""),
    )


async def assume_base(ws: Workspace, refine: loop.RefineState, source: str) -> tuple[int | None, str]:
    """The attempt a new attempt of a refine phase builds on when its caller did not say: of the phase's
    correct code (the base it started from and each correct attempt since), the one whose source is closest
    to the new source; on a tie the phase's best. (None, "") when the phase has no code yet."""
    ids = [refine.best_attempt_id, refine.base_attempt_id]
    for a in await loop.phase_attempts(ws, await ws.store.get_node(refine.node_id)):
        if a.evaluation is not None and a.evaluation.status == "ok":
            ids.append(a.id)
    known = list(dict.fromkeys(i for i in ids if i is not None))  # the phase's best first, each once
    if not known:
        return None, ""
    mine = source.splitlines()
    scored = []
    for i in known:
        att = await ws.store.get_attempt(i)
        theirs = (await ws.store.get_candidate(att.candidate_id)).source.splitlines()
        scored.append((difflib.SequenceMatcher(None, theirs, mine, autojunk=False).ratio(), i))
    share, best = max(scored, key=lambda t: t[0])  # max keeps the first of equals: the phase's best
    if len(known) == 1:
        return best, f"#{best}, the phase's only correct code (no base_attempt_id was given)"
    return best, (
        f"#{best} assumed (no base_attempt_id was given): of the phase's correct code "
        f"({', '.join(f'#{i}' for i in known)}) its source is the closest to this one ({share:.0%} of lines in "
        "common); name base_attempt_id in benchmark to set the base yourself"
    )


async def refinable(ws: Workspace, s: Search, node: Node) -> loop.RefineState | None:
    """Refuse an attempt on a node whose refine phase is not running; the root takes the seed's attempt."""
    if node.kind == "root":
        return None
    if node.vetoed or node.status == "pruned":
        raise ToolFailure(f"node {node.id} is {'vetoed' if node.vetoed else 'pruned'}; reopen it first")
    if node.status == "open":
        raise ToolFailure(
            f"intent #{node.id} is open, not being refined: claim it first with select_action "
            f"(search={s.name!r}, node_id={node.id}), which starts its refine phase as a new round"
        )
    if node.status != "active":
        raise ToolFailure(
            f"intent #{node.id} is {node.status.value}: its refine phase has ended. Reopen it (edit_tree "
            "op=reopen) and claim it with select_action to refine it again, or propose a follow-up intent"
        )
    state = await loop.refine_state(ws, s, node)
    if state.over:
        raise ToolFailure(
            f"the refine phase of intent #{node.id} is over ({state.why}); call finish_intent "
            f"(search={s.name!r}, node_id={node.id}) and reflect"
        )
    return state


def _next_step(search: str, r: loop.RefineState, ev: Evaluation) -> str:
    verdict = (
        f"recorded as attempt {r.attempts} of at most {r.cap} on intent #{r.node_id}; "
        f"{r.stagnant} in a row without a significant gain (window {r.window}; {loop.GAIN_SHORT})"
    )
    if r.over:
        return (
            f"{verdict}. Refine is over: {r.why}. Reflect now: call finish_intent "
            f"(search={search!r}, node_id={r.node_id})."
        )
    fix = {
        "compile_error": "fix the compile error first",
        "incorrect": "fix the wrong values first (see where it differs)",
        "crash": "find the out-of-bounds access or bad launch first",
        "timeout": "look for an unbounded loop first",
        "interpreter_unsupported": "or keep this one for a GPU: it compiles there, the interpreter cannot run it",
    }.get(ev.status, "implement the same intent differently, or better" if ev.status == "ok" else "fix it")
    cpu = (
        # short: the whole benchmark text stays within 800 bytes (tests/ts), even with a `took` line
        " CPU-interpreter timings are never a gain: each further correct attempt counts toward the window."
        if ev.timings and ev.timings[0].device == "cpu-interpreter"
        else ""
    )
    return (
        f"{verdict}. Write another implementation of this intent ({fix}) and benchmark it with "
        f"node_id={r.node_id}; the prompt implement_intent has the feedback.{cpu}"
    )


async def record(
    ws: Workspace,
    search_id: int,
    node_id: int | None,
    candidate_id: str,
    ev: Evaluation,
    base_attempt_id: int | None,
    round: int,
    author: str,
    *,
    refine: loop.RefineState | None = None,
) -> Attempt:
    """Record an evaluated candidate; `refine`: the state of the refine phase it belongs to, before it.

    One gain rule decides both the phase's stagnation count and the node's best: within a phase the new
    attempt becomes the node's best exactly when it counts as a gain over the phase's best code (its base until
    an attempt improves on it; loop.improves: correct, and faster beyond noise by at least the minimum gain),
    so a node never shows as its best an attempt its phase did not count, nor misses one it did. The first
    correct attempt of a node is its best in any case (a closed intent has code to build on)."""
    from ksearch.gpu.timing.compare import compare

    phase_best_id = (refine.best_attempt_id or refine.base_attempt_id) if refine is not None else None
    phase_best = await ws.store.get_attempt(phase_best_id) if phase_best_id is not None else None

    def better(a: Attempt, b: Attempt) -> bool:
        # Noise-aware: the new attempt replaces the best only when faster beyond measured spread.
        if b.evaluation is None or b.evaluation.status != "ok":
            return True
        return a.evaluation is not None and compare(a.evaluation, b.evaluation).faster

    def node_better(a: Attempt, b: Attempt) -> bool:
        if phase_best is None or phase_best.evaluation is None or a.evaluation is None:
            return better(a, b)
        return loop.improves(a.evaluation, phase_best.evaluation)

    return await ws.store.record_attempt(
        search_id,
        node_id,
        candidate_id,
        ev,
        base_attempt_id=base_attempt_id,
        round=round,
        author=author,
        better=better,
        node_better=node_better,
    )
