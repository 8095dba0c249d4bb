"""Suites of searches: what a suite's sources name, its records, and its result table with KernelBench's `fast_p`.

A source is a built-in task name, a task file or folder, a KernelBench level folder (its `*.py` problems), a
folder of GPU MODE problem folders, a FlashInfer-Trace dataset (every `definitions/**/*.json`), or a text file
naming one source per line (`#` comments). Every task is loaded once up front: one that cannot be is kept in the
suite as `refused`, with the loader's reason, and the rest run.

`fast_p` is KernelBench's (its `score.fastp`): the share of all the suite's tasks that are correct *and* faster
than the baseline by more than `p` (speedup > p), each task by its search's best; a task without a result counts
in the denominator. Speedups are the best's, in its search's timing protocol, against eager and against
torch.compile. Without a GPU nothing is timed, and no `fast_p` is stated.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from ksearch.gpu.jail.smi import query_gpus
from ksearch.gpu.sandbox.api import SandboxError
from ksearch.gpu.sandbox.local import visible_gpus
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import suites as suite_store
from ksearch.worldmodel.errors import KsearchError, NotFound
from ksearch.worldmodel.suites import Suite, SuiteTask, SuiteTaskStatus

__all__ = [
    "Suite",
    "SuiteTask",
    "create_suite",
    "get_suite",
    "list_suites",
    "mark",
    "report_text",
    "suite_report",
]

FAST_P = (0.0, 1.0, 1.5, 2.0)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,59}$")


class SuiteBudgets(ToolIn):
    """Per-task budgets (each search's) and whole-suite ones; None: not limited."""

    rounds: int | None = Field(None, ge=1, description="Rounds per task")
    attempts: int | None = Field(None, ge=1, description="Attempts per task")
    wall_s: float | None = Field(None, gt=0, description="Wall seconds per task")
    tokens: int | None = Field(None, ge=1, description="Model tokens per task")
    usd: float | None = Field(None, gt=0, description="Model spend per task, USD")
    suite_wall_s: float | None = Field(
        None, gt=0, description="Wall seconds for the whole suite (no task starts after)"
    )
    suite_tokens: int | None = Field(None, ge=1, description="Model tokens for the whole suite")
    suite_usd: float | None = Field(None, gt=0, description="Model spend for the whole suite, USD")


class SuiteIn(ToolIn):
    name: str = Field(description="The suite's name (letters, digits, ._:@+-)")
    sources: list[str] = Field(
        min_length=1, description="Tasks, task folders, level folders, datasets, list files"
    )
    budgets: SuiteBudgets = Field(default_factory=SuiteBudgets)
    parallel: int | None = Field(
        None, ge=1, le=64, description="Searches at once (default: one per visible GPU, 1 on a CPU)"
    )
    gpus: list[str] | None = Field(
        None, description="The GPUs to use (ids as nvidia-smi lists them); default: every visible one"
    )
    ray: str | None = Field(
        None,
        description="A Ray cluster (auto | HOST:PORT) whose GPUs run the searches, one sandbox actor per GPU "
        "(--gpus then names actor indices)",
    )
    run: dict[str, Any] = Field(default_factory=dict, description="The search options every task runs with")


def _list_file(path: Path) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            p = Path(line).expanduser()
            out.append(str(p if p.is_absolute() or not (path.parent / p).exists() else path.parent / p))
    return out


def expand(source: str, _depth: int = 0) -> list[str]:
    """The tasks a source names, in a stable order (see the module's docstring)."""
    p = Path(source).expanduser()
    if _depth > 3:
        return [source]
    if p.is_file() and p.suffix in (".txt", ".list", ".tasks"):
        return [t for s in _list_file(p) for t in expand(s, _depth + 1)]
    if p.is_dir():
        if any((p / f).is_file() for f in ("task.yml", "definition.json", "task.py")):
            return [str(p.resolve())]
        if (p / "definitions").is_dir():
            return [str(d.resolve()) for d in sorted((p / "definitions").rglob("*.json"))]
        found: list[str] = []
        for child in sorted(p.iterdir()):
            if child.is_file() and child.suffix == ".py" and not child.name.startswith("_"):
                found.append(str(child.resolve()))
            elif child.is_dir() and (child / "task.yml").is_file():
                found.append(str(child.resolve()))
        return found or [str(p)]  # a folder with no task in it: its refusal says why
    return [source]


def check(task: str) -> str:
    """'' when `task` loads, else the loader's reason."""
    try:
        load_task(task)
    except TaskError as e:
        return str(e)
    except (OSError, SyntaxError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return ""


def default_slots(parallel: int | None, only: list[str] | None = None) -> list[str | None]:
    """The slots searches run in: one per visible GPU (each search's sandbox on that GPU alone; `only`: these GPUs),
    or `parallel` CPU slots without a GPU (1 by default: the interpreter takes the cores)."""
    gpus = visible_gpus()
    if only is not None:
        unknown = [g for g in only if g not in gpus]
        if unknown:
            seen = ", ".join(gpus) if gpus else "none (this machine has no GPU this process may use)"
            raise ToolFailure(f"GPU {', '.join(unknown)} is not visible here; visible GPUs: {seen}")
        gpus = [g for g in gpus if g in only]
    if gpus:
        return list(_at_most(gpus, parallel, "this machine has {n} visible GPU(s)"))
    return [None] * (parallel or 1)


def _at_most(slots: list[Any], parallel: int | None, have: str) -> list[Any]:
    """The first `parallel` slots (all by default); more than there are is refused, saying what there is."""
    if parallel is not None and parallel > len(slots):
        raise ToolFailure(f"--parallel {parallel}: {have.format(n=len(slots))}; at most {len(slots)}")
    return slots[: parallel or len(slots)]


def gpu_use(gpus: list[str]) -> str:
    """`GPU 0 97 %, 41 GiB; GPU 1 …` for these GPUs, as nvidia-smi reads them now ("" without it)."""
    rows = query_gpus("index,utilization.gpu,memory.used")
    return "; ".join(
        f"GPU {r[0]} {r[1]} busy, {float(r[2].split()[0]) / 1024:.1f} GiB"
        for r in rows
        if len(r) >= 3 and r[0] in gpus and r[2].split()[0].replace(".", "").isdecimal()
    )


async def progress_line(ws: Workspace, suite_id: int, gpus: list[str]) -> str:
    """The running tasks with their best so far, and the slots' GPU use: the suite's periodic progress line."""
    suite = await get_suite(ws, suite_id)
    parts = []
    for t in suite.tasks:
        if t.status != "running" or t.search_id is None:
            continue
        best = await ws.records.best_attempt(t.search_id)
        sp = best.speedup if best is not None else None
        parts.append(f"{Path(t.task).name} {f'{sp:.2f}x' if sp else 'no GPU-timed best yet'}")
    use = gpu_use(gpus) if gpus else ""
    return f"running: {', '.join(parts) or 'none'}" + (f" | {use}" if use else "")


async def ray_slots(
    address: str, parallel: int | None, only: list[str] | None, say: Callable[[str], None]
) -> list[tuple[str, str]]:
    """The slots of a suite on a Ray cluster: (actor index, where it runs) per sandbox actor, one per GPU of the
    cluster (`only`: these actor indices; `parallel`: at most this many). Joins the cluster and places the actors
    first, so an unreachable address is refused before anything is written; the actors' faults go to `say`."""
    from ksearch.gpu.sandbox.ray import shared_pool

    try:
        actors = await shared_pool(address, on_event=lambda m: say(f"ray: {m}")).start()
    except SandboxError as e:
        raise ToolFailure(str(e)) from None
    slots = [(str(a.index), a.label()) for a in actors]
    if only is not None:
        unknown = [g for g in only if g not in {s for s, _ in slots}]
        if unknown:
            raise ToolFailure(
                f"Ray actor {', '.join(unknown)} does not exist: the cluster's pool has actors 0 to {len(slots) - 1}"
            )
        slots = [s for s in slots if s[0] in only]
    return _at_most(slots, parallel, "the Ray cluster has {n} GPU(s)")


async def close_ray() -> None:
    """End this process's Ray sandbox actors (a suite's end, or Ctrl-C)."""
    import sys

    if "ksearch.gpu.sandbox.ray" in sys.modules:  # never imports Ray for a suite that did not use it
        from ksearch.gpu.sandbox.ray import close_pools

        await close_pools()


async def create_suite(ws: Workspace, inp: SuiteIn) -> Suite:
    """A new suite: its sources expanded and every task loaded once (refusals kept with their reasons)."""
    if not _NAME.match(inp.name):
        raise ToolFailure(
            f"bad suite name {inp.name!r}: 1-60 letters, digits and ._:@+- starting with a letter or digit"
        )
    tasks: list[str] = []
    for src in inp.sources:
        for t in await asyncio.to_thread(expand, src):
            if t not in tasks:
                tasks.append(t)
    checked = [(t, await asyncio.to_thread(check, t)) for t in tasks]
    if not any(not why for _, why in checked):
        shown = "; ".join(f"{t}: {why}" for t, why in checked[:5])
        raise ToolFailure(f"no task of {', '.join(inp.sources)} can be loaded, so no suite was made: {shown}")
    if inp.ray is None:
        default_slots(
            inp.parallel, inp.gpus
        )  # a GPU that is not there, or too many slots: refused before anything is made
    config = {
        "budgets": inp.budgets.model_dump(exclude_none=True),
        "parallel": inp.parallel,
        "gpus": inp.gpus,
        "ray": inp.ray,
        "run": inp.run,
    }
    return await suite_store.create_suite(ws.store, inp.name, config, checked)


async def mark(
    ws: Workspace,
    suite_id: int,
    idx: int,
    status: SuiteTaskStatus,
    *,
    search_id: int | None = None,
    error: str = "",
) -> None:
    """A suite task's new status (its search once known, why it failed)."""
    await suite_store.set_task(ws.store, suite_id, idx, status, search_id=search_id, error=error)


async def get_suite(ws: Workspace, ref: int | str) -> Suite:
    return await suite_store.get_suite(ws.store, ref)


async def list_suites(ws: Workspace) -> list[Suite]:
    return await suite_store.list_suites(ws.store)


# ------------------------------------------------------------------------------------ the result


class SuiteRow(ToolModel):
    idx: int
    task: str
    status: str
    search: str | None = None
    error: str = ""
    correct: bool = False
    """Its search has a correct attempt (the best, where one is timed)"""
    attempt_id: int | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    protocol: str | None = None
    device: str | None = None


class SuiteReport(ToolModel):
    suite: str
    tasks: int
    done: int
    running: int
    failed: int
    refused: int
    pending: int
    correct: int
    timed: int = Field(description="Tasks whose best was timed on a GPU")
    rows: list[SuiteRow]
    fast_p_eager: dict[str, float] | None = Field(
        description="KernelBench's fast_p vs eager; None: nothing timed"
    )
    fast_p_compile: dict[str, float] | None = Field(
        description="fast_p vs torch.compile; None: nothing timed"
    )
    note: str = ""


def fast_p(rows: list[SuiteRow], p: float, vs: str) -> float:
    """KernelBench's fastp: correct tasks whose speedup exceeds p, over all the tasks."""
    n = len(rows)
    hits = sum(1 for r in rows if r.correct and (s := getattr(r, f"speedup_vs_{vs}")) is not None and s > p)
    return hits / n if n else 0.0


async def _row(ws: Workspace, t: SuiteTask) -> SuiteRow:
    row = SuiteRow(idx=t.idx, task=t.task, status=t.status, error=t.error)
    if t.search_id is None:
        return row
    try:
        s = await ws.search(t.search_id)
    except NotFound:
        row.error = row.error or f"its search #{t.search_id} is gone"
        return row
    row.search = s.name
    best = await ws.store.best_attempt(s.id)
    ev = best.evaluation if best is not None else None
    if best is not None and ev is not None:
        row.correct = ev.correct
        row.attempt_id = best.id
        row.speedup_vs_eager = ev.speedup_vs_eager
        row.speedup_vs_compile = ev.speedup_vs_compile
        row.protocol = ev.timing_protocol
        row.device = ev.timings[0].device if ev.timings else None
    else:
        row.correct = any(
            a.evaluation is not None and a.evaluation.correct for a in await ws.store.list_attempts(s.id)
        )
    return row


async def suite_report(ws: Workspace, ref: int | str) -> SuiteReport:
    suite = await get_suite(ws, ref)
    rows = [await _row(ws, t) for t in suite.tasks]
    count = {
        st: sum(1 for t in suite.tasks if t.status == st)
        for st in ("done", "running", "failed", "refused", "pending")
    }
    timed = sum(1 for r in rows if r.speedup_vs_eager is not None)
    fe = {f"fast_{p:g}": round(fast_p(rows, p, "eager"), 4) for p in FAST_P} if timed else None
    fc = {f"fast_{p:g}": round(fast_p(rows, p, "compile"), 4) for p in FAST_P} if timed else None
    note = (
        ""
        if timed
        else "no task was timed on a GPU (the CPU interpreter checks correctness only): no fast_p is stated"
    )
    return SuiteReport(
        suite=suite.name,
        tasks=len(rows),
        correct=sum(1 for r in rows if r.correct),
        timed=timed,
        rows=rows,
        fast_p_eager=fe,
        fast_p_compile=fc,
        note=note,
        **count,
    )


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def report_text(r: SuiteReport) -> str:
    """The table and the suite's line, as `ksearch suite status` prints them."""
    lines = [
        f"suite {r.suite}: {r.tasks} tasks: {r.done} done, {r.running} running, {r.pending} pending, {r.failed} failed, "
        f"{r.refused} refused; {r.correct} correct, {r.timed} timed on a GPU"
    ]
    for row in r.rows:
        if row.status in ("failed", "refused"):
            what = row.error[:120]
        elif row.speedup_vs_eager is None:
            what = "correct, not timed on a GPU" if row.correct else "no correct attempt yet"
        else:
            what = (
                f"{'correct' if row.correct else 'not correct'}; {_x(row.speedup_vs_eager)} vs eager, "
                f"{_x(row.speedup_vs_compile)} vs torch.compile"
                + (
                    f" (attempt #{row.attempt_id}, {row.protocol} protocol, {row.device})"
                    if row.device
                    else ""
                )
            )
        lines.append(
            f"  {row.idx:>3} {Path(row.task).name[:40]:<40} {row.status:<8} {row.search or '-':<24} {what}"
        )
    if r.fast_p_eager is not None and r.fast_p_compile is not None:
        lines.append(
            "fast_p vs eager:         " + ", ".join(f"{k} {v:.2f}" for k, v in r.fast_p_eager.items())
        )
        lines.append(
            "fast_p vs torch.compile: " + ", ".join(f"{k} {v:.2f}" for k, v in r.fast_p_compile.items())
        )
    if r.note:
        lines.append(r.note)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ export


class SuiteExported(ToolModel):
    idx: int
    task: str
    path: str | None = None
    """The file written, in the task's owner's format"""
    skipped: str = ""
    """Why nothing was written for it"""


async def export_suite(ws: Workspace, ref: int | str, folder: Path) -> list[SuiteExported]:
    """Each task's best kernel in its owner's format, into `folder`: a FlashInfer-Bench Solution JSON, a GPU MODE
    `NNN-TASK/submission.py`, or a KernelBench `ModelNew` file. A task without a kernel to write (none correct and
    timed, refused, not run) is listed with the reason."""
    from ksearch.tools.export_kernel import ExportKernelIn, export_kernel
    from ksearch.tools.files.solutions import export_solution

    suite = await get_suite(ws, ref)
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    out: list[SuiteExported] = []
    for t in suite.tasks:
        row = SuiteExported(idx=t.idx, task=t.task)
        out.append(row)
        if t.search_id is None:
            row.skipped = t.error or f"not run ({t.status})"
            continue
        s = await ws.search(t.search_id)
        style = ws.search_task(s).style
        try:
            if style == "flashinfer":
                sol = await export_solution(ws, s.id)
                path, text = folder / f"{t.idx:03d}-{sol.name}.json", sol.solution_json
            else:
                fmt = "submission" if style == "gpumode" else "kernelbench"
                k = await export_kernel(ws, ExportKernelIn(search=s.id, format=fmt))
                sub = folder / f"{t.idx:03d}-{Path(t.task).stem}" if fmt == "submission" else folder
                await asyncio.to_thread(sub.mkdir, parents=True, exist_ok=True)
                path, text = (
                    sub / (k.filename if fmt == "submission" else f"{t.idx:03d}-{k.filename}"),
                    k.text,
                )
        except KsearchError as e:
            row.skipped = str(e)
            continue
        await asyncio.to_thread(path.write_text, text)
        row.path = str(path)
    return out
