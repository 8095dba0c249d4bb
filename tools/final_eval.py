"""final_evaluation: re-measure a search's best few candidates on every workload (held-out included) with
fresh inputs, and end the search. The search workloads may have been overfitted; these numbers are the result."""

from __future__ import annotations

import logging
from typing import Literal, get_args

from pydantic import Field

from ksearch.gpu.timing.compare import CONFIDENCE, MIN_GAIN, compare
from ksearch.tools.bank.record import record_quietly
from ksearch.tools.common import (
    Progress,
    refuse_without_gpu,
    runs_without_gpu,
    sandbox_of,
    summarize,
    why_failed,
)
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.call_clock import EVALUATION, part
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import baselines
from ksearch.worldmodel.models import (
    CPU_INTERPRETER,
    Attempt,
    EvalSettings,
    Evaluation,
    FinalOutcome,
    Search,
    SearchStatus,
)

log = logging.getLogger(__name__)

RESULT_RULE = (
    "the search's best (the fastest correct kernel by the noise-aware comparison during the search), unless the "
    "final evaluation measures another re-measured kernel faster than it beyond noise (the same comparison: "
    f"the {CONFIDENCE:.0%} confidence bound above 1 and at least {1 + MIN_GAIN:g}x), or the best fails it "
    "(then the fastest re-measured kernel that passed)"
)
"""How a search's one result is chosen; every face that names the result says this."""


class FinalEvalIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    top_k: int = Field(loop.FINAL_TOP_K, ge=1, le=10, description="How many of the best distinct candidates")


class FinalRow(ToolModel):
    attempt_id: int
    node_id: int | None
    status: str
    speedup_vs_eager: float | None  # None where it was not timed on a GPU (the CPU interpreter)
    speedup_vs_compile: float | None
    compile_baseline: str = (
        "torch.compile"  # what speedup_vs_compile is against, e.g. "torch.compile (static, per shape)"
    )
    workloads: list[str]
    device: str | None = None  # where it was timed: a GPU name or "cpu-interpreter"
    timing_protocol: str | None = (
        None  # how it was timed on the GPU (ksearch, gpumode, kernelbench, flashinfer)
    )
    pure_pytorch: bool = False  # no kernel of its own ran: listed after every kernel, never the result
    seconds: float | None = None  # the re-measurement's wall seconds
    seconds_by_step: dict[str, float] = Field(
        default_factory=dict
    )  # where they went (inputs, checks, timing...)
    summary: str


class FinalOut(ToolModel):
    rows: list[FinalRow] = Field(description="Best first on a GPU (correct ones by speedup vs eager)")
    chosen_by: str = Field("", description="How the candidates re-measured were chosen")
    result_rule: str = Field(RESULT_RULE, description="How the search's one result is chosen from them")
    workloads: list[str] = Field(default_factory=list, description="The workloads they were run on")
    skipped: list[str] = Field(default_factory=list, description="Workloads not run here (no GPU)")
    best_attempt_id: int | None = Field(
        None,
        description="The search's best after the final evaluation (a best that failed it loses its place)",
    )
    best_lost: str = Field(
        "",
        description="When the search's best failed the final evaluation or was beaten in it: which, why, and "
        "what replaced it",
    )
    next: str = ""


