"""The loop's state, read from the records: which phase a search is in and what to do next.

One loop, three drivers: the built-in driver, an MCP host and a person advance the same K-Search loop
(init → rounds of select → refine → update → final evaluation). Everything here is derived from the
store, so whoever calls the tools next — the driver, a host, `ksearch` on the command line — sees the
same phase, the same attempt count against the cap, the same stagnation count, the same budget left.

The refine rule (shared with the driver): an intent is refined by attempts until `max_attempts_per_intent`
attempts were made or `stagnation` attempts in a row brought no *significant* gain (gpu/timing/compare.py: a
confidence bound on the speedup and a minimum gain) over the best correct code of the phase, which starts
as the code the intent builds on.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from ksearch.gpu.task import Task
from ksearch.gpu.timing.compare import CONFIDENCE, MIN_GAIN, compare
from ksearch.tools.errors import UNPARSED
from ksearch.tools.export_kernel import FORMAT_OF_STYLE, cpu_correct, some_ids
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import runs
from ksearch.worldmodel.claims import FINISHED_KEY, REFINE_KEY
from ksearch.worldmodel.models import Attempt, Evaluation, Node, Search

Phase = Literal["init", "select", "refine", "update", "final", "done"]

# Written by the claim and the finish in their own transactions (worldmodel/claims.py), read here.
_REFINE_KEY = REFINE_KEY
_FINISHED_KEY = FINISHED_KEY


class RefineState(ToolModel):
    """Where one intent's refine phase stands."""

    node_id: int
    title: str
    round: int = Field(description="The round this refine phase belongs to")
    attempts: int = Field(description="Attempts recorded on the intent in this phase")
    cap: int = Field(description="At most this many attempts per intent (max_attempts_per_intent)")
    stagnant: int = Field(description="Attempts in a row without a significant gain")
    window: int = Field(description="The stagnation window: refine stops when `stagnant` reaches it")
    base_attempt_id: int | None = Field(description="The attempt the phase builds on (None: from scratch)")
    best_attempt_id: int | None = Field(
        description="The phase's attempt that improved on its base (the first correct one when the base is "
        "not correct; later, only a gain beyond noise on a GPU): the code the next attempt builds on. "
        "None: none did, the next attempt builds on the base"
    )
    over: bool = Field(description="True when no further attempt is allowed: finish the intent")
    why: str = Field("", description="Why the phase is over (cap, stagnation window)")
    interpreted: bool = Field(
        False,
        description="Its base or its attempts ran in the CPU interpreter (no GPU): no timing of it is ever a gain",
    )
    correct_code: bool = Field(
        False,
        description="The phase has correct code (its base or an attempt): a first correct one is no gain",
    )


class BudgetState(ToolModel):
    """The search's budgets (its configuration) against what it has used."""

    rounds_used: int
    rounds: int | None
    attempts_used: int
    attempts: int | None
    tokens_used: int
    tokens: int | None
    usd_used: float
    usd: float | None
    target_speedup: float | None
    best_speedup: float | None
    exhausted: str | None = Field(
        None, description="The budget that lets no new round start (the round in progress still finishes)"
    )


class LoopState(ToolModel):
    """The loop as the records show it, with the next step to take."""

    search_id: int
    search: str
    status: str
    round: int
    phase: Phase
    refining: list[RefineState] = Field(default_factory=list)
    reflecting_on: int | None = Field(
        None, description="In the update phase: the intent whose refine phase ended, to reflect on"
    )
    budget: BudgetState
    timing_protocol: str = Field(
        "ksearch",
        description="How its candidates are timed (the task's owner's evaluator's way, or ksearch's)",
    )
    best_lost: str = Field(
        "", description="When the search's best failed the final evaluation: which, why, and what replaced it"
    )
    next: str = Field(description="What to do next, as an instruction")


# ----------------------------------------------------------------------------- refine


