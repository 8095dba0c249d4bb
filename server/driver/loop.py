"""The built-in driver: init → rounds of select → refine → update → final evaluation.

Every step goes through tools/ — the same functions an MCP host or a person calls, with the same loop
rules (tools/loop/state.py: the attempt cap, the stagnation window, the budgets) — and every result is
committed to the store as soon as it exists, so a killed driver resumes with nothing lost but the
attempt in flight, and a search can change hands between the driver, a host and a person at any point.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ksearch.server.driver.display import Display, Limits, first_sentence
from ksearch.server.driver.policies.base import (
    CallRecord,
    InitContext,
    IntentDeclined,
    Policy,
    PolicyError,
    UpdateContext,
)
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.benchmark_batch import BatchItem, BenchmarkBatchIn, benchmark_batch
from ksearch.tools.budgets import keep_budgets
from ksearch.tools.common import CandidateRef
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.final_eval import FinalEvalIn, FinalRow, end_search, final_evaluation
from ksearch.tools.finish_intent import close_refine
from ksearch.tools.llm_calls import record_llm_call
from ksearch.tools.loop import state as loop
from ksearch.tools.loop.declines import decline_intent
from ksearch.tools.loop.runs import hold_run, keep_run_result, mark_running, release_claims
from ksearch.tools.prompting import contexts
from ksearch.tools.prompting.phases import init_context
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.records import LLMTotals
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Attempt, EditSpec, Evaluation, IntentSpec, Node, Search

MAX_EDIT_RETRIES = 2


class DriverOptions(BaseModel):
    rounds: int | None = Field(None, ge=1)  # this run's round budget (default: the search's)
    attempts: int | None = Field(None, ge=1)
    wall_s: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, ge=1)
    usd: float | None = Field(None, gt=0)
    target_speedup: float | None = Field(None, gt=0)
    final_eval: bool = True


class DriverResult(BaseModel):
    search_id: int
    stop_reason: str
    rounds_run: int
    attempts: int
    best_attempt_id: int | None
    best_speedup_vs_eager: float | None
    device: str | None = None  # where the best attempt was timed
    final: list[FinalRow] = Field(default_factory=list)
    tokens: int = 0
    usd: float = 0.0
    unpriced_calls: int = 0  # calls to models without a known price: `usd` leaves them out
    llm: LLMTotals | None = None  # the search's model calls: tokens and dollars, with the prompt cache's part
    wall_s: float = 0.0


@dataclass
class _Budget:
    opts: DriverOptions
    search: Search
    started: float = field(default_factory=time.monotonic)
    rounds_started: int = 0
    rounds_run: int = 0
    in_flight: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class Driver:
    def __init__(
        self, ws: Workspace, policy: Policy, display: Display, opts: DriverOptions | None = None
    ) -> None:
        self.ws = ws
        self.policy = policy
        self.display = display
        self.opts = opts or DriverOptions()
        self._search_id: int | None = None
        self._b: _Budget | None = None
        self._start_round = 0  # the search's round when this run started
        self._declined: dict[int, str] = {}  # intents the policy declined before any attempt, and why
        policy.on_call(self._store_call)

    # ------------------------------------------------------------------ accounting

    async def _store_call(self, rec: CallRecord) -> None:
        await record_llm_call(self.ws, self._search_id, rec)
        self.display.llm_call(rec)

    # ------------------------------------------------------------------ the loop

    async def run(self, search_ref: int | str) -> DriverResult:
        s = await self.ws.search(search_ref)
        self._search_id = s.id
        records = self.ws.records
        # Hold the search's run for this process (refused while another live process runs it; a heartbeat
        # while it runs), so a search left `running` by a killed process reads as interrupted (tools/loop/runs.py).
        async with hold_run(self.ws, s.id, on_missed_beat=self.display.event):
            await mark_running(self.ws, s.id)
            s = await self._recover(s, say=True)  # its round may have been given back
            s = await self._persist_budgets(s)
            b = self._b = _Budget(self.opts, s)
            held = await records.attempt_speedups(s.id)
            self.display.start(
                s,
                self.policy,
                best=await records.best_attempt(s.id),
                cpu_correct=len(held.cpu_interpreted),
                attempts=len(held),
                limits=self._limits(s),
            )
            stop = "done"
            try:
                await self._ensure_seed(s)
                await self._init(s)
                # One lane per sandbox worker (one per GPU): several intents are refined at once, and each
                # lane's update lands in the tree as soon as its intent is done.
                hw = await (await self.ws.sandbox()).hardware()
                if not hw.isolation.startswith("namespaces"):
                    self.display.event(f"candidate isolation: {hw.isolation}")
                lanes = max(1, hw.workers)
                stops = await asyncio.gather(*(self._lane(s.id, b, lanes) for _ in range(lanes)))
                stop = stops[0]
            except PolicyError as e:
                stop = f"policy stopped: {e}"
                self.display.event(stop)
                await self._recover(s)  # release the intent it was working on: open again for the next run
            except BaseException:
                # Ctrl-C (the CLI cancels this task), a crash: the attempt in flight is abandoned (nothing
                # half-written: each record is one transaction), the claimed intent goes back to open,
                # and the search is `stopped`, not left `running`.
                self.display.close()
                await self._recover(s)
                await end_search(self.ws, s, "stopped")
                raise
            return await self._finish(s.id, stop, b)

    async def _lane(self, search_id: int, b: _Budget, lanes: int = 1) -> str:
        """Select → refine → update until a budget or an empty frontier stops it; returns why it stopped. The
        claim itself keeps the search's round budget and its `lanes` in the database: a claim refused there
        (another process claimed the last lane or started the last round) stops the lane with the refusal."""
        while True:
            s = await self.ws.search(search_id)
            reason = await self._budget_stop(b, s)
            if reason:
                return reason
            self.display.phase("select")
            try:
                sel = await select_action(
                    self.ws,
                    SelectActionIn(search=s.id, skip=sorted(self._declined)),
                    lanes=lanes,
                    budget_checked=True,
                )
            except ToolFailure as e:
                if b.in_flight == 0:
                    return str(e)
                async with b.changed:  # this run's own lanes hold the claims: one of them ends first
                    await b.changed.wait()
                continue
            if sel.node is None:
                if b.in_flight == 0:
                    return sel.reason + self._waiting()
                # Another lane's update may still open new intents: wait for it rather than stop.
                async with b.changed:
                    await b.changed.wait()
                continue
            b.rounds_started += 1
            b.in_flight += 1
            try:
                node = sel.node
                self.display.round(sel.round, node, sel.reason)
                if await self._refine(await self.ws.search(s.id), node):
                    b.rounds_started -= 1  # declined before any attempt: the round was given back
                    self.display.round_given_back(node)
                    continue
                await self._update(await self.ws.search(s.id), node)
                b.rounds_run += 1
                self.display.round_done(node)
            finally:
                b.in_flight -= 1
                async with b.changed:
                    b.changed.notify_all()

    async def _recover(self, s: Search, *, say: bool = False) -> Search:
        """A node left `active` by a stopped or killed run goes back to `open`: only its in-flight attempt is lost,
        and a round that recorded no attempt yet is given back (resumed by the next claim, not counted again)."""
        for r in await release_claims(self.ws, s.id):
            if say and r.given_back:
                self.display.event(
                    f"round {r.round} (intent #{r.node.id}) was interrupted before its first attempt: "
                    "it starts again, not counted twice"
                )
        return await self.ws.search(s.id)

    async def _persist_budgets(self, s: Search) -> Search:
        """This run's budget options become the search's, so that every face (status, the page, the MCP
        tools) shows the limits the run keeps: rounds as those started before it plus this run's, attempts,
        tokens, money and the target as given (they count the whole search). A run's wall time stays its own."""
        o = self.opts
        self._start_round = s.round
        values: dict[str, Any] = {"rounds": s.round + o.rounds} if o.rounds is not None else {}
        for name in ("attempts", "tokens", "usd", "target_speedup"):
            if getattr(o, name) is not None:
                values[name] = getattr(o, name)
        return await keep_budgets(self.ws, s.id, values, author=f"run ({self._author()})")

    def _limits(self, s: Search) -> Limits:
        """This run's budgets as `_budget_stop` applies them, for the display: the rounds this run may start
        (what the search's round budget leaves), the others as the search's."""
        o, sb = self.opts, s.config.budgets
        left = None if sb.rounds is None else max(0, sb.rounds - self._start_round)
        return Limits(
            rounds=o.rounds if o.rounds is not None else left,
            attempts=o.attempts if o.attempts is not None else sb.attempts,
            wall_s=o.wall_s if o.wall_s is not None else sb.wall_s,
            tokens=o.tokens if o.tokens is not None else sb.tokens,
            usd=o.usd if o.usd is not None else sb.usd,
        )

    async def _budget_stop(self, b: _Budget, s: Search, *, refining: bool = False) -> str | None:
        """The search's budgets (tools/loop/state.py), with this run's options in place of the search's where
        given; rounds count the rounds this run started."""
        o, sb, lim = b.opts, s.config.budgets, self._limits(s)
        if not refining and lim.rounds is not None and b.rounds_started >= lim.rounds:
            return f"round budget reached ({s.round} of {sb.rounds} rounds started)"
        state = await loop.budget_state(self.ws, s)
        state.rounds = None  # counted above, per run
        state.attempts, state.tokens, state.usd = lim.attempts, lim.tokens, lim.usd
        state.target_speedup = o.target_speedup if o.target_speedup is not None else sb.target_speedup
        return loop.exhausted(state, wall_s=lim.wall_s, started=b.started)

    # ------------------------------------------------------------------ phases

    async def _ensure_seed(self, s: Search) -> None:
        """Measure the task's seed once, on the root: the baseline every intent starts from. A seedless
        task (every KernelBench, GPU MODE and FlashInfer-Bench task) starts from the reference instead."""
        root = await self.ws.records.root(s.id)
        if root.best_attempt_id is not None or await self.ws.records.list_attempts(s.id, root.id):
            return
        seed = self.ws.search_task(s).seeds.get(s.config.language)
        if seed is None:
            self.display.event("no seed candidate: the first intents are written from the reference")
            return
        self.display.phase("init")
        self.display.event("measuring the seed candidate")
        out = await self._evaluate(s, root.id, seed, is_seed=True)
        self.display.attempt(root, out[1], out[2])

    async def _init(self, s: Search) -> None:
        nodes = await self.ws.records.list_nodes(s.id)
        if len(nodes) > 1:
            return
        root = nodes[0]
        self.display.phase("init")
        ctx: InitContext = await init_context(self.ws, s.id)
        res = await self.policy.init(ctx)
        if res.analysis.strip():
            await edit_tree(
                self.ws,
                EditTreeIn(
                    search=s.id,
                    edits=[EditSpec(op="update", node_id=root.id, notes=res.analysis[:4000])],
                    author=self._author(),
                ),
            )
        problems: list[str] = []
        intents = res.intents
        for _ in range(MAX_EDIT_RETRIES + 1):
            try:
                await self._propose(s, intents, "initial intents")
                self.display.event(f"init: {len(intents)} intents")
                return
            except ToolFailure as e:
                problems = e.problems or [str(e)]
                self.display.event(f"init intents rejected: {'; '.join(problems)[:300]}")
                # Ask again with the reasons (keeping only what the validator accepted is not ours to guess).
                upd = await self.policy.update(
                    UpdateContext(
                        task=ctx.task,
                        round=s.round,
                        intent_id=root.id,
                        intent_title="initial intents",
                        outcomes=[],
                        tree_view=await contexts.tree_view(self.ws, s.id),
                        rejected=problems,
                    )
                )
                intents = upd.new_intents
        raise PolicyError(
            f"the policy's initial intents were rejected {MAX_EDIT_RETRIES + 1} times: {problems}"
        )

    async def _propose(self, s: Search, intents: list[IntentSpec], reason: str) -> None:
        if not intents:
            raise ToolFailure("no intents", problems=["the answer held no intents; give at least one"])
        await propose_intents(
            self.ws,
            ProposeIntentsIn(search=s.id, intents=intents, author=self._author(), reason=reason[:2000]),
        )

    async def _evaluate(
        self, s: Search, node_id: int | None, source: str, *, is_seed: bool = False
    ) -> tuple[str, Attempt | None, Evaluation, loop.RefineState | None]:
        language = s.config.language
        # The seed goes as {seed: true}, as a host's does: the tools credit it to "seed", not to the policy.
        cand = (
            CandidateRef(seed=True, language=language)
            if is_seed
            else CandidateRef(source=source, language=language)
        )
        try:
            out = await benchmark(
                self.ws,
                BenchmarkIn(search=s.id, node_id=node_id, candidate=cand, author=self._author()),
            )
        except (ToolFailure, NotFound) as e:
            # Refused before anything was recorded (the phase is over, say): report it as a result.
            ev = Evaluation(status="error", error=str(e))
            return str(e), None, ev, None
        att = await self.ws.records.get_attempt(out.attempt_id) if out.attempt_id else None
        return out.summary, att, out.evaluation, out.refine

    async def _evaluate_batch(
        self, s: Search, node_id: int, sources: list[str]
    ) -> list[tuple[str, Attempt | None, Evaluation, loop.RefineState | None]]:
        """Several implementations of one intent benchmarked in one batch, recorded in order (tools.benchmark_batch):
        what `_evaluate` says of each; an item the phase's end left unrecorded comes back as refused."""
        items = [
            BatchItem(candidate=CandidateRef(source=src, language=s.config.language), node_id=node_id)
            for src in sources
        ]
        try:
            out = await benchmark_batch(
                self.ws, BenchmarkBatchIn(search=s.id, items=items, author=self._author())
            )
        except (ToolFailure, NotFound) as e:
            return [(str(e), None, Evaluation(status="error", error=str(e)), None)]
        said: list[tuple[str, Attempt | None, Evaluation, loop.RefineState | None]] = []
        for r in out.results:
            if r.result is None or not r.recorded:
                ev = (
                    r.result.evaluation
                    if r.result is not None
                    else Evaluation(status="error", error=r.refused)
                )
                said.append((r.refused, None, ev, None))
                continue
            att = await self.ws.records.get_attempt(r.result.attempt_id) if r.result.attempt_id else None
            said.append((r.result.summary, att, r.result.evaluation, r.result.refine))
        return said

    def _waiting(self) -> str:
        if not self._declined:
            return ""
        ids = ", ".join(f"#{n}" for n in sorted(self._declined))
        return f"; {ids} wait for a model or a person (declined by the {self.policy.name} policy)"

    async def _decline(self, s: Search, node: Node, why: str, attempts: int) -> bool:
        """The policy cannot implement `node` (tools.declines.decline_intent records it). Before any attempt the
        intent stays open, marked as waiting for a model or a person, its round is given back, and this run
        passes it over (True). After attempts its refine phase just ends (False)."""
        given_back = await decline_intent(
            self.ws, s, node, why, by=self.policy.name, attempts=attempts, author=self._author()
        )
        if not given_back:
            self.display.event(f"intent #{node.id} declined after {attempts} attempts: {why}")
            return False
        self._declined[node.id] = why
        self.display.event(
            f"intent #{node.id} declined: {why}; it stays open for a model or a person, no round spent"
        )
        return True

    async def _refine(self, s: Search, node: Node) -> bool:
        """Attempts on the claimed intent until the loop's rule (cap, stagnation window) or a budget ends
        the phase, then close it. The rule is the one benchmark reports to any caller. True when the policy
        declined the intent before any attempt (it is open again; see `_decline`)."""
        brief = await contexts.task_brief(self.ws, s)
        state = await loop.refine_state(self.ws, s, node)
        while not state.over:
            if (
                state.attempts > 0
                and self._b is not None
                and await self._budget_stop(self._b, s, refining=True)
            ):
                break
            width = max(1, min(s.config.branching, state.cap - state.attempts))
            base_ctx = await contexts.write_context(self.ws, s, node, brief=brief)
            ctxs = [
                base_ctx.model_copy(update={"attempt_index": base_ctx.attempt_index + k})
                for k in range(width)
            ]
            try:
                codes = await asyncio.gather(*(self.policy.write_code(c) for c in ctxs))
            except IntentDeclined as e:
                # The policy cannot implement this intent; the search goes on without it.
                if await self._decline(s, node, str(e), state.attempts):
                    return True
                break
            refused = False
            if len(codes) > 1:  # written at once: evaluated at once (compiles and CPU workers overlap)
                outcomes = await self._evaluate_batch(s, node.id, [c.source for c in codes])
            else:
                outcomes = [await self._evaluate(s, node.id, codes[0].source)]
            for summary, att, ev, after in outcomes:
                self.display.attempt(node, att, ev)
                if after is None:  # refused: the phase ended under us (a person closed or pruned it)
                    self.display.event(f"intent #{node.id}: {summary[:300]}")
                    refused = True
                    break
                state = after
            if refused:
                break
        current = await self.ws.records.get_node(node.id)
        if current.status == "active":
            try:
                await close_refine(self.ws, s, current, author=self._author())
            except (
                ToolFailure
            ) as e:  # finished meanwhile by another process (a host, a person): said, not fatal
                self.display.event(first_sentence(str(e)))
        return False

    async def _update(self, s: Search, node: Node) -> None:
        node = await self.ws.records.get_node(node.id)
        self.display.phase("update", node)
        ctx = await contexts.update_context(self.ws, s, node)
        applied: int | None = None  # edits that went in: a retry asks only for what was refused
        for _ in range(MAX_EDIT_RETRIES + 1):
            res = await self.policy.update(ctx)
            try:
                if res.edits and applied is None:
                    await edit_tree(self.ws, EditTreeIn(search=s.id, edits=res.edits, author=self._author()))
                    applied = len(res.edits)
                if res.new_intents:
                    await self._propose(s, res.new_intents, res.reflection)
                self.display.event(
                    f"update: {applied or 0} edits, {len(res.new_intents)} new intents"
                    + (f" — {first_sentence(res.reflection)}" if res.reflection else "")
                )
                return
            except ToolFailure as e:
                problems = e.problems or [str(e)]
                self.display.event(f"update rejected, asking again: {'; '.join(problems)[:300]}")
                if applied is not None:
                    # the edits are in the tree: sent again they would be logged twice (a prune refused)
                    problems = [
                        *problems,
                        f"your {applied} edit(s) were applied; only the new intents were refused: send the "
                        "new intents again, corrected (edits in this answer are ignored)",
                    ]
                ctx = ctx.model_copy(update={"rejected": problems})
        self.display.event(
            f"update: {applied} edits applied; the new intents still invalid after retries, none added"
            if applied is not None
            else "update: edits still invalid after retries; tree left unchanged this round"
        )

    # ------------------------------------------------------------------ final

    async def _finish(self, search_id: int, stop: str, b: _Budget) -> DriverResult:
        s = await self.ws.search(search_id)
        final: list[FinalRow] = []
        if self.opts.final_eval and not stop.startswith("policy stopped"):
            self.display.phase("final")
            self.display.event("final evaluation of the best candidates on every workload")
            out = await final_evaluation(self.ws, FinalEvalIn(search=s.id))
            final = out.rows
            if out.best_lost:  # the best failed on a workload the search never measured: it is not the result
                self.display.event(out.best_lost)
        else:
            stopped = stop.startswith("policy stopped")  # the policy could not go on: resumable, not done
            await end_search(self.ws, s, "stopped" if stopped else None)
        best = await self.ws.records.best_attempt(s.id)
        llm = await self.ws.records.llm_totals(s.id)
        res = DriverResult(
            search_id=s.id,
            stop_reason=stop,
            rounds_run=b.rounds_run,
            attempts=len(await self.ws.records.attempt_speedups(s.id)),
            best_attempt_id=best.id if best else None,
            best_speedup_vs_eager=best.speedup if best else None,
            device=best.evaluation.timings[0].device
            if best and best.evaluation and best.evaluation.timings
            else None,
            final=final,
            unpriced_calls=llm.unpriced_calls,
            tokens=llm.tokens_in + llm.tokens_out,
            usd=llm.usd,
            llm=llm,
            wall_s=time.monotonic() - b.started,
        )
        await keep_run_result(self.ws, s.id, res)
        self.display.finish(res)
        return res

    def _author(self) -> str:
        if self.policy.name in ("tuner",):
            return "tuner"
        return f"llm:{self.policy.model or self.policy.name}"
