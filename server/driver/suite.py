"""Run a suite: its tasks' searches through the built-in driver, as many at once as it has slots.

A slot is one visible GPU (that search's sandbox runs its workers on that GPU alone) or, without a GPU, one CPU
interpreter worker. Each task runs `run_main` as `ksearch run` would (its search is created once, then resumed),
writing its plain log to `<db folder>/suites/<suite>/<idx>.log`; the suite's records are written by this one
process. A stopped suite resumes where it stopped: done tasks are not run again, a task left running continues
its search. Whole-suite budgets stop new tasks from starting once spent; per-task budgets are each search's.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ksearch.server.driver.run_main import RunArgs, run_main
from ksearch.tools.suites.suite import (
    Suite,
    SuiteIn,
    SuiteTask,
    close_ray,
    create_suite,
    default_slots,
    get_suite,
    mark,
    progress_line,
    ray_slots,
    suite_report,
)
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError

Say = Callable[[str], None]
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SuiteRunArgs(BaseModel):
    db: Path
    suite: SuiteIn | None = None  # a new suite
    resume: str | None = None  # or an existing one, by name or id
    # a Ray cluster for its searches (a resumed suite: by default, the one it was made with)
    ray: str | None = None
    progress_every_s: float = 60.0  # a line with each running task's best so far and the GPUs' use


def search_name(suite: Suite, t: SuiteTask) -> str:
    return f"{suite.name}.{t.idx:03d}.{_SAFE.sub('-', Path(t.task).stem)[:40]}"


def _run_args(
    suite: Suite, t: SuiteTask, db: Path, slot: str | None, spent: tuple[int, float], ray: str | None = None
) -> RunArgs:
    c = suite.config
    b: dict[str, Any] = c.get("budgets", {})
    tokens = b.get("tokens")
    if b.get("suite_tokens") is not None:
        left = max(1, b["suite_tokens"] - spent[0])
        tokens = min(tokens, left) if tokens else left
    usd = b.get("usd")
    if b.get("suite_usd") is not None:
        left_usd = max(0.0, b["suite_usd"] - spent[1])
        usd = min(usd, left_usd) if usd else left_usd
    common: dict[str, Any] = {
        "db": db,
        "plain": True,
        "rounds": b.get("rounds"),
        "attempts": b.get("attempts"),
        "wall": b.get("wall_s"),
        "tokens": tokens,
        "usd": usd or None,
        "gpus": [slot] if slot is not None else None,
        "ray": ray,
        "log": db.parent / "suites" / suite.name / f"{t.idx:03d}.log",
        **{k: v for k, v in c.get("run", {}).items() if k != "starts"},
    }
    if t.search_id is not None:
        return RunArgs(resume=str(t.search_id), **common)
    return RunArgs(task=t.task, new=True, name=search_name(suite, t), start=start_file(suite, t), **common)


def _kernels_in(folder: str) -> list[str]:
    return sorted(p.name for p in Path(folder).glob("*.py"))


def start_file(suite: Suite, t: SuiteTask) -> Path | None:
    """The task's own starting kernel in the suite's `--starts` folder: the file named as the task's file (or
    folder, or built-in task), if there is one."""
    folder = suite.config.get("run", {}).get("starts")
    if not folder:
        return None
    f = Path(folder) / f"{Path(t.task).stem}.py"
    return f if f.is_file() else None


async def _spent(ws: Workspace, suite: Suite) -> tuple[int, float]:
    tokens, usd = 0, 0.0
    for t in suite.tasks:
        if t.search_id is not None:
            tot = await ws.records.llm_totals(t.search_id)
            tokens += tot.tokens_in + tot.tokens_out
            usd += tot.usd
    return tokens, usd


def _spent_out(suite: Suite, spent: tuple[int, float], started: float) -> str:
    b = suite.config.get("budgets", {})
    if b.get("suite_wall_s") is not None and time.monotonic() - started >= b["suite_wall_s"]:
        return f"the suite's wall budget ({b['suite_wall_s']:g} s) is spent"
    if b.get("suite_tokens") is not None and spent[0] >= b["suite_tokens"]:
        return f"the suite's token budget ({b['suite_tokens']}) is spent"
    if b.get("suite_usd") is not None and spent[1] >= b["suite_usd"]:
        return f"the suite's money budget (${b['suite_usd']:g}) is spent"
    return ""


async def _tally(ws: Workspace, suite_id: int) -> str:
    """Where the suite stands, for the head of each progress line: `[2/5 done, 1 running, 0 failed]`."""
    tasks = (await get_suite(ws, suite_id)).tasks
    n = {st: sum(1 for t in tasks if t.status == st) for st in ("done", "running", "failed")}
    return f"[{n['done']}/{len(tasks)} done, {n['running']} running, {n['failed']} failed]"


async def run_suite(a: SuiteRunArgs, say: Say) -> Suite:
    """Run (or resume) a suite to its end, saying each task's start and end; returns the suite as it ended."""

    a.db.parent.mkdir(parents=True, exist_ok=True)
    try:
        return await _run_suite(a, say)
    finally:
        await close_ray()  # the actors' work ends with the suite (Ctrl-C included)


