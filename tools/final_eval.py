"""final_evaluation: re-measure a search's best few candidates on every workload (held-out included) with
fresh inputs, and end the search. The search workloads may have been overfitted; these numbers are the result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools import loop
from tools.common import summarize
from tools.workspace import Workspace
from worldmodel.models import Attempt, EvalSettings, Search
from worldmodel.store import SearchStatus

FINAL_TOP_K = 3


class FinalEvalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search: int | str = Field(description="Search id or name")
    top_k: int = Field(FINAL_TOP_K, ge=1, le=10, description="How many of the best distinct candidates")


class FinalRow(BaseModel):
    attempt_id: int
    node_id: int | None
    status: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    workloads: list[str]
    device: str | None = None  # where it was timed: a GPU name or "cpu-interpreter"
    summary: str


class FinalOut(BaseModel):
    rows: list[FinalRow] = Field(description="Best first: correct ones by speedup vs eager")
    next: str = ""


async def final_evaluation(
    ws: Workspace, inp: FinalEvalIn, *, status: SearchStatus | None = None
) -> FinalOut:
    """Re-evaluate the top candidates, then end the search: `done` when nothing is left open or the target
    speedup was reached, `stopped` when a budget ended it (more budget would let it go on). The driver
    passes the status its own stop reason gives."""
    s = await ws.search(inp.search)
    status = status or await end_status(ws, s)
    atts = [a for a in await ws.store.list_attempts(s.id) if a.evaluation and a.evaluation.status == "ok"]
    # GPU-timed attempts by speedup; CPU-interpreter timings never rank (the latest correct ones go first).
    atts.sort(key=lambda a: (0.0, a.id) if _cpu(a) else (1.0 + (a.speedup or 0.0), a.id), reverse=True)
    seen: set[str] = set()
    top = []
    for a in atts:
        if a.candidate_id not in seen:
            seen.add(a.candidate_id)
            top.append(a)
        if len(top) >= inp.top_k:
            break
    rows: list[FinalRow] = []
    if top:
        task = ws.task(s.task)
        sb = await ws.sandbox()
        hw = await sb.hardware()
        names = [task.smoke().name] if hw.cpu_mode else [w.name for w in task.workloads if w.split != "smoke"]
        for a in top:
            cand = await ws.store.get_candidate(a.candidate_id)
            settings = EvalSettings(seed=(s.config.seed * 7919 + 17) % 2**31, workloads=names, final=True)
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
        if all(r.device != "cpu-interpreter" for r in rows if r.status == "ok"):
            rows.sort(key=lambda r: (r.status == "ok", r.speedup_vs_eager or 0.0), reverse=True)
        else:  # interpreter timings never rank: correct ones first, in the order they were chosen
            rows.sort(key=lambda r: r.status != "ok")
    await ws.store.cache_put(f"final:{s.id}", {"rows": [r.model_dump() for r in rows]})
    await ws.store.set_search_status(s.id, status)
    nxt = (
        "The search is over. Its result is the final evaluation above; get_tree shows the tree."
        if rows
        else "No correct, timed candidate to re-evaluate: the search ends without a result."
    )
    return FinalOut(rows=rows, next=nxt)


def _cpu(a: Attempt) -> bool:
    ev = a.evaluation
    return ev is not None and bool(ev.timings) and ev.timings[0].device == "cpu-interpreter"


async def end_status(ws: Workspace, s: Search) -> SearchStatus:
    """How a search ends: `done` when nothing is left open or the target speedup was reached, `stopped`
    when a budget ended it (more budget would let it go on)."""
    b = await loop.budget_state(ws, s)
    open_left = any(
        n.kind == "intent" and n.status == "open" and not n.vetoed for n in await ws.store.list_nodes(s.id)
    )
    target = b.exhausted is not None and b.exhausted.startswith("target")
    return "done" if target or not open_left else "stopped"