GAIN_RULE = (
    f"a gain is a correct attempt faster than the phase's best code so far (its base until an attempt beats it; "
    f"with no base to build on, the phase's first correct attempt is its first gain) "
    f"beyond noise: the {CONFIDENCE:.0%} confidence interval of the geometric-mean speedup above 1 and the speedup "
    f"at least {1 + MIN_GAIN:g}x; a gain becomes the intent's best and resets the count"
)
"""The rule `improves` applies, in words, for every face that counts gains."""
GAIN_SHORT = f"a gain: faster than the phase's best beyond noise and by at least {MIN_GAIN:.0%}"
"""The same rule in a few words, for a tool result a model reads after every attempt."""


def improves(ev: Evaluation, best: Evaluation | None) -> bool:
    """Does a new evaluation improve on the phase's best so far? Correct beats incorrect; between two
    correct ones only a gain beyond measured noise counts, and CPU-interpreter timings never rank.
    A pure-PyTorch attempt is no kernel: never a gain, never the code the next attempt builds on."""
    if ev.status != "ok" or ev.pure_pytorch:
        return False
    if best is None or best.status != "ok":
        return True
    if ev.cpu_interpreted or best.cpu_interpreted:
        return False
    return compare(ev, best).faster


def unparsed(ev: Evaluation) -> bool:
    """An attempt whose source did not parse as Python: recorded with its error, never compiled or run."""
    return ev.status == "compile_error" and ev.compile is None and (ev.error or "").startswith(UNPARSED)


def refine_progress(
    base: Evaluation | None, evaluations: list[Evaluation], cap: int, window: int
) -> tuple[int, int | None, bool, str]:
    """(stagnant, index of the phase's best among `evaluations` or None, over, why) for attempts in order. A source
    that did not even parse counts toward the cap but not the stagnation window: nothing was measured, and a typo
    must not end a phase whose window is short (the quickstart's is 1)."""
    best, best_i, stagnant = base, None, 0
    for i, ev in enumerate(evaluations):
        if unparsed(ev):
            continue
        if improves(ev, best):
            best, best_i, stagnant = ev, i, 0
        else:
            stagnant += 1
    n = len(evaluations)
    if n >= cap:
        return stagnant, best_i, True, f"the attempt cap was reached ({n} of {cap})"
    if stagnant >= window:
        return (
            stagnant,
            best_i,
            True,
            f"{stagnant} attempt{'s' if stagnant != 1 else ''} in a row without a significant gain (window {window})",
        )
    return stagnant, best_i, False, ""


async def claim(ws: Workspace, s: Search, node: Node, base_attempt_id: int | None) -> None:
    """Remember where the refine phase of `node` (claimed in round `s.round`) starts: for a node made active
    without `select_action` (whose claim records it in the claim's own transaction)."""
    await ws.store.cache_put(
        _REFINE_KEY.format(node_id=node.id), {"round": s.round, "base_attempt_id": base_attempt_id}
    )


async def give_back(ws: Workspace, s: Search, node: Node) -> Node:
    """Undo the claim of `node` before any attempt (its policy declined it): open again, its round not
    counted unless a later round began meanwhile."""
    rnd, _ = await refine_start(ws, node)
    return await ws.store.unclaim(s.id, node.id, rnd if rnd is not None else s.round)


class Applied(ToolModel):
    """The edits of a reflection that came with finish_intent, applied with it."""

    edits: int = 0
    """How many edits of existing nodes were applied"""
    new_intents: list[int] = Field(default_factory=list)
    """The ids of the intents added, in the order given"""

    def text(self) -> str:
        parts = [f"{self.edits} edit{'s' if self.edits != 1 else ''}"] if self.edits else []
        if self.new_intents:
            ids = ", ".join(f"#{i}" for i in self.new_intents)
            parts.append(f"the new intent{'s' if len(self.new_intents) > 1 else ''} {ids}")
        return f"Already applied with finish_intent: {' and '.join(parts)}; do not send them again."


async def applied_later(ws: Workspace, s: Search, *, edits: int = 0, new_intents: int = 0) -> None:
    """Count edits and new intents applied (edit_tree, propose_intents) while the round's update phase is open, so
    its next step says they are in rather than asking for them again."""
    key = _FINISHED_KEY.format(search_id=s.id)
    got = await ws.store.cache_get(key) or {}
    if got.get("round") != s.round or got.get("applied"):
        return  # no update phase open: nothing to say
    later = got.get("later") or {"edits": 0, "new_intents": 0}
    later = {"edits": later["edits"] + edits, "new_intents": later["new_intents"] + new_intents}
    await ws.store.cache_put(key, {**got, "later": later})


