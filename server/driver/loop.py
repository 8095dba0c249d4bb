"""The built-in driver: init → rounds of select → refine → update → final evaluation (DESIGN.md §4).

Every step goes through tools/ (the same functions the MCP server and the CLI call), and every
result is committed to the store as soon as it exists, so a killed driver resumes with nothing lost
but the attempt in flight.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from gpu.compare import compare
from server.driver.display import Display
from server.driver.policies.base import (
    CallRecord,
    InitContext,
    IntentDeclined,
    Policy,
    PolicyError,
    UpdateContext,
    WriteContext,
)
from tools import contexts
from tools.benchmark import BenchmarkIn, benchmark
from tools.common import CandidateRef, summarize
from tools.errors import ToolFailure
from tools.workspace import Workspace
from worldmodel.edits import apply_edits, apply_intents
from worldmodel.errors import EditRejected
from worldmodel.models import Attempt, EditSpec, EvalSettings, Evaluation, Node, Search
from worldmodel.select import select_action

MAX_EDIT_RETRIES = 2
FINAL_TOP_K = 3


class DriverOptions(BaseModel):
    rounds: int | None = Field(None, ge=1)  # this run's round budget (default: the search's)
    attempts: int | None = Field(None, ge=1)
    wall_s: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, ge=1)
    usd: float | None = Field(None, gt=0)
    target_speedup: float | None = Field(None, gt=0)
    final_eval: bool = True


class FinalRow(BaseModel):
    attempt_id: int
    node_id: int | None
    status: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    workloads: list[str]
    device: str | None = None  # where it was timed: a GPU name or "cpu-interpreter"
    summary: str


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
        policy.on_call(self._store_call)

    # ------------------------------------------------------------------ accounting

    async def _store_call(self, rec: CallRecord) -> None:
        await self.ws.store.log_llm_call(search_id=self._search_id, **rec.model_dump())
        self.display.event(
            f"{rec.provider} {rec.phase}: {rec.tokens_in}+{rec.tokens_out} tokens, ${rec.cost_usd:.4f}, "
            f"{rec.latency_s:.1f}s" + (f" — {rec.error}" if rec.error else "")
        )

    async def _spent(self, search_id: int) -> tuple[int, float]:
        t = await self.ws.store.llm_totals(search_id)
        return t.tokens_in + t.tokens_out, t.usd

    # ------------------------------------------------------------------ the loop

    async def run(self, search_ref: int | str) -> DriverResult:
        s = await self.ws.search(search_ref)
        self._search_id = s.id
        await self.ws.store.set_search_status(s.id, "running")
        await self._recover(s)
        b = self._b = _Budget(self.opts, s)
        self.display.start(s, self.policy)
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
            stops = await asyncio.gather(*(self._lane(s.id, b) for _ in range(lanes)))
            stop = stops[0]
        except PolicyError as e:
            stop = f"policy stopped: {e}"
            self.display.event(stop)
            await self._recover(s)  # release the intent it was working on: open again for the next run
        result = await self._finish(s.id, stop, b)
        return result

    async def _lane(self, search_id: int, b: _Budget) -> str:
        """Select → refine → update until a budget or an empty frontier stops it; returns why it stopped."""
        while True:
            s = await self.ws.search(search_id)
            reason = await self._budget_stop(b, s)
            if reason:
                return reason
            sel = await select_action(self.ws.store, s.id, claim=True)
            if sel.node_id is None:
                if b.in_flight == 0:
                    return sel.reason
                # Another lane's update may still open new intents: wait for it rather than stop.
                async with b.changed:
                    await b.changed.wait()
                continue
            b.rounds_started += 1
            b.in_flight += 1
            try:
                await self.ws.store.bump_round(s.id)
                s = await self.ws.search(s.id)
                node = await self.ws.store.get_node(sel.node_id)
                self.display.round(s.round, node, sel.reason)
                outcomes, base = await self._refine(s, node)
                await self._update(s, node, outcomes, base)
                b.rounds_run += 1
            finally:
                b.in_flight -= 1
                async with b.changed:
                    b.changed.notify_all()

    async def _recover(self, s: Search) -> None:
        """A node left `active` by a killed run goes back to `open`: only its in-flight attempt is lost."""
        for n in await self.ws.store.list_nodes(s.id):
            if n.status == "active":
                await self.ws.store.set_node_status(n.id, "open")

    async def _budget_stop(self, b: _Budget, s: Search, *, refining: bool = False) -> str | None:
        o, sb = b.opts, s.config.budgets
        rounds = o.rounds if o.rounds is not None else sb.rounds
        if not refining and rounds is not None and b.rounds_started >= rounds:
            return f"round budget reached ({rounds})"
        n_att = len(await self.ws.store.attempt_speedups(s.id))  # a count: no evaluations loaded
        attempts = o.attempts if o.attempts is not None else sb.attempts
        if attempts is not None and n_att >= attempts:
            return f"attempt budget reached ({attempts})"
        wall = o.wall_s if o.wall_s is not None else sb.wall_s
        if wall is not None and time.monotonic() - b.started >= wall:
            return f"wall-time budget reached ({wall:.0f}s)"
        tokens, usd = await self._spent(s.id)
        tok_cap = o.tokens if o.tokens is not None else sb.tokens
        if tok_cap is not None and tokens >= tok_cap:
            return f"token budget reached ({tokens} >= {tok_cap})"
        usd_cap = o.usd if o.usd is not None else sb.usd
        if usd_cap is not None and usd >= usd_cap:
            return f"money budget reached (${usd:.2f} >= ${usd_cap:.2f})"
        target = o.target_speedup if o.target_speedup is not None else sb.target_speedup
        best = await self.ws.store.best_attempt(s.id)
        if target is not None and best is not None and (best.speedup or 0) >= target:
            return f"target speedup reached ({best.speedup:.2f}x >= {target:.2f}x)"
        return None

    # ------------------------------------------------------------------ phases

    async def _ensure_seed(self, s: Search) -> None:
        """Measure the task's seed once, on the root: the baseline every intent starts from."""
        root = await self.ws.store.root(s.id)
        if root.best_attempt_id is not None or await self.ws.store.list_attempts(s.id, root.id):
            return
        seed = self.ws.task(s.task).seeds.get(s.config.language)
        if seed is None:
            return
        self.display.event("measuring the seed candidate")
        out = await self._evaluate(s, root.id, seed, None, "seed")
        self.display.attempt(root, out[1])

    async def _init(self, s: Search) -> None:
        nodes = await self.ws.store.list_nodes(s.id)
        if len(nodes) > 1:
            return
        root = nodes[0]
        seed, _ = await contexts.base_source(self.ws, s, root)
        ctx = InitContext(
            task=await contexts.task_brief(self.ws, s),
            seed_source=seed,
            tunables=contexts.tunables_of(seed),
            tree_view=await contexts.tree_view(self.ws, s.id),
        )
        res = await self.policy.init(ctx)
        await apply_edits(
            self.ws.store,
            s.id,
            [EditSpec(op="update", node_id=root.id, notes=res.analysis[:4000])],
            author=self._author(),
            round=s.round,
        )
        problems: list[str] = []
        intents = res.intents
        for _ in range(MAX_EDIT_RETRIES + 1):
            try:
                await apply_intents(
                    self.ws.store,
                    s.id,
                    intents,
                    author=self._author(),
                    round=s.round,
                    reason="initial intents",
                )
                self.display.event(f"init: {len(intents)} intents")
                return
            except EditRejected as e:
                problems = e.problems
                self.display.event(f"init intents rejected: {'; '.join(problems)[:300]}")
                # Ask again with the reasons (only keep what the validator accepted is not our call to guess).
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

    async def _evaluate(
        self, s: Search, node_id: int | None, source: str, base_id: int | None, author: str
    ) -> tuple[str, Attempt | None, Evaluation]:
        try:
            out = await benchmark(
                self.ws,
                BenchmarkIn(
                    search=s.id,
                    node_id=node_id,
                    candidate=CandidateRef(source=source, language=s.config.language),
                    base_attempt_id=base_id,
                    author=author,
                ),
            )
        except ToolFailure as e:
            # The source never reached the evaluator (it does not parse, say): feed that back as a result.
            ev = Evaluation(status="error", error=str(e))
            return str(e), None, ev
        att = await self.ws.store.get_attempt(out.attempt_id) if out.attempt_id else None
        return out.summary, att, out.evaluation

    async def _refine(self, s: Search, node: Node) -> tuple[list[Attempt], Attempt | None]:
        base_src, base = await contexts.base_source(self.ws, s, node)
        best_ev: Evaluation | None = base.evaluation if base and base.evaluation else None
        best_src, best_id = base_src, base.id if base else None
        brief = await contexts.task_brief(self.ws, s)
        tunables = contexts.tunables_of(base_src)
        feedback = ""
        stagnant = 0
        attempts: list[Attempt] = []
        cap = s.config.max_attempts_per_intent
        i = 0
        while i < cap and stagnant < s.config.stagnation:
            if i > 0 and self._b is not None and await self._budget_stop(self._b, s, refining=True):
                break
            width = max(1, min(s.config.branching, cap - i))
            ctxs = [
                WriteContext(
                    task=brief,
                    intent_id=node.id,
                    intent_title=node.title,
                    intent_rationale=node.rationale,
                    intent_params=node.params,
                    base_source=best_src,
                    base_summary=summarize(best_ev) if best_ev else "",
                    feedback=feedback,
                    attempt_index=i + k,
                    tunables=tunables,
                    tree_view=await contexts.tree_view(self.ws, s.id),
                )
                for k in range(width)
            ]
            try:
                codes = await asyncio.gather(*(self.policy.write_code(c) for c in ctxs))
            except IntentDeclined as e:
                # The policy cannot implement this intent; the search goes on without it.
                self.display.event(f"intent #{node.id} declined: {e}")
                await apply_edits(
                    self.ws.store,
                    s.id,
                    [
                        EditSpec(
                            op="update",
                            node_id=node.id,
                            notes=(node.notes + f"\n[declined] {e}").strip()[:4000],
                        )
                    ],
                    author=self._author(),
                    round=s.round,
                )
                break
            results = [await self._evaluate(s, node.id, c.source, best_id, self._author()) for c in codes]
            i += width
            improved = False
            for (summary, att, ev), code in zip(results, codes, strict=True):
                if att is not None:
                    attempts.append(att)
                self.display.attempt(node, att, ev)
                feedback = summary
                if ev.status == "ok" and (
                    best_ev is None or best_ev.status != "ok" or compare(ev, best_ev).faster
                ):
                    best_ev, best_src, best_id = ev, code.source, att.id if att else best_id
                    improved = True
            stagnant = 0 if improved else stagnant + width
        correct = any(a.evaluation is not None and a.evaluation.status == "ok" for a in attempts)
        await self.ws.store.close_node(node.id, "closed" if correct else "failed")
        return attempts, base

    async def _update(self, s: Search, node: Node, attempts: list[Attempt], base: Attempt | None) -> None:
        node = await self.ws.store.get_node(node.id)
        nodes = await self.ws.store.list_nodes(s.id)
        best = await self.ws.store.best_attempt(s.id)
        ctx = UpdateContext(
            task=await contexts.task_brief(self.ws, s),
            round=s.round,
            intent_id=node.id,
            intent_title=node.title,
            intent_params=node.params,
            prediction=node.expected_speedup,
            outcomes=[await contexts.outcome_of(self.ws, a, base) for a in attempts],
            history=await contexts.history(self.ws, s.id),
            tree_view=await contexts.tree_view(self.ws, s.id),
            open_intents=contexts.open_intents(nodes),
            best_speedup=best.speedup if best else None,
            tunables=contexts.tunables_of((await contexts.base_source(self.ws, s, node))[0]),
        )
        for _ in range(MAX_EDIT_RETRIES + 1):
            res = await self.policy.update(ctx)
            try:
                if res.edits:
                    await apply_edits(self.ws.store, s.id, res.edits, author=self._author(), round=s.round)
                if res.new_intents:
                    await apply_intents(
                        self.ws.store,
                        s.id,
                        res.new_intents,
                        author=self._author(),
                        round=s.round,
                        reason=res.reflection[:2000],
                    )
                self.display.event(
                    f"update: {len(res.edits)} edits, {len(res.new_intents)} new intents"
                    + (f" — {res.reflection[:160]}" if res.reflection else "")
                )
                return
            except EditRejected as e:
                self.display.event(f"update rejected, asking again: {'; '.join(e.problems)[:300]}")
                ctx = ctx.model_copy(update={"rejected": e.problems})
        self.display.event("update: edits still invalid after retries; tree left unchanged this round")

    # ------------------------------------------------------------------ final

    async def _finish(self, search_id: int, stop: str, b: _Budget) -> DriverResult:
        s = await self.ws.search(search_id)
        final: list[FinalRow] = []
        if self.opts.final_eval and not stop.startswith("policy stopped"):
            final = await self._final_eval(s)
        await self.ws.store.set_search_status(
            s.id, "done" if stop.startswith(("no open", "target")) else "stopped"
        )
        best = await self.ws.store.best_attempt(s.id)
        tokens, usd = await self._spent(s.id)
        res = DriverResult(
            search_id=s.id,
            stop_reason=stop,
            rounds_run=b.rounds_run,
            attempts=len(await self.ws.store.attempt_speedups(s.id)),
            best_attempt_id=best.id if best else None,
            best_speedup_vs_eager=best.speedup if best else None,
            device=best.evaluation.timings[0].device
            if best and best.evaluation and best.evaluation.timings
            else None,
            final=final,
            unpriced_calls=(await self.ws.store.llm_totals(s.id)).unpriced_calls,
            tokens=tokens,
            usd=usd,
            wall_s=time.monotonic() - b.started,
        )
        await self.ws.store.cache_put(f"driver-result:{s.id}", res.model_dump(mode="json"))
        self.display.finish(res)
        return res

    async def _final_eval(self, s: Search) -> list[FinalRow]:
        """Re-measure the best few candidates on every workload (held-out too) with fresh inputs."""
        atts = [a for a in await self.ws.store.list_attempts(s.id) if a.speedup is not None]
        atts.sort(key=lambda a: a.speedup or 0.0, reverse=True)
        seen: set[str] = set()
        top = []
        for a in atts:
            if a.candidate_id not in seen:
                seen.add(a.candidate_id)
                top.append(a)
            if len(top) >= FINAL_TOP_K:
                break
        if not top:
            return []
        task = self.ws.task(s.task)
        sb = await self.ws.sandbox()
        hw = await sb.hardware()
        names = [task.smoke().name] if hw.cpu_mode else [w.name for w in task.workloads if w.split != "smoke"]
        rows = []
        for a in top:
            cand = await self.ws.store.get_candidate(a.candidate_id)
            settings = EvalSettings(seed=(s.config.seed * 7919 + 17) % 2**31, workloads=names, final=True)
            self.display.event(f"final evaluation of attempt {a.id} on {len(names)} workloads")
            ev = await sb.evaluate(cand, task, settings, timing=True)
            rows.append(
                FinalRow(
                    attempt_id=a.id,
                    node_id=a.node_id,
                    status=ev.status,
                    speedup_vs_eager=ev.speedup_vs_eager,
                    speedup_vs_compile=ev.speedup_vs_compile,
                    workloads=names,
                    device=ev.timings[0].device if ev.timings else None,
                    summary=summarize(ev),
                )
            )
        rows.sort(key=lambda r: (r.status == "ok", r.speedup_vs_eager or 0.0), reverse=True)
        await self.ws.store.cache_put(f"final:{s.id}", {"rows": [r.model_dump() for r in rows]})
        return rows

    def _author(self) -> str:
        if self.policy.name in ("tuner",):
            return "tuner"
        return f"llm:{self.policy.model or self.policy.name}"
