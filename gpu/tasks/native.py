"""The native task format: a KernelBench problem file, optionally with ksearch extras.

A file defining `Model`, `get_inputs()` and `get_init_inputs()` is a task as it stands. Optional
module-level extras: `WORKLOADS` (named parameter sets, split into search / heldout / smoke),
`TOLERANCE`, `COST` (a callable: params -> {"flops", "bytes", "dtype"}) and `META` (op, dtype,
bound, title). Metadata is read with `ast` (the file is not run, torch is not imported); a file
whose extras are computed rather than literal is probed once in a subprocess. A plain KernelBench
problem (no extras, not built in) is judged by KernelBench's own rule (gpu/tasks/kernelbench_rules.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ksearch.gpu.task import Task, TaskError, Workload
from ksearch.gpu.tasks.facts import enabled as facts_enabled
from ksearch.gpu.tasks.facts import probe_task
from ksearch.gpu.tasks.gpumode import needs_gpu
from ksearch.gpu.tasks.kernelbench_rules import kernelbench_tolerance
from ksearch.gpu.tasks.literals import ModuleFacts, NotLiteral
from ksearch.gpu.tasks.probe import run_probe
from ksearch.gpu.tasks.shrink import size_knobs
from ksearch.gpu.tasks.specs import parse_meta, parse_tolerance, parse_workloads, task_error

EXTRAS = ("WORKLOADS", "TOLERANCE", "META")
PROBE_TIMEOUT_S = 120.0


def read_source(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise TaskError(f"{path}: cannot read the task file: {exc.strerror or exc}") from None


def parse_module(source: str, path: Path) -> ModuleFacts:
    try:
        return ModuleFacts(source, str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: line {exc.lineno}: syntax error: {exc.msg}") from None


def _probe(path: Path, names: list[str]) -> dict[str, Any]:
    """Run the file in a subprocess (it may import torch) and return the named extras as JSON."""
    code = (
        "import importlib.util, json, sys\n"
        "from ksearch.gpu import former_names; former_names.install()\n"  # a task file may use the old imports
        "spec = importlib.util.spec_from_file_location('_ksearch_probe', sys.argv[1])\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print(json.dumps({n: getattr(mod, n) for n in sys.argv[2:] if hasattr(mod, n)}))\n"
    )
    out = run_probe(
        ["-c", code, str(path), *names],
        where=path,
        what=f"read {', '.join(names)}",
        timeout_s=PROBE_TIMEOUT_S,
    )
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise TaskError(
            f"{path}: {', '.join(names)} must be plain data (numbers, strings, lists, mappings)"
        ) from None


def _extras(facts: ModuleFacts, path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    computed: list[str] = []
    for name in EXTRAS:
        if not facts.defines(name):
            continue
        try:
            values[name] = facts.literal(name)
        except NotLiteral:
            computed.append(name)
    if computed:
        values.update(_probe(path, computed))
    return values


def _check_params(facts: ModuleFacts, workloads: list[Workload], path: Path) -> None:
    """Each workload parameter must be taken by get_inputs or get_init_inputs."""
    accepted: set[str] = set()
    for fn in ("get_inputs", "get_init_inputs"):
        if fn in facts.functions:
            names, varkw = facts.param_names(fn)
            if varkw:
                return
            accepted.update(names)
    for i, w in enumerate(workloads):
        for key in w.params:
            if key not in accepted:
                sig = ", ".join(sorted(accepted)) or "no parameters"
                raise task_error(
                    path,
                    f"WORKLOADS[{i}].params.{key}",
                    f"neither get_inputs nor get_init_inputs takes it (they take: {sig})",
                )


def _derived_smoke(workloads: list[Workload]) -> Workload:
    first = next(w for w in workloads if w.split == "search")
    names = {w.name for w in workloads}
    name = "smoke" if "smoke" not in names else f"{first.name}-smoke"
    return Workload(name=name, params=dict(first.params), split="smoke")


def _seeds(path: Path) -> dict[str, str]:
    """Seed candidates next to a task folder's task.py: seed_triton.py, seed_cuda.py, ..."""
    if path.name != "task.py":
        return {}
    return {p.stem.removeprefix("seed_"): p.read_text() for p in sorted(path.parent.glob("seed_*.py"))}


