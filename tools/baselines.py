"""baselines: the eager and torch.compile baselines a search's speedups divide by, and their re-measurement.

A search has one baseline per workload, pinned by its first evaluation there (worldmodel/baselines.py).
`remeasure_baselines` measures them anew in a fresh process, pins the new readings as the search's next generation
and restates every attempt's speedups against them: a ranking never mixes two readings of one baseline.
"""

from __future__ import annotations

from pydantic import Field

from ksearch.tools.common import baseline_settings
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import baselines
from ksearch.worldmodel.baselines import PinnedBaseline, Restated


class BaselinesIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    remeasure: bool = Field(
        False,
        description="Measure the baselines anew (a fresh process, on this machine's GPU), pin them as the search's "
        "next generation and restate every attempt's speedups against them",
    )


class BaselinesOut(ToolModel):
    search: str
    """The search's name."""
    generation: int | None = None
    """The pinned generation its speedups divide by (None: nothing pinned yet)."""
    baselines: list[PinnedBaseline] = Field(default_factory=list)
    """Per workload: the eager and torch.compile readings, when and on which GPU."""
    restated: Restated | None = None
    """With `remeasure`: what the re-measurement replaced and how many attempts it restated."""
    text: str = ""
    """The same in words."""


async def remeasure_baselines(ws: Workspace, inp: BaselinesIn) -> BaselinesOut:
    """The search's pinned baselines; with `remeasure`, measured anew and every attempt restated against them."""
    s = await ws.search(inp.search)
    pins = await baselines.pinned(ws.store, s.id)
    restated: Restated | None = None
    lines: list[str] = []
    if inp.remeasure:
        task = ws.search_task(s)
        sb = await ws.sandbox()
        measure = getattr(sb, "remeasure_baselines", None)
        if measure is None:
            raise ToolFailure(
                "this sandbox (a Ray cluster) cannot re-measure baselines; run it on a local GPU"
            )
        if await sb.runs_without_gpu():
            raise ToolFailure(
                "this machine has no GPU: baselines are measured on a GPU only (the interpreter's times divide "
                "nothing); run this on the GPU machine the search runs on"
            )
        settings = baseline_settings(task, s)
        if pins:  # every pinned workload (held-out ones a final evaluation pinned too)
            settings = settings.model_copy(update={"workloads": [p.workload for p in pins]})
        readings = await measure(task, settings)
        if not any(r is not None for got in readings.values() for r in got.values()):
            raise ToolFailure(
                "no baseline could be measured anew (see the sandbox's log); the pinned ones stay"
            )
        restated = await baselines.repin(ws.store, s.id, readings, reason="re-measured on request")
        pins = restated.baselines
        lines.append(
            f"re-measured: generation {restated.generation} pinned; {restated.attempts_restated} attempts' speedups "
            "restated against it (no ranking mixes two generations)"
        )
        old = {p.workload: p for p in restated.before}
        for p in restated.baselines:
            was = old.get(p.workload)
            for label, new_r, old_r in (
                ("eager", p.eager, was.eager if was else None),
                ("torch.compile", p.compile, was.compile if was else None),
            ):
                if new_r is not None and old_r is not None and new_r != old_r:
                    lines.append(
                        f"  {p.workload} {label}: {old_r.time_us:.1f} -> {new_r.time_us:.1f} us "
                        f"({new_r.time_us / old_r.time_us - 1:+.1%})"
                    )
        if await ws.store.final_verdict(s.id) is not None:
            lines.append(
                "the final evaluation's rows were divided by the generation before: run final_evaluation again "
                "for its rows against this one"
            )
    if not pins:
        lines.append(
            "no baseline pinned yet: the search's first GPU evaluation pins the eager and torch.compile readings it "
            "is divided by"
        )
    else:
        lines.extend(baselines.pinned_text(pins))
        lines.append(f"re-measure with {baselines.REMEASURE_HOW.format(search=s.name)}")
    return BaselinesOut(
        search=s.name,
        generation=max((p.generation for p in pins), default=None),
        baselines=pins,
        restated=restated,
        text="\n".join(lines),
    )
