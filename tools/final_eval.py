"""final_evaluation: re-measure a search's best few candidates on every workload (held-out included) with
fresh inputs, and end the search. The search workloads may have been overfitted; these numbers are the result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.common import summarize
from tools.workspace import Workspace
from worldmodel.models import Attempt, EvalSettings

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


async def final_evaluation(ws: Workspace, inp: FinalEvalIn, *, status: str = "done") -> FinalOut:
    """Re-evaluate the top candidates; the search is then marked `status` (the driver passes `stopped`
    when a budget, not an empty frontier, ended it)."""
    s = await ws.search(inp.search)
    atts = [a for a in await ws.store.list_attempts(s.id) if a.evaluation and a.evaluation.status == "ok"]
    # GPU-timed attempts by speedup; CPU-interpreter timings never rank (the latest correct ones go first).
    atts.sort(key=lambda a: (a.speedup is not None and not _cpu(a), a.speedup or 0.0, a.id), reverse=True)
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
        rows.sort(key=lambda r: (r.status == "ok", r.speedup_vs_eager or 0.0), reverse=True)
    await ws.store.cache_put(f"final:{s.id}", {"rows": [r.model_dump() for r in rows]})
    await ws.store.set_search_status(s.id, status)  # type: ignore[arg-type]
    nxt = (
        "The search is over. Its result is the final evaluation above; get_tree shows the tree."
        if rows
        else "No correct, timed candidate to re-evaluate: the search ends without a result."
    )
    return FinalOut(rows=rows, next=nxt)


def _cpu(a: Attempt) -> bool:
    ev = a.evaluation
    return ev is not None and bool(ev.timings) and ev.timings[0].device == "cpu-interpreter"