async def last_finished(ws: Workspace, search_id: int) -> int | None:
    """The id of the intent whose refine phase ended last (None: none yet)."""
    got = await ws.store.cache_get(_FINISHED_KEY.format(search_id=search_id)) or {}
    return got.get("node_id")


async def applied_with_finish(ws: Workspace, search_id: int, node_id: int) -> Applied | None:
    """The edits that came with the finish of `node_id`, when it is the intent finished last and some did."""
    got = await ws.store.cache_get(_FINISHED_KEY.format(search_id=search_id)) or {}
    if got.get("node_id") != node_id or not got.get("applied"):
        return None
    return Applied.model_validate(got["applied"])


async def refine_start(ws: Workspace, node: Node) -> tuple[int | None, int | None]:
    """(round, base attempt id) recorded when the node was claimed; (None, None) if it never was."""
    got = await ws.store.cache_get(_REFINE_KEY.format(node_id=node.id))
    if not got:
        return None, None
    return got.get("round"), got.get("base_attempt_id")


async def phase_attempts(ws: Workspace, node: Node) -> list[Attempt]:
    """The attempts of the node's current refine phase (recorded in the round it was claimed in)."""
    rnd, _ = await refine_start(ws, node)
    atts = await ws.store.list_attempts(node.search_id, node.id)
    return [a for a in atts if rnd is None or a.round == rnd]


async def refine_state(ws: Workspace, s: Search, node: Node) -> RefineState:
    rnd, base_id = await refine_start(ws, node)
    atts = await phase_attempts(ws, node)
    base = await ws.store.get_attempt(base_id) if base_id is not None else None
    evs = [a.evaluation or Evaluation(status="error", error="no evaluation") for a in atts]
    stagnant, best_i, over, why = refine_progress(
        base.evaluation if base else None, evs, s.config.max_attempts_per_intent, s.config.stagnation
    )
    return RefineState(
        node_id=node.id,
        title=node.title,
        round=rnd if rnd is not None else s.round,
        attempts=len(atts),
        cap=s.config.max_attempts_per_intent,
        stagnant=stagnant,
        window=s.config.stagnation,
        base_attempt_id=base_id,
        best_attempt_id=atts[best_i].id if best_i is not None else None,
        over=over,
        why=why,
        interpreted=any(
            e.cpu_interpreted for e in [*evs, *([base.evaluation] if base and base.evaluation else [])]
        ),
        # a first correct attempt is a gain only where the phase has no correct code yet
        correct_code=any(e.status == "ok" for e in evs)
        or (base is not None and base.evaluation is not None and base.evaluation.status == "ok"),
    )


# ----------------------------------------------------------------------------- budgets


async def budget_state(ws: Workspace, s: Search, *, rounds_override: int | None = None) -> BudgetState:
    b = s.config.budgets
    rounds = rounds_override if rounds_override is not None else b.rounds
    n_att = len(await ws.store.attempt_speedups(s.id))  # a count: no evaluations loaded
    t = await ws.store.llm_totals(s.id)
    tokens = t.tokens_in + t.tokens_out
    best = await ws.store.best_attempt(s.id)
    best_sp = best.speedup if best else None
    out = BudgetState(
        rounds_used=s.round,
        rounds=rounds,
        attempts_used=n_att,
        attempts=b.attempts,
        tokens_used=tokens,
        tokens=b.tokens,
        usd_used=t.usd,
        usd=b.usd,
        target_speedup=b.target_speedup,
        best_speedup=best_sp,
    )
    out.exhausted = exhausted(out, wall_s=b.wall_s, started=s.created_at)
    return out


FINAL_TOP_K = 3
"""How many of the best distinct candidates final_evaluation re-measures unless told otherwise."""


def final_workloads(task: Task) -> list[str]:
    """The workloads final_evaluation measures on a GPU: every one but the smoke workload."""
    return [w.name for w in task.workloads if w.split != "smoke"]


