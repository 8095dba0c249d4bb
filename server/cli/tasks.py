"""`ksearch tasks` and `ksearch task show`: what can be searched, and what one task holds.

The tools (ksearch.tools.tasks) load and describe the task; this module only prints. Loading a task reads
its files without importing torch; `--check` runs the reference in a subprocess so this process stays light.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ksearch.server.cli.common import console, err_console, print_table, run_async

if TYPE_CHECKING:  # the tools (and the task loaders behind them) are imported by the command that runs
    from ksearch.tools.tasks import TaskCheck, TaskOut, TaskSummary

task_app = typer.Typer(help="Inspect one task.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("tasks")(tasks)
    app.add_typer(task_app, name="task")


def _splits(task: TaskSummary) -> str:
    return f"{len(task.workloads['search'])} search, {len(task.workloads['heldout'])} held-out"


def tasks(as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """List the built-in tasks (any other task is given by path)."""
    from ksearch.tools.tasks import list_tasks

    found = run_async(list_tasks())
    if as_json:
        console.print_json(json.dumps([t.model_dump(mode="json") for t in found]))
        return
    table = Table(
        title="built-in tasks (others: give a path to a .py, a FlashInfer .json or a GPU MODE folder)"
    )
    for col in ("name", "op", "dtype", "workloads", "bound"):
        table.add_column(col)
    for t in found:
        table.add_row(t.name, t.op, t.dtype, _splits(t), t.bound)
    print_table(table)


def _params(params: dict[str, Any]) -> str:
    if "axes" in params and "inputs" in params:  # FlashInfer-Bench: axis values and input sources
        kinds = sorted({d["type"] for d in params["inputs"].values()})
        return f"{json.dumps(params['axes'])} inputs: {', '.join(kinds)}"
    return json.dumps(params) if params else "(none)"


def _tunables(task: TaskOut) -> dict[str, dict[str, object]]:
    """Seed language -> its tunables' allowed and current values, or the error reading them."""
    out: dict[str, dict[str, object]] = {}
    for seed in task.seeds:
        if seed.tunables_error is not None:
            out[seed.language] = {"error": seed.tunables_error}
        else:
            out[seed.language] = {
                n: {"values": t.values, "current": t.current} for n, t in seed.tunables.items()
            }
    return out


async def _show(
    ref: str, workloads: str | None, *, sources: bool, check: bool
) -> tuple[TaskOut, TaskCheck | None]:
    """The task, and its check when asked: a task that does not load is refused before anything runs."""
    from ksearch.tools.tasks import CheckTaskIn, ShowTaskIn, check_task, show_task

    task = await show_task(ShowTaskIn(task=ref, workloads=workloads, sources=sources))
    checked = await check_task(CheckTaskIn(task=ref, workloads=workloads)) if check else None
    return task, checked


@task_app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="Built-in name (e.g. softmax) or a path")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    check: Annotated[
        bool,
        typer.Option("--check", help="Run the reference once on the CPU (smoke workload) and check its rule"),
    ] = False,
    workloads: Annotated[
        str | None,
        typer.Option("--workloads", help="FlashInfer-Bench workloads JSONL (default: found beside)"),
    ] = None,
    source: Annotated[bool, typer.Option("--source", help="Also print the seed candidates' source")] = False,
) -> None:
    """Show one task: workloads by split, tolerance, cost model, seeds and their tunables."""
    task, checked = run_async(_show(ref, workloads, sources=source, check=check))
    tunables = _tunables(task)
    if as_json:
        data = dict(task.definition)
        data["seed_languages"] = sorted(s.language for s in task.seeds)
        data["tunables"] = tunables
        data["warnings"] = task.warnings
        rounding = task.reference_rounding
        data["reference_rounding"] = rounding.model_dump(mode="json") if rounding is not None else None
        if checked is not None:
            data["check"] = checked.model_dump(mode="json")
        console.print_json(json.dumps(data))
        _exit_if_failed(checked)
        return
    _print_task(task, tunables)
    if source:
        for seed in task.seeds:
            console.rule(f"seed ({seed.language})")
            console.print(seed.source, markup=False, highlight=False)
    if checked is not None:
        _print_check(checked)
    for note in task.warnings:
        err_console.print(f"[yellow]note:[/yellow] {note}")
    _exit_if_failed(checked)


def _exit_if_failed(checked: TaskCheck | None) -> None:
    """`--check` is a test a script can rely on: a failed check exits 1 (a weak rule is only a warning)."""
    if checked is not None and not checked.ok:
        raise typer.Exit(1)


def _print_task(task: TaskOut, tunables: dict[str, dict[str, object]]) -> None:
    console.print(f"[bold]{task.name}[/bold] — {task.title}")
    console.print(
        f"op {task.op or '?'} · dtype {task.dtype} · {task.bound}-bound · format {task.style} · "
        f"candidates define `{task.candidate_entry}` · cost model: {'yes' if task.has_cost else 'no'}"
    )
    reader = "ksearch's own reader" if task.read_by == "minimal" else task.read_by  # FlashInfer-Bench only
    read_by = f" (read by {reader})" if reader else ""
    console.print(f"source: {task.source_path}{read_by}", markup=False, highlight=False)
    if task.description:  # docstrings are hard-wrapped: reflow each paragraph to the terminal
        paragraphs = [" ".join(p.split()) for p in task.description.split("\n\n")]
        console.print("\n\n".join(paragraphs), markup=False, highlight=False)
    table = Table(title="workloads")
    for col in ("name", "split", "params"):
        table.add_column(col)
    for w in task.workloads:
        table.add_row(w.name, w.split, _params(w.params))
    print_table(table)
    rule = task.rule
    if rule.own_check:
        given = "" if rule.ranking_declared else " (GPU MODE's default: task.yml names none)"
        console.print(
            f"correctness: the task's own check_implementation; ranking by {rule.ranking_by}{given}"
        )
    else:
        console.print(
            f"tolerance ({task.dtype}): atol {rule.atol:g}, rtol {rule.rtol:g}, "
            f"mismatch ratio {rule.mismatch_ratio:g}"
        )
    for lang, tun in tunables.items():
        console.print(f"seed ({lang}) tunables: {json.dumps(tun)}", markup=False, highlight=False)
    if not task.seeds:
        console.print("no seed candidates")


def _print_check(checked: TaskCheck) -> None:
    if not checked.ok:
        what = "check not run" if checked.needs_gpu else "check failed"
        err_console.print(f"[red]{what}:[/red] {checked.error}")
        return
    outs = ", ".join(f"{o.dtype}{o.shape}" for o in checked.outputs)
    where = "the GPU" if checked.device == "cuda" else "the CPU"
    console.print(
        f"check: reference ran on {where} on {checked.workload!r} in {checked.seconds:.3f} s → {outs}"
    )
    for w in checked.warnings:
        err_console.print(f"[yellow]degenerate rule:[/yellow] {w}")
    for w in checked.probed:
        console.print(f"check: {w}", markup=False, highlight=False)
    if not checked.warnings:
        console.print(
            "check: zeros, a constant and the input itself are all rejected by the correctness rule"
            + (" (with the probe on signed inputs)" if checked.probed else "")
        )
