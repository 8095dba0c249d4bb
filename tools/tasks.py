"""Tasks: which can be searched, what one holds, and whether its reference runs and its rule is sound.

Reading a task needs neither the store nor the sandbox, so these take no Workspace. Loading reads the task's
files without importing torch; `check_task` runs the reference in a subprocess (`python -m
ksearch.gpu.tasks.check`), so the process that asks (the CLI) stays light.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import Field

from ksearch.about import IMPORT_ROOT
from ksearch.gpu.build.procs import kill_group
from ksearch.gpu.task import Bound, Split, Task, TaskError, TaskStyle
from ksearch.gpu.tasks import builtin_tasks, load_task
from ksearch.gpu.tasks.check import CheckReport
from ksearch.gpu.tasks.facts import RoundingProbe, TaskFacts, apply_facts, task_facts
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.tunables import TunableError, TunableInfo, read_tunables
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace

CHECK_TIMEOUT_S = 300
SPLITS: tuple[Split, ...] = ("search", "heldout", "smoke")

_TASK_REF = (
    "A built-in task name (e.g. softmax) or a path: a .py task file, a FlashInfer-Bench definition .json or a "
    "GPU MODE folder"
)
_WORKLOADS = "FlashInfer-Bench workloads JSONL (default: the one found beside the definition)"


class TaskSummary(ToolModel):
    """One built-in task, in a line."""

    name: str
    """The built-in name, as create_search and `ksearch task show` take it."""
    title: str
    op: str
    """Short op family, e.g. softmax, gemm ('' when the task does not say)."""
    dtype: str
    bound: Bound
    """What limits the reference at its workloads' sizes: memory, compute, mixed or unknown."""
    style: TaskStyle
    """The format it is written in."""
    workloads: dict[Split, list[str]]
    """Split (search, heldout, smoke) -> the names of its workloads."""


class WorkloadRow(ToolModel):
    name: str
    split: Split
    params: dict[str, Any]
    """Shapes and scalars of this workload (FlashInfer-Bench: `axes` values and `inputs` sources)."""


class CorrectnessRule(ToolModel):
    """How a candidate's outputs are judged."""

    own_check: bool
    """True: the task's own check_implementation judges (GPU MODE) and the tolerances below do not apply."""
    atol: float
    """Absolute tolerance for outputs of the task's dtype."""
    rtol: float
    """Relative tolerance for outputs of the task's dtype."""
    mismatch_ratio: float
    """Fraction of the elements allowed outside the tolerance."""
    ranking_by: str | None = None
    """GPU MODE: how its benchmarks rank candidates."""
    ranking_declared: bool = True
    """GPU MODE: False when task.yml names no ranking and GPU MODE's default applies."""


class SeedInfo(ToolModel):
    """One seed candidate: a correct, deliberately plain implementation the search may start from."""

    language: str
    tunables: dict[str, TunableInfo] = Field(default_factory=dict)
    """The tunables it declares (empty when none, or when tunables_error says why they cannot be read)."""
    tunables_error: str | None = None
    """Why its TUNABLES cannot be read, if they cannot."""
    source: str | None = None
    """Its source, when asked for (sources=true)."""


class ShowTaskIn(ToolIn):
    task: str = Field(description=_TASK_REF)
    workloads: str | None = Field(None, description=_WORKLOADS)
    sources: bool = Field(False, description="Also return the seed candidates' sources")


class TaskOut(ToolModel):
    """One task: what a candidate must do, on which workloads, judged how, starting from which seeds."""

    name: str
    title: str
    op: str
    """The op family: as the task declares it, else derived from running its reference ("" if neither)."""
    dtype: str
    """The data type: declared, else derived from running the reference."""
    bound: Bound
    """What bounds it on the GPU: declared, else derived from the reference's bytes and FLOPs."""
    style: TaskStyle
    builtin: bool
    source_path: str
    """The file or folder the task was loaded from."""
    description: str
    candidate_entry: str
    """What a candidate module must define: ModelNew, run (FlashInfer-Bench) or custom_kernel (GPU MODE)."""
    has_cost: bool
    """Whether a cost model (FLOPs, bytes) exists, so roofline fractions can be reported."""
    workloads: list[WorkloadRow]
    rule: CorrectnessRule
    seeds: list[SeedInfo]
    """The seed candidates by language, in the task's order (none for most imported tasks)."""
    warnings: list[str]
    """What a user should know before searching it: a derived smoke workload, no cost model, no held-out
    workload, a GPU it needs, a reference whose own rounding error fails its tolerance or comes near it, the
    task's own notes."""
    reference_rounding: RoundingProbe | None = None
    """The reference's own result on the smoke workload against its float64 run, judged by the task's rule
    (measured once per file content with the task's facts; None when facts are off or could not be derived)."""
    read_by: str | None = None
    """Who read a FlashInfer-Bench definition: `flashinfer-bench <version>` (its own package, the `fib` extra) or
    `minimal` (ksearch's own reader); None for the other formats."""
    definition: dict[str, Any]
    """The whole task as loaded, as JSON data (the seeds' sources only with sources=true)."""