async def final_candidates(ws: Workspace, s: Search) -> list[Attempt]:
    """The attempts final_evaluation chooses among: correct ones; a pure-PyTorch attempt is no kernel, never a
    result of the search."""
    return [
        a
        for a in await ws.store.list_attempts(s.id)
        if a.evaluation and a.evaluation.status == "ok" and not a.evaluation.pure_pytorch
    ]


async def final_cost_text(ws: Workspace, s: Search) -> str:
    """What final_evaluation is likely to take, from this search's own evaluations ('' with none to go by): the
    distinct correct candidates it re-measures, each on every workload, at the mean seconds its evaluations took
    per workload checked."""
    atts = await final_candidates(ws, s)
    evals = [e for a in atts if (e := a.evaluation) is not None and e.seconds > 0 and e.correctness]
    if not evals:
        return ""
    per = sum(e.seconds / len(e.correctness) for e in evals) / len(evals)
    n = min(FINAL_TOP_K, len({a.candidate_id for a in atts}))
    # without a GPU the final evaluation runs the smoke workload only
    wls = 1 if all(e.cpu_interpreted for e in evals) else len(final_workloads(ws.search_task(s)))
    total = n * wls * per
    took = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
    return (
        f"It will take about {took}: up to {n} candidate(s) x {wls} workload(s) at this search's mean of "
        f"{per:.1f} s per candidate and workload (an estimate; baselines not yet measured add to it)."
    )


def spent_text(exhausted: str, search: str) -> str:
    """What every face says of a spent budget (a refused claim, a look at the next intent, the loop's state):
    no new round starts, and the two ways forward."""
    return (
        f"The search's budget is spent ({exhausted}): no new round starts. Call final_evaluation "
        f"(search={search!r}) to re-measure the best candidates on every workload, held-out ones included, or "
        "raise the budget with set_budgets to search further."
    )


def exhausted(
    b: BudgetState, *, wall_s: float | None = None, started: datetime | float | None = None
) -> str | None:
    """Which budget stops the search now (None: none does). `started` is a datetime or a monotonic time."""
    if b.rounds is not None and b.rounds_used >= b.rounds:
        return f"round budget reached ({b.rounds_used} of {b.rounds} rounds started)"
    if b.attempts is not None and b.attempts_used >= b.attempts:
        return f"attempt budget reached ({b.attempts})"
    if wall_s is not None and started is not None:
        spent = (
            (datetime.now(UTC) - started).total_seconds()
            if isinstance(started, datetime)
            else time.monotonic() - started
        )
        if spent >= wall_s:
            return f"wall-time budget reached ({wall_s:.0f}s)"
    if b.tokens is not None and b.tokens_used >= b.tokens:
        return f"token budget reached ({b.tokens_used} >= {b.tokens})"
    if b.usd is not None and b.usd_used >= b.usd:
        return f"money budget reached (${b.usd_used:.2f} >= ${b.usd:.2f})"
    if b.target_speedup is not None and b.best_speedup is not None and b.best_speedup >= b.target_speedup:
        return f"target speedup reached ({b.best_speedup:.2f}x >= {b.target_speedup:.2f}x)"
    return None


# ----------------------------------------------------------------------------- the whole loop


async def other_run(ws: Workspace, s: Search) -> runs.RunHolder | None:
    """The live driver run of another process that holds the search (None: none does, or the run is this
    process's own: the driver reads the loop's state too, and its own run is no reason for it to wait)."""
    h = await runs.holder(ws.store, s.id)
    if h is None or runs.shown_status(s, h) != "running":
        return None
    return None if (h.pid == os.getpid() and h.host == runs.this_host()) else h


