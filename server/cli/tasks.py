"""`ksearch tasks` and `ksearch task show`: what can be searched, and what one task holds.

Loading a task reads its files without importing torch; `--check` runs the reference in a
subprocess so this process stays light.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.table import Table

from ksearch.about import IMPORT_ROOT
from ksearch.gpu.task import Task, TaskError, Workload
from ksearch.server.cli.common import console, err_console, fail, print_table

CHECK_TIMEOUT_S = 300

task_app = typer.Typer(help="Inspect one task.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("tasks")(tasks)
    app.add_typer(task_app, name="task")


def _splits(task: Task) -> str:
    return f"{len(task.by_split('search'))} search, {len(task.by_split('heldout'))} held-out"


def _summary(task: Task) -> dict[str, object]:
    return {
        "name": task.name,
        "title": task.title,
        "op": task.op,
        "dtype": task.dtype,
        "bound": task.bound,
        "style": task.style,
        "workloads": {s: [w.name for w in task.by_split(s)] for s in ("search", "heldout", "smoke")},
    }


def tasks(as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """List the built-in tasks (any other task is given by path)."""
    from ksearch.gpu.tasks import builtin_tasks

    try:
        found = builtin_tasks()
    except TaskError as exc:
        raise fail(str(exc)) from None
    if as_json:
        console.print_json(json.dumps([_summary(t) for t in found]))
        return
    table = Table(
        title="built-in tasks (others: give a path to a .py, a FlashInfer .json or a GPU MODE folder)"
    )
    for col in ("name", "op", "dtype", "workloads", "bound"):
        table.add_column(col)
    for t in found:
        table.add_row(t.name, t.op, t.dtype, _splits(t), t.bound)
    print_table(table)


def _params(w: Workload) -> str:
    if "axes" in w.params and "inputs" in w.params:  # FlashInfer-Bench: axis values and input sources
        kinds = sorted({d["type"] for d in w.params["inputs"].values()})
        return f"{json.dumps(w.params['axes'])} inputs: {', '.join(kinds)}"
    return json.dumps(w.params) if w.params else "(none)"


def _warnings(task: Task) -> list[str]:
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
    notes += [str(n) for n in task.extras.get("notes") or []]
    return notes


def _run_check(ref: str, workloads: str | None) -> dict[str, object]:
    from ksearch.gpu.tasks.check import CheckReport

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as for the workers (gpu/scrub.py): busy cores, small ops
    cmd = [sys.executable, "-m", "ksearch.gpu.tasks.check", ref] + (
        ["--workloads", workloads] if workloads else []
    )
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the reference took over {CHECK_TIMEOUT_S} s on the smoke workload"}
    lines = proc.stdout.strip().splitlines()
    if not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"ok": False, "error": f"the check process failed: {tail[0]}"}
    return CheckReport.model_validate_json(lines[-1]).model_dump()


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
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.tunables import TunableError, read_tunables

    try:
        task = load_task(ref, workloads=workloads)
    except TaskError as exc:
        raise fail(str(exc)) from None
    ref_arg = ref if task.builtin else str(Path(ref).resolve())
    checked = _run_check(ref_arg, workloads) if check else None
    tunables: dict[str, dict[str, object]] = {}
    for lang, src in task.seeds.items():
        try:
            tunables[lang] = {
                n: {"values": t.values, "current": t.current} for n, t in read_tunables(src).items()
            }
        except TunableError as exc:
            tunables[lang] = {"error": str(exc)}
    if as_json:
        data = task.model_dump(mode="json", exclude={"seeds"} if not source else set())
        data["seed_languages"] = sorted(task.seeds)
        data["tunables"] = tunables
        data["warnings"] = _warnings(task)
        if checked is not None:
            data["check"] = checked
        console.print_json(json.dumps(data))
        _exit_if_failed(checked)
        return
    _print_task(task, tunables)
    if source:
        for lang, src in task.seeds.items():
            console.rule(f"seed ({lang})")
            console.print(src, markup=False, highlight=False)
    if checked is not None:
        _print_check(checked)
    for note in _warnings(task):
        err_console.print(f"[yellow]note:[/yellow] {note}")
    _exit_if_failed(checked)


def _exit_if_failed(checked: dict[str, object] | None) -> None:
    """`--check` is a test a script can rely on: a failed check exits 1 (a weak rule is only a warning)."""
    if checked is not None and not checked.get("ok"):
        raise typer.Exit(1)


def _print_task(task: Task, tunables: dict[str, dict[str, object]]) -> None:
    console.print(f"[bold]{task.name}[/bold] — {task.title}")
    console.print(
        f"op {task.op or '?'} · dtype {task.dtype} · {task.bound}-bound · format {task.style} · "
        f"candidates define `{task.candidate_entry}` · cost model: {'yes' if task.has_cost else 'no'}"
    )
    console.print(f"source: {task.source_path}")
    if task.description:  # docstrings are hard-wrapped: reflow each paragraph to the terminal
        paragraphs = [" ".join(p.split()) for p in task.description.split("\n\n")]
        console.print("\n\n".join(paragraphs), markup=False, highlight=False)
    table = Table(title="workloads")
    for col in ("name", "split", "params"):
        table.add_column(col)
    for w in task.workloads:
        table.add_row(w.name, w.split, _params(w))
    print_table(table)
    if task.style == "gpumode":
        given = (
            "" if task.extras.get("ranking_declared", True) else " (GPU MODE's default: task.yml names none)"
        )
        console.print(
            f"correctness: the task's own check_implementation; ranking by {task.extras.get('ranking_by')}{given}"
        )
    else:
        atol, rtol = task.tolerance.for_dtype(task.dtype)
        console.print(
            f"tolerance ({task.dtype}): atol {atol:g}, rtol {rtol:g}, "
            f"mismatch ratio {task.tolerance.mismatch_ratio:g}"
        )
    for lang, tun in tunables.items():
        console.print(f"seed ({lang}) tunables: {json.dumps(tun)}", markup=False, highlight=False)
    if not task.seeds:
        console.print("no seed candidates")


def _print_check(checked: dict[str, object]) -> None:
    if not checked.get("ok"):
        what = "check not run" if checked.get("needs_gpu") else "check failed"
        err_console.print(f"[red]{what}:[/red] {checked.get('error')}")
        return
    outputs = cast("list[dict[str, object]]", checked.get("outputs") or [])
    outs = ", ".join(f"{o['dtype']}{o['shape']}" for o in outputs)
    where = "the GPU" if checked.get("device") == "cuda" else "the CPU"
    console.print(
        f"check: reference ran on {where} on {checked['workload']!r} in {checked['seconds']:.3f} s → {outs}"
    )
    warnings = cast("list[str]", checked.get("warnings") or [])
    probed = cast("list[str]", checked.get("probed") or [])
    for w in warnings:
        err_console.print(f"[yellow]degenerate rule:[/yellow] {w}")
    for w in probed:
        console.print(f"check: {w}", markup=False, highlight=False)
    if not warnings:
        console.print(
            "check: zeros, a constant and the input itself are all rejected by the correctness rule"
            + (" (with the probe on signed inputs)" if probed else "")
        )