async def final_evaluation(
    ws: Workspace,
    inp: FinalEvalIn,
    progress: Progress | None = None,
    *,
    status: SearchStatus | None = None,
) -> FinalOut:
    """Re-evaluate the top candidates, then end the search: `done` when nothing is left open or the target
    speedup was reached, `stopped` when a budget ended it (more budget would let it go on). The driver
    passes the status its own stop reason gives."""
    s = await ws.search(inp.search)
    task = ws.search_task(s)
    await refuse_without_gpu(ws, task)  # no candidate could pass here: a failed re-check would cost the best
    status = status or await end_status(ws, s)
    correct = await loop.final_candidates(ws, s)
    timed = [a for a in correct if not _cpu(a)]
    if timed and await runs_without_gpu(ws):
        # the interpreter is wrong where a GPU is right (bf16 tl.dot, rounding): its verdict must not cost a kernel
        # the GPU measured correct its place; nothing is run or recorded
        gpus = sorted({t.device for a in timed if a.evaluation for t in a.evaluation.timings if t.device})
        raise ToolFailure(
            f"search {s.name!r} was timed on a GPU ({', '.join(gpus)}): its final evaluation re-measures its "
            "candidates on a GPU, and this machine has none (the Triton interpreter here would re-judge kernels the "
            "GPU found correct). Run final_evaluation on a GPU machine; nothing was run or recorded"
        )
    if timed:
        atts = sorted(timed, key=lambda a: (a.speedup or 0.0, a.id), reverse=True)
        chosen_by = "the highest speedups vs eager measured on the GPU during the search"
    else:
        # Interpreter timings never rank: take each node's latest correct attempt (the code its refinement
        # ended with: a first correct attempt may be one the rule passed loosely), latest first, so every intent
        # that produced correct code is represented.
        latest: dict[int | None, Attempt] = {}
        for a in sorted(correct, key=lambda a: a.id):
            latest[a.node_id] = a
        atts = sorted(latest.values(), key=lambda a: a.id, reverse=True)
        chosen_by = (
            "each intent's latest correct attempt (without GPU timings, the code its refinement ended with), the "
            "latest intents' first (no GPU timing exists: CPU-interpreter timings never rank candidates)"
        )
    seen: set[str] = set()
    top = []
    # the search's best is always re-measured: the result is decided among candidates that include it
    if s.best_attempt_id is not None:
        atts = sorted(atts, key=lambda a: a.id != s.best_attempt_id)
    for a in atts:
        if a.candidate_id not in seen:
            seen.add(a.candidate_id)
            top.append(a)
        if len(top) >= inp.top_k:
            break
    rows: list[FinalRow] = []
    outcome: dict[int, FinalOutcome] = {}
    evals: dict[int, Evaluation] = {}
    cpu = await runs_without_gpu(ws)  # not hardware(): see eval_settings_on
    every = loop.final_workloads(task)
    names = [task.smoke().name] if cpu else every
    skipped = [w for w in every if w not in names]
    if top:
        sb = await sandbox_of(ws)
        for i, a in enumerate(top):
            cand = await ws.store.get_candidate(a.candidate_id)
            settings = EvalSettings(
                seed=(s.config.seed * 7919 + 17) % 2**31,
                workloads=names,
                final=True,
                compile_mode=s.config.compile_mode,
                timing_protocol=s.config.timing_protocol,
            )
            with part(EVALUATION, f"re-measuring attempt #{a.id}"):
                ev = await sb.evaluate(
                    cand, task, settings, timing=True, progress=_part(progress, i, len(top), a.id)
                )
            # the rows rank by the search's one baseline, the attempts' own (a held-out workload's is pinned here)
            ev = await baselines.apply(ws.store, s.id, ev)
            passed = ev.status == "ok" and not ev.pure_pytorch
            evals[a.id] = ev
            # the interpreter's time against eager PyTorch on the CPU says nothing of a GPU: no speedup is stated
            interpreted = bool(ev.timings) and ev.timings[0].device == CPU_INTERPRETER
            outcome[a.id] = FinalOutcome(
                attempt_id=a.id,
                candidate_id=a.candidate_id,
                passed=passed,
                status=ev.status,
                why="" if passed else why_failed(ev),
                speedup_vs_eager=None if interpreted or not passed else ev.speedup_vs_eager,
                workloads=len(ev.timings),
            )
            rows.append(
                FinalRow(
                    attempt_id=a.id,
                    node_id=a.node_id,
                    status=ev.status,
                    seconds=round(ev.seconds, 2),
                    seconds_by_step={k: round(v, 2) for k, v in ev.seconds_by_step.items()},
                    speedup_vs_eager=None if interpreted else ev.speedup_vs_eager,
                    speedup_vs_compile=None if interpreted else ev.speedup_vs_compile,
                    compile_baseline=ev.compile_label,
                    timing_protocol=ev.timing_protocol,
                    workloads=names,
                    device=ev.timings[0].device if ev.timings else None,
                    pure_pytorch=ev.pure_pytorch,
                    summary=summarize(ev),
                )
            )
        if all(r.device != "cpu-interpreter" for r in rows if r.status == "ok"):
            rows.sort(
                key=lambda r: (r.status == "ok" and not r.pure_pytorch, r.speedup_vs_eager or 0.0),
                reverse=True,
            )
        else:  # interpreter timings never rank: correct ones first, in the order they were chosen
            rows.sort(key=lambda r: r.status != "ok" or r.pure_pytorch)
    beaten_by, because = beaten_in_final(s.best_attempt_id, evals, outcome)
    verdict = await ws.store.record_final(
        s.id,
        [outcome[r.attempt_id] for r in rows],
        [r.model_dump() for r in rows],
        beaten_by=beaten_by,
        beaten_because=because,
    )
    # the result's row first, so "the first row" and the search's best are one attempt
    rows.sort(key=lambda r: r.attempt_id != verdict.best_after)
    if verdict.lost_because:
        log.warning("search %s: %s", s.name, verdict.note())
    await end_search(ws, s, status)
    if not rows:
        nxt = "No correct candidate to re-evaluate: the search ends without a result."
    elif cpu:
        take = await loop.take_out(ws, await ws.search(s.id))
        take = f" Meanwhile, {take}." if take else ""
        nxt = (
            f"The search is {status}. Without a GPU this checked correctness on the smoke workload only "
            f"({len(skipped)} workloads skipped); run final_evaluation (or `ksearch final`) on a GPU machine "
            f"for speedups on every workload.{take}"
        )
    else:
        nxt = (
            f"The search is {status}. Its result is attempt #{verdict.best_after}, the first row and the search's "
            f"best: {RESULT_RULE}. get_tree shows the tree."
            if verdict.best_after is not None
            else f"The search is {status}. No re-measured candidate passed the final evaluation: no result."
        )
    if verdict.lost_because or verdict.beaten_because:
        nxt = f"{verdict.note()}. {nxt}"
    return FinalOut(
        rows=rows,
        chosen_by=chosen_by,
        workloads=names,
        skipped=skipped,
        best_attempt_id=verdict.best_after,
        best_lost=verdict.note(),
        next=nxt,
    )


