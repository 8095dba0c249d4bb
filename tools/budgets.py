"""set_budgets: change a search's budgets, e.g. to go on past a spent one. What was spent is never changed."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop import state as loop
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Budgets, Search

BudgetName = Literal["rounds", "attempts", "wall_s", "tokens", "usd", "target_speedup"]
BUDGET_NAMES: tuple[str, ...] = get_args(BudgetName)


class SetBudgetsIn(ToolIn):
    search: int | str = Field(description="Search id or name")
    rounds: int | None = Field(None, ge=1, description="Rounds in all, the ones already started included")
    more_rounds: int | None = Field(
        None, ge=1, description="Rounds beyond those already started (instead of `rounds`)"
    )
    attempts: int | None = Field(None, ge=1, description="Attempts in all")
    wall_s: float | None = Field(
        None, gt=0, description="Wall time in seconds, counted from the search's creation"
    )
    tokens: int | None = Field(None, ge=1, description="Language-model tokens in all, in and out")
    usd: float | None = Field(None, gt=0, description="Language-model spend in US dollars, in all")
    target_speedup: float | None = Field(
        None, gt=0, description="Stop once the best is this much faster than eager"
    )
    lift: list[BudgetName] = Field(
        default_factory=list, description="Budgets to remove: no limit from now on"
    )
    author: str = Field(
        "human",
        min_length=1,
        max_length=80,
        description="Who asks: human | llm:<model> (kept with the change)",
    )

    @model_validator(mode="after")
    def _one_way_each(self) -> SetBudgetsIn:
        if self.rounds is not None and self.more_rounds is not None:
            raise ValueError("give rounds (in all) or more_rounds (beyond those started), not both")
        given = {n for n in BUDGET_NAMES if getattr(self, n) is not None}
        if self.more_rounds is not None:
            given.add("rounds")
        both = given & set(self.lift)
        if both:
            raise ValueError(
                f"{', '.join(sorted(both))}: both set and lifted; give a value or lift it, not both"
            )
        if not given and not self.lift:
            raise ValueError(
                "nothing to change; give rounds or more_rounds, attempts, wall_s, tokens, usd, target_speedup, or "
                "lift (the budgets to remove)"
            )
        return self


class SetBudgetsOut(ToolModel):
    search: str
    before: Budgets
    after: Budgets
    exhausted: str | None = Field(None, description="The budget that still stops the search, if one does")
    next: str


async def set_budgets(ws: Workspace, inp: SetBudgetsIn) -> SetBudgetsOut:
    s = await ws.search(inp.search)
    before = s.config.budgets
    values = {n: getattr(inp, n) for n in BUDGET_NAMES if getattr(inp, n) is not None}
    if inp.more_rounds is not None:
        values["rounds"] = s.round + inp.more_rounds
    values.update({n: None for n in inp.lift})
    after = before.model_copy(update=values)
    if after == before:
        raise ToolFailure(f"the budgets of {s.name!r} already are {_text(before)}: nothing was changed")
    s = await keep_budgets(ws, s.id, values, inp.author)
    state = await loop.budget_state(ws, s)
    if state.exhausted is None and s.status in ("done", "stopped"):
        # the search goes on: its last final evaluation no longer speaks for what comes next
        s = await ws.store.set_search_status(s.id, "running")
    after_state = await loop.loop_state(ws, s.id)
    return SetBudgetsOut(
        search=s.name,
        before=before,
        after=after,
        exhausted=state.exhausted,
        next=(
            f"Still spent ({state.exhausted}): raise that budget too, or call final_evaluation."
            if state.exhausted
            else after_state.next
        ),
    )


async def keep_budgets(ws: Workspace, search_id: int, values: dict[str, Any], author: str) -> Search:
    """New budget values as the search's own (a person's set_budgets, a driver run's options): its budgets
    updated where they differ, the change kept with its author; unchanged, nothing is written."""
    s = await ws.search(search_id)
    before = s.config.budgets
    after = before.model_copy(update=values)
    if after == before:
        return s
    s = await ws.store.set_search_fields(s.id, config=s.config.model_copy(update={"budgets": after}))
    # who changed which budget when, kept with the search (the tree's edit log holds node edits only)
    key = f"budget_changes:{s.id}"
    history = await ws.store.cache_get(key, [])
    change = {"round": s.round, "author": author, "before": before.model_dump(), "after": after.model_dump()}
    await ws.store.cache_put(key, [*history, change])
    return s


def _text(b: Budgets) -> str:
    parts = [f"{n}={getattr(b, n)}" for n in BUDGET_NAMES if getattr(b, n) is not None]
    return ", ".join(parts) or "none (no limit)"