def run_holds_text(s: Search, holder: runs.RunHolder, refining: list[RefineState]) -> str:
    """The next step while another process's driver run holds the search: the run ends refine phases, reflects,
    selects and ends the search itself, so advice to do any of that by hand would cut its work short. What a
    caller may do is wait, add a kernel to an intent the run is refining (one more attempt there), or stop it."""
    held = f"A driver run holds this search ({holder.describe()})"
    going = [r for r in refining if not r.over]
    if going:
        r = going[0]
        ids = ", ".join(f"#{g.node_id} ({g.attempts} of at most {g.cap} attempts made)" for g in going)
        return (
            f"{held} and is refining intent {ids}; it ends the refine phase, reflects and selects the next intent "
            f"itself. Wait for it, or add your kernel to #{r.node_id}'s refine phase as one more attempt while "
            f'it lasts: benchmark (search={s.name!r}, node_id={r.node_id}, candidate={{"source": "..."}}).'
        )
    return (
        f"{held} and takes the loop's next step itself. Wait for it, or stop it (Ctrl-C in its terminal) to go on "
        "by hand."
    )


async def seed_unmeasured(ws: Workspace, s: Search) -> bool:
    """The task has a seed in the search's language and the root holds no attempt of it yet."""
    if s.config.language not in ws.search_task(s).seeds:
        return False
    root = await ws.store.root(s.id)
    return root.best_attempt_id is None and not await ws.store.list_attempts(s.id, root.id)