class CheckTaskIn(ToolIn):
    task: str = Field(description=_TASK_REF)
    workloads: str | None = Field(None, description=_WORKLOADS)


class OutputShape(ToolModel):
    shape: list[int]
    dtype: str


class TaskCheck(ToolModel):
    """The reference run once on the smoke workload, and what its correctness rule would let through."""

    task: str
    workload: str = ""
    """The workload it ran (the smoke one)."""
    ok: bool = False
    """The reference ran; `warnings` may still call the rule weak."""
    seconds: float = 0.0
    """Wall time of the one reference call."""
    outputs: list[OutputShape] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    """Trivial answers (zeros, a constant, the input) that the rule accepts and nothing rejects."""
    probed: list[str] = Field(default_factory=list)
    """Trivial answers the rule accepts on the task's own inputs but the probe on signed inputs rejects."""
    error: str | None = None
    """Why the check failed or did not run."""
    needs_gpu: str | None = None
    """Why the reference needs a GPU; without one the check does not run."""
    device: str = "cpu"
    """Where the reference ran: cpu, or cuda for a task that needs a GPU."""


def load_with_workloads(ref: str, workloads: str | None) -> Task:
    """The task by built-in name or path, with a FlashInfer-Bench definition's workloads from `workloads` when
    given (a definition whose workloads JSONL is not beside it); TaskError for a workloads file given to any
    other kind of task, or one that does not load."""
    task = load_task(ref, workloads=workloads)
    if workloads is not None and task.style != "flashinfer":
        raise TaskError(
            f"a workloads file ({workloads}) is FlashInfer-Bench's: it goes with a definition .json; {task.name!r} "
            f"is a {task.style} task, whose workloads are its own"
        )
    return task


def _summary(task: Task) -> TaskSummary:
    return TaskSummary(
        name=task.name,
        title=task.title,
        op=task.op,
        dtype=task.dtype,
        bound=task.bound,
        style=task.style,
        workloads={s: [w.name for w in task.by_split(s)] for s in SPLITS},
    )


async def list_tasks() -> list[TaskSummary]:
    """The built-in tasks (any other task is given by path); TaskError if one of them does not load."""
    return [_summary(t) for t in builtin_tasks()]


def _rule(task: Task) -> CorrectnessRule:
    atol, rtol = task.tolerance.for_dtype(task.dtype)
    rule = CorrectnessRule(
        own_check=task.style == "gpumode", atol=atol, rtol=rtol, mismatch_ratio=task.tolerance.mismatch_ratio
    )
    if rule.own_check:
        rule.ranking_by = task.extras.get("ranking_by")
        rule.ranking_declared = bool(task.extras.get("ranking_declared", True))
    return rule


def _seed(language: str, source: str, with_source: bool) -> SeedInfo:
    seed = SeedInfo(language=language, source=source if with_source else None)
    try:
        seed.tunables = read_tunables(source).tunables
    except TunableError as exc:  # a seed that declares them badly is shown as such, not refused
        seed.tunables_error = str(exc)
    return seed


def _warnings(task: Task, facts: TaskFacts) -> list[str]:
    notes = []
    if task.smoke_derived:
        note = (
            task.extras.get("smoke_note") or "a copy of the first search workload (it may be slow on the CPU)"
        )
        notes.append(f"no smoke workload was given; it is {note}")
    if not task.has_cost:
        notes.append("no cost model (COST): roofline fractions will not be reported")
    if not task.by_split("heldout"):
        notes.append("no held-out workload: the final evaluation sees only the search shapes")
    if task.extras.get("needs_gpu"):
        notes.append(f"needs a GPU: {task.extras['needs_gpu']}")
    if rounding := facts.rounding_warning():
        notes.append(rounding)
    notes += [str(n) for n in task.extras.get("notes") or []]
    return notes