def load_native(
    path: Path, *, name: str | None = None, builtin: bool = False, shrink_smoke: bool = True
) -> Task:
    path = path.resolve()
    source = read_source(path)
    facts = parse_module(source, path)
    if not facts.defines("Model"):
        raise task_error(
            path,
            "Model",
            "no `Model` defined at module level; a task file defines class Model(nn.Module), "
            "get_inputs() and get_init_inputs()",
        )
    if "get_inputs" not in facts.functions and not facts.defines("get_inputs"):
        raise task_error(
            path, "get_inputs", "no `get_inputs()` function; it returns the list of forward inputs"
        )
    extras = _extras(facts, path)
    smoke_derived = False
    if "WORKLOADS" in extras:
        workloads = parse_workloads(extras["WORKLOADS"], path)
        _check_params(facts, workloads, path)
    else:
        workloads = [Workload(name="default", params={}, split="search")]
    extras_out: dict[str, Any] = {}
    # ksearch's own extras make a native task (ksearch's protocol); a plain KernelBench problem has none
    extras_out["ksearch_extras"] = sorted(set(extras) | ({"COST"} if facts.defines("COST") else set()))
    # a file that puts tensors on CUDA unconditionally (`.cuda()`, device="cuda") cannot run on a CPU: said as such,
    # not as torch's "not compiled with CUDA enabled"
    pinned = needs_gpu(path, facts.tree)
    if pinned:
        extras_out["needs_gpu"] = pinned
    if not any(w.split == "smoke" for w in workloads):
        smoke = _derived_smoke(workloads)
        workloads.append(smoke)
        smoke_derived = True
        source_name = next(w.name for w in workloads if w.split == "search")
        extras_out["smoke_note"] = f"a copy of {source_name!r} (sized for the GPU: it may be slow on the CPU)"
    meta = parse_meta(extras.get("META"), path)
    raw_meta = extras.get("META")
    declared = sorted(
        k for k in ("op", "dtype", "bound", "title") if isinstance(raw_meta, dict) and k in raw_meta
    )
    if builtin or extras or facts.defines("COST"):
        tolerance = parse_tolerance(extras.get("TOLERANCE"), path)
    else:  # a plain KernelBench problem: KernelBench's rule (never stricter than it)
        tolerance = kernelbench_tolerance()
    task_name = name or (path.parent.name if path.name == "task.py" else path.stem)
    task = Task(
        name=task_name,
        title=meta.title or task_name,
        op=meta.op,
        dtype=meta.dtype,
        bound=meta.bound,
        declared=declared,
        style="kernelbench",
        source_path=path,
        workloads=workloads,
        tolerance=tolerance,
        builtin=builtin,
        seeds=_seeds(path),
        description=facts.docstring,
        candidate_entry="ModelNew",
        smoke_derived=smoke_derived,
        has_cost=facts.defines("COST"),
        extras=extras_out,
    )
    if smoke_derived and shrink_smoke:
        task = _with_small_smoke(task, source)
    return task


def _with_small_smoke(task: Task, source: str) -> Task:
    """Replace a derived smoke workload (a copy of GPU-sized inputs) by one with smaller sizes.

    The sizes are found and checked in a subprocess (gpu/tasks/rt/facts.py), cached per file content;
    a file whose sizes are already small, or that has none to shrink, is not run at all. Whatever goes
    wrong, the task keeps its copy and the note says why.
    """
    smoke = task.smoke()
    base = next(w for w in task.workloads if w.split == "search")
    knobs = size_knobs(source, task.source_path, base.params)
    if knobs.empty():
        task.extras["smoke_note"] = f"{task.extras.get('smoke_note', '')}; no integer size to shrink"
        return task
    if not knobs.worth_shrinking():
        return task
    if not facts_enabled():
        return task
    result = probe_task(task)
    found = result.smoke
    copy_note = str(task.extras.get("smoke_note", ""))
    if found is None or not found.verified:
        why = (
            found.note if found is not None else f"no smaller sizes: {result.error or 'the probe found none'}"
        )
        task.extras["smoke_note"] = f"{copy_note}; {why}"
        return task
    small = Workload(
        name=smoke.name,
        params={**base.params, **found.params},
        constants=found.constants,
        split="smoke",
    )
    task.workloads = [small if w.name == smoke.name else w for w in task.workloads]
    task.extras["smoke_note"] = (
        f"{base.name!r} with smaller sizes ({', '.join(found.changes)}); "
        f"the reference ran on it in {found.seconds:.2f} s"
    )
    if found.over_budget:
        task.extras["smoke_note"] += "; the smallest sizes that ran, still over the smoke budget"
    return task