async def loop_state(ws: Workspace, ref: int | str) -> LoopState:
    s = await ws.search(ref)
    nodes = await ws.store.list_nodes(s.id)
    intents = [n for n in nodes if n.kind == "intent"]
    active = [n for n in intents if n.status == "active"]
    refining = [await refine_state(ws, s, n) for n in active]
    budget = await budget_state(ws, s)
    final = await ws.store.cache_get(f"final:{s.id}")
    final_done = final is not None and final.get("round", s.round) == s.round  # none since rounds went on
    verdict = await ws.store.final_verdict(s.id)
    name = s.name
    reopened = [n.id for n in intents if n.status == "open" and not n.vetoed]
    over = s.status == "done" or (s.status == "stopped" and final_done)
    reflecting_on: int | None = None
    if over and reopened and not budget.exhausted:
        # intents left unclaimed at the end, or reopened or added after it, with budget left: the search can go on
        phase: Phase = "select"
        ids = ", ".join(f"#{i}" for i in reopened[:10])
        nxt = (
            f"The search was over ({s.status}) with intents open ({ids}) and budget left: call select_action "
            f"(search={name!r}) to search further; a new final_evaluation is due at its end."
            + (f" Meanwhile, {take}." if (take := await take_out(ws, s)) else "")
        )
    elif over:
        phase = "done"
        # only a search with a result has a best kernel to read
        fmt = FORMAT_OF_STYLE[ws.search_task(s).style]
        if s.best_attempt_id is not None:
            read = (
                f"Read the best kernel with get_tree, or take it out in its task owner's format with export_kernel "
                f"(search={name!r}, format={fmt!r}); "
            )
        else:
            take = await take_out(ws, s)
            read = "It ended without a result (no attempt correct and timed on a GPU); " + (
                take and f"{take}; "
            )
        nxt = (
            f"The search is over ({s.status}); its final evaluation is recorded. {read}to search further, raise "
            f"its budgets with set_budgets (a spent one stops it) or reopen intents with edit_tree, then call "
            f"select_action."
        )
    elif await seed_unmeasured(ws, s):
        root = await ws.store.root(s.id)
        phase = "init"
        nxt = (
            f"Phase 0 (init): measure the task's seed first, the baseline every intent starts from: benchmark "
            f'(search={name!r}, node_id={root.id}, candidate={{"seed": true, "language": '
            f'"{s.config.language}"}}).'
        )
    elif not intents:
        phase = "init"
        root = await ws.store.root(s.id)
        nxt = (
            "Phase 0 (init): the root holds your analysis; call propose_intents with the first intents."
            if root.notes.strip()
            else "Phase 0 (init): the tree has only its root. Read the prompt analyse_kernel "
            f"(search={name!r}), then call propose_intents with the first intents and edit_tree "
            "(op=update on the root) with your analysis as its notes."
        )
        task = ws.search_task(s)
        if s.config.language not in task.seeds and not root.best_attempt_id:
            # said here, not only in the prompt, so a host knows before reading it that there is nothing to measure
            nxt += (
                f" The task has no {s.config.language} seed kernel: no seed step, and the first intent's first "
                "attempt is written from scratch (its speed is stated against eager PyTorch and torch.compile)."
            )
    elif refining:
        r = refining[0]
        phase = "refine"
        if r.over:
            nxt = (
                f"Refine of intent #{r.node_id} is over: {r.why}. Call finish_intent "
                f"(search={name!r}, node_id={r.node_id}) to close it and get the reflect prompt."
            )
        else:
            nxt = (
                f"Phase 2 (refine) of intent #{r.node_id}: write attempt {r.attempts + 1} of at most {r.cap} "
                f"(prompt implement_intent, node_id={r.node_id}), then benchmark it with node_id={r.node_id}. "
                f"Refine stops after {r.window} attempts in a row without a significant gain "
                f"(now {r.stagnant}); call finish_intent early only if you have no further implementation."
            )
            # said before the attempts are written: a batch of more would not all be recorded
            if r.interpreted:
                nxt += (
                    " Without a GPU no interpreter timing is ever a gain, so this phase ends after at most "
                    f"{min(r.window - r.stagnant, r.cap - r.attempts)} more attempt(s) (a batch's items beyond "
                    "them are evaluated, not recorded)."
                    if r.correct_code
                    else " Without a GPU no interpreter timing is ever a gain: only the phase's first correct "
                    "attempt resets that count (it has no correct code to build on yet)."
                )
    else:
        fin = await ws.store.cache_get(_FINISHED_KEY.format(search_id=s.id)) or {}
        if s.round > 0 and fin.get("round") == s.round and not fin.get("applied"):
            phase = "update"
            reflecting_on = fin.get("node_id")
            then = (
                f"then call final_evaluation: the budget is spent ({budget.exhausted})"
                if budget.exhausted
                else "then call select_action for the next round"
            )
            later = fin.get("later") or {}
            if later.get("edits") or later.get("new_intents"):
                nxt = (
                    f"Phase 3 (update) of round {s.round}: applied since intent #{fin.get('node_id')} ended: "
                    f"{later.get('edits', 0)} edit(s), {later.get('new_intents', 0)} new intent(s). Apply any more "
                    f"with edit_tree and propose_intents; {then}."
                )
            else:
                nxt = (
                    f"Phase 3 (update) of round {s.round}: reflect on intent #{fin.get('node_id')} (the reflect "
                    "prompt finish_intent returned, or the prompt reflect_and_edit) and apply your edits with "
                    f"edit_tree and propose_intents; {then}."
                )
        elif budget.exhausted:
            phase = "final" if not final_done else "done"
            nxt = (
                f"{spent_text(budget.exhausted, name)} {await final_cost_text(ws, s)}".strip()
                if not final_done
                else f"The budget is spent ({budget.exhausted}) and the final evaluation is recorded."
            )
        else:
            phase = "select"
            nxt = f"Phase 1 (select): call select_action (search={name!r}) to claim the next intent."
    if phase != "done" and (holder := await other_run(ws, s)) is not None:
        nxt = run_holds_text(s, holder, refining)  # not the steps the run takes itself
    return LoopState(
        search_id=s.id,
        search=name,
        status=s.status,
        round=s.round,
        phase=phase,
        refining=refining,
        reflecting_on=reflecting_on,
        budget=budget,
        timing_protocol=s.config.timing_protocol,
        best_lost=verdict.note() if verdict is not None else "",
        next=nxt,
    )


async def take_out(ws: Workspace, s: Search) -> str:
    """How to take out a search's kernels when it has no best: its attempts correct on the CPU interpreter (never
    timed, so never a best) by number, the latest first; '' when it has a best or none such."""
    if s.best_attempt_id is not None:
        return ""
    cpu = cpu_correct(await ws.store.list_attempts(s.id))
    if not cpu:
        return ""
    fmt = FORMAT_OF_STYLE[ws.search_task(s).style]
    shown = some_ids(cpu, newest_first=True)
    return (
        f"its attempts correct on the CPU interpreter ({shown}) can be taken out with export_kernel "
        f"(search={s.name!r}, format={fmt!r}, attempt={cpu[-1]})"
    )