async def show_task(inp: ShowTaskIn) -> TaskOut:
    """One task by built-in name or path; TaskError says why it cannot be loaded (for an unknown name: which
    built-ins exist)."""
    task = load_with_workloads(inp.task, inp.workloads)
    # the reference's own rounding error is measured with its facts: one subprocess per file content, cached
    facts = await asyncio.to_thread(task_facts, task)
    known = apply_facts(task, facts)  # what the task leaves undeclared, as running its reference showed
    return TaskOut(
        name=task.name,
        title=task.title,
        op=known.op,
        dtype=known.dtype,
        bound=known.bound,
        style=task.style,
        builtin=task.builtin,
        source_path=str(task.source_path),
        description=task.description,
        candidate_entry=task.candidate_entry,
        has_cost=task.has_cost,
        workloads=[WorkloadRow(name=w.name, split=w.split, params=w.params) for w in task.workloads],
        rule=_rule(known),  # the rule for the dtype the evaluator judges by (derived where undeclared)
        seeds=[_seed(lang, src, inp.sources) for lang, src in task.seeds.items()],
        warnings=_warnings(task, facts),
        reference_rounding=facts.rounding,
        read_by=(task.extras.get("fib") or {}).get("reader"),
        definition=task.model_dump(mode="json", exclude=set() if inp.sources else {"seeds"}),
    )


def _check_command(inp: CheckTaskIn) -> tuple[Task, list[str]]:
    """The task (a TaskError if it does not load) and the command that checks it in its own process."""
    task = load_with_workloads(inp.task, inp.workloads)
    ref = inp.task if task.builtin else str(Path(inp.task).resolve())
    cmd = [sys.executable, "-m", "ksearch.gpu.tasks.check", ref]
    return task, cmd + (["--workloads", inp.workloads] if inp.workloads else [])


async def check_task(inp: CheckTaskIn) -> TaskCheck:
    """Run the task's reference once on its smoke workload, in a subprocess, and judge its rule.

    A task that does not load raises TaskError; a reference that fails, runs past CHECK_TIMEOUT_S or needs a
    GPU this machine lacks is a TaskCheck with ok=false and the reason in `error`."""
    task, cmd = _check_command(inp)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    env.setdefault(
        "OMP_WAIT_POLICY", "PASSIVE"
    )  # as for the workers (gpu/jail/scrub.py): busy cores, small ops
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # a cancelled check (Ctrl-C) kills the reference and anything it started
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CHECK_TIMEOUT_S)
    except (TimeoutError, asyncio.CancelledError) as exc:
        kill_group(proc)
        await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            return TaskCheck(
                task=task.name, error=f"the reference took over {CHECK_TIMEOUT_S} s on the smoke workload"
            )
        raise
    lines = out.decode(errors="replace").strip().splitlines()
    if not lines:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return TaskCheck(task=task.name, error=f"the check process failed: {tail[0]}")
    # the subprocess's report (its wire format), turned into this tool's documented answer
    return TaskCheck.model_validate(CheckReport.model_validate_json(lines[-1]).model_dump())


async def task_named(ws: Workspace, ref: str) -> Task:
    """A built-in name or a task path (percent-encoded into one URI segment, as create_search takes it); else a
    search's name, or the name a search's task file goes by (its file's name, as the prompts call the task)."""
    try:
        return ws.task(ref)
    except TaskError as e:
        searches = await ws.records.list_searches()
        named = [s for s in searches if s.name == ref]
        if not named:
            named = [s for s in searches if Path(s.task).stem == ref or s.task == ref]
        paths = sorted({s.task for s in named})
        if len(paths) == 1:
            return ws.search_task(named[0])
        if len(paths) > 1:
            raise ToolFailure(
                f"task name {ref!r} is ambiguous: the searches run {', '.join(paths)}; give the path percent-encoded"
            ) from e
        raise ToolFailure(f"{e}; a search's name, or the name of a task a search runs, is taken too") from e
