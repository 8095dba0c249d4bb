"""now_doing: what a search's loop is doing now, in one line, from the loop's state (tools.loop.loop_state, what
`ksearch status` shows) and whether a driver run holds the search (tools.runs.run_status).

While a run holds it the line says what that run does ("refining intent #7 'vectorize loads': attempt 3 of at
most 8", "reflecting on #7 'vectorize loads'", "final evaluation: ..."); without one it says what the loop waits
for ("waiting: budget spent (...); the final evaluation is due", "waiting: an intent to select for round 4 of at
most 5; no run in progress"); a search whose run was killed says so first.
"""

from __future__ import annotations

from ksearch.tools.loop.runs import run_status
from ksearch.tools.loop.state import LoopState, Phase, loop_state, seed_unmeasured
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace

__all__ = ["NowDoing", "doing_text", "now_doing"]

_IDLE = "no run in progress"


class NowDoing(ToolModel):
    """What a search's loop is doing now."""

    search_id: int
    phase: Phase
    """The loop's phase (init, select, refine, update, final, done)"""
    live: bool
    """A driver run holds the search now"""
    text: str
    """In words, e.g. "refining intent #7 'vectorize loads': attempt 3 of at most 8\""""


def doing_text(
    st: LoopState, *, live: bool, interrupted: bool, titles: dict[int, str], seed_due: bool
) -> str:
    """The line for a loop state. `live`: a driver run holds the search; `interrupted`: its run was killed;
    `titles`: intent id -> title; `seed_due`: the task's seed is still to be measured (init)."""
    b = st.budget
    of = f" of at most {b.rounds}" if b.rounds is not None else ""

    def intent(node_id: int | None) -> str:
        title = titles.get(node_id) if node_id is not None else None
        return f"#{node_id}" + (f" {title!r}" if title else "")

    if st.phase == "done":
        return "done" if st.status == "done" else f"done ({st.status}; its final evaluation is recorded)"
    if st.status == "stopped" and not live and st.phase in ("select", "refine", "update"):
        # a stopped search's loop is not running: say it stopped, not that it refines and selects at once
        left = [intent(r.node_id) for r in st.refining]
        parts = [f"intent {', '.join(left)} left active when it stopped"] if left else []
        parts.append(
            "intents are open and budget is left: selecting one searches further"
            if st.phase == "select"
            else ""
        )
        line = "; ".join(p for p in ["stopped (its final evaluation is recorded)", *parts] if p)
        return f"interrupted (its run was killed): {line}" if interrupted else line
    if st.phase == "final":
        if live:
            return "final evaluation: re-measuring the best candidates on every workload"
        line = f"waiting: budget spent ({b.exhausted}); the final evaluation is due"
    elif st.phase == "refine":
        parts = []
        for r in st.refining:
            if r.over and live:
                parts.append(f"ending the refine phase of intent {intent(r.node_id)}: {r.why}")
            elif r.over:
                parts.append(f"waiting: the end of the refine phase of intent {intent(r.node_id)} ({r.why})")
            elif live:
                parts.append(
                    f"refining intent {intent(r.node_id)}: attempt {r.attempts + 1} of at most {r.cap}"
                )
            else:
                parts.append(
                    f"refining intent {intent(r.node_id)}: {r.attempts} of at most {r.cap} attempts made"
                )
        line = "; ".join(parts) + ("" if live else f"; {_IDLE}")  # more than one: the driver's lanes
    elif st.phase == "update" and live:
        line = f"reflecting on {intent(st.reflecting_on)}"
    elif st.phase == "update":  # the records do not say whether it was reflected on: name both next steps
        then = (
            "the final evaluation (budget spent)"
            if b.exhausted
            else f"an intent to select for round {st.round + 1}{of}"
        )
        line = f"waiting: the reflection on {intent(st.reflecting_on)}, then {then}; {_IDLE}"
    elif st.phase == "select":
        line = (
            f"selecting the next intent for round {st.round + 1}{of}"
            if live
            else f"waiting: an intent to select for round {st.round + 1}{of}; {_IDLE}"
        )
    elif live:  # init
        line = (
            "measuring the task's seed"
            if seed_due
            else "analysing the kernel and proposing the first intents"
        )
    else:
        line = f"waiting: {'the seed to be measured' if seed_due else 'the first intents'}; {_IDLE}"
    return f"interrupted (its run was killed): {line}" if interrupted else line


async def now_doing(ws: Workspace, ref: int | str) -> NowDoing:
    """What the search's loop is doing now (by id or name)."""
    st = await loop_state(ws, ref)
    run = await run_status(ws, st.search_id)
    live = run.status == "running" and run.holder is not None
    titles = {n.id: n.title for n in await ws.store.list_nodes(st.search_id) if n.kind == "intent"}
    seed_due = st.phase == "init" and await seed_unmeasured(ws, await ws.search(st.search_id))
    text = doing_text(
        st, live=live, interrupted=run.status == "interrupted", titles=titles, seed_due=seed_due
    )
    return NowDoing(search_id=st.search_id, phase=st.phase, live=live, text=text)