def beaten_in_final(
    best_id: int | None, evals: dict[int, Evaluation], outcome: dict[int, FinalOutcome]
) -> tuple[int | None, str]:
    """The re-measured kernel that beat the search's best in the final evaluation beyond noise (the fastest such
    one), and how; (None, "") when none did or the best was not re-measured or failed."""
    if best_id is None or best_id not in evals or not outcome[best_id].passed:
        return None, ""
    mine = evals[best_id]
    if mine.cpu_interpreted:  # interpreter timings never rank
        return None, ""
    found: tuple[float, int, str] | None = None
    for aid, ev in evals.items():
        if aid == best_id or not outcome[aid].passed or ev.cpu_interpreted:
            continue
        v = compare(ev, mine)
        if v.faster and v.ratio is not None and (found is None or v.ratio > found[0]):
            found = (v.ratio, aid, v.reason)
    if found is None:
        return None, ""
    return found[1], f"the final evaluation measured it faster than #{best_id}: {found[2]}"


def _part(progress: Progress | None, i: int, n: int, attempt_id: int) -> Progress | None:
    """One candidate's evaluation as its share of the whole re-measurement's progress."""
    if progress is None:
        return None
    report = progress

    async def say(message: str, fraction: float) -> None:
        await report(f"candidate {i + 1} of {n} (attempt #{attempt_id}): {message}", (i + fraction) / n)

    return say


def _cpu(a: Attempt) -> bool:
    return a.evaluation is not None and a.evaluation.cpu_interpreted


EndStatus = Literal["done", "stopped"]
"""How a search ends: `done` (finished) or `stopped` (it may go on)"""


async def end_search(ws: Workspace, s: Search, status: SearchStatus | None = None) -> Search:
    """End the search with `status` (`done` or `stopped`), or with the one `end_status` gives when None: what
    `final_evaluation` does after re-measuring, and what a driver run does when it ends without one (stopped
    by its policy, Ctrl-C or a crash: `stopped`, so it can be resumed). ToolFailure for another status."""
    if status is not None and status not in get_args(EndStatus):
        raise ToolFailure(
            f"a search cannot end {status!r}; accepted: {', '.join(get_args(EndStatus))} "
            "(or none, for the status its budgets and open intents give)"
        )
    ended = await ws.store.set_search_status(s.id, status or await end_status(ws, s))
    await record_quietly(ws, s.id)  # its best kernel and every finished intent, for the searches after it
    return ended


async def end_status(ws: Workspace, s: Search) -> SearchStatus:
    """How a search ends: `done` when nothing is left open or the target speedup was reached, `stopped`
    when a budget ended it (more budget would let it go on)."""
    b = await loop.budget_state(ws, s)
    open_left = any(
        n.kind == "intent" and n.status == "open" and not n.vetoed for n in await ws.store.list_nodes(s.id)
    )
    target = b.exhausted is not None and b.exhausted.startswith("target")
    return "done" if target or not open_left else "stopped"