async def _run_suite(a: SuiteRunArgs, say: Say) -> Suite:
    ray = a.ray or (a.suite.ray if a.suite is not None else None)
    ray_where: dict[str, str] = {}
    if ray is not None and a.suite is not None:  # an unreachable cluster is refused before the suite is made
        ray_where = dict(await ray_slots(ray, a.suite.parallel, a.suite.gpus, say))
    async with await Workspace.open(a.db) as ws:
        if a.suite is not None:
            suite = await create_suite(ws, a.suite)
            refused = [t for t in suite.tasks if t.status == "refused"]
            say(f"suite {suite.name}: {len(suite.tasks)} tasks, {len(refused)} refused")
            for t in refused:
                say(f"  refused {t.task}: {t.error[:300]}")
            folder = suite.config.get("run", {}).get("starts")
            if folder:
                todo = [t for t in suite.tasks if t.status != "refused"]
                have = [t for t in todo if start_file(suite, t) is not None]
                say(
                    f"starts: {len(have)} of {len(todo)} tasks have a starting kernel in {folder}"
                    + ("" if len(have) == len(todo) else " (the others start from their own seed, if any)")
                )
                if todo and not have:
                    held = _kernels_in(folder)
                    say(
                        f"  none matches: a task's kernel is named as its file (e.g. {Path(todo[0].task).stem}.py); "
                        f"{folder} holds {', '.join(held[:6]) + (' …' if len(held) > 6 else '') if held else 'no .py file'}"
                    )
        else:
            assert a.resume is not None
            suite = await get_suite(ws, a.resume)
            ray = a.ray or suite.config.get("ray")
            if ray is not None:
                ray_where = dict(
                    await ray_slots(ray, suite.config.get("parallel"), suite.config.get("gpus"), say)
                )
            left = [t for t in suite.tasks if t.status in ("pending", "running", "failed")]
            say(f"suite {suite.name}: resuming, {len(left)} of {len(suite.tasks)} tasks left")
        slots: asyncio.Queue[str | None] = asyncio.Queue()
        kinds: list[str | None] = (
            list(ray_where)
            if ray is not None
            else default_slots(suite.config.get("parallel"), suite.config.get("gpus"))
        )
        for k in kinds:
            slots.put_nowait(k)

        def where(k: str | None) -> str:
            return ray_where[k] if k in ray_where else f"GPU {k}" if k is not None else "CPU"

        say(f"slots: {', '.join(where(k) for k in kinds)}")
        started = time.monotonic()
        stop = ""

        async def one(t: SuiteTask) -> None:
            nonlocal stop
            slot = await slots.get()
            try:
                current = await get_suite(ws, suite.id)
                stop = stop or _spent_out(current, await _spent(ws, current), started)
                if stop:
                    return
                task = current.tasks[t.idx]
                if (
                    task.search_id is None
                ):  # started by a run that was stopped before it could say which search
                    name = search_name(current, task)
                    known = [x for x in await ws.records.list_searches() if x.name == name]
                    if known:
                        task = task.model_copy(update={"search_id": known[0].id})
                args = _run_args(current, task, a.db, slot, await _spent(ws, current), ray)
                await mark(ws, suite.id, t.idx, "running")
                say(f"{await _tally(ws, suite.id)} start {t.idx:>3} {Path(t.task).name} on {where(slot)}")

                try:
                    res = await run_main(args)
                except KsearchError as e:
                    await mark(ws, suite.id, t.idx, "failed", error=str(e)[:2000])
                    say(f"{await _tally(ws, suite.id)} failed {t.idx:>3} {Path(t.task).name}: {str(e)[:200]}")
                    return
                await mark(ws, suite.id, t.idx, "done", search_id=res.search_id)
                best = (
                    f"{res.best_speedup_vs_eager:.2f}x vs eager"
                    if res.best_speedup_vs_eager
                    else "no GPU-timed best"
                )
                say(
                    f"{await _tally(ws, suite.id)} done  {t.idx:>3} {Path(t.task).name}: {res.stop_reason}; {best} "
                    f"({res.attempts} attempts)"
                )
            finally:
                slots.put_nowait(slot)

        async def ticker() -> None:
            local_gpus = [
                k for k in kinds if k is not None and ray is None
            ]  # a cluster's: on Ray's dashboard
            while True:
                await asyncio.sleep(a.progress_every_s)
                line = await progress_line(ws, suite.id, local_gpus)
                say(f"{await _tally(ws, suite.id)} {line}")

        todo = [t for t in suite.tasks if t.status in ("pending", "running", "failed")]
        tick = asyncio.create_task(ticker())
        try:
            await asyncio.gather(*(one(t) for t in todo))
        finally:
            tick.cancel()
        if stop:
            say(f"stopped: {stop}; `ksearch suite run --resume {suite.name}` runs the tasks left")
        return await get_suite(ws, suite.id)


__all__ = ["SuiteRunArgs", "run_suite", "suite_report"]
