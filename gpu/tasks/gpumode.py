"""GPU MODE importer: a task folder with task.yml and reference.py -> Task.

task.yml lists `tests` and `benchmarks` as parameter mappings for `generate_input(**params)`, a
`ranking_by` rule, and `files` (module name -> source path, e.g. utils.py from ../utils.py).
reference.py defines `generate_input`, `ref_kernel(data)` and `check_implementation(data, output)`.
Candidates define `custom_kernel(data)`.

Mapping: benchmarks -> search workloads (what the leaderboard ranks), tests -> held-out
workloads (checked by the final evaluation), the smallest test -> the smoke workload. A `seed`
parameter is replaced by the trial's seed so every trial draws fresh inputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from gpu.task import Task, TaskError, Workload
from gpu.tasks.literals import ModuleFacts
from gpu.tasks.specs import task_error

RANKINGS = ("last", "mean", "geom")
REFERENCE_FUNCTIONS = ("generate_input", "ref_kernel", "check_implementation")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise TaskError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise TaskError(f"{path}: task.yml must be a mapping (files, tests, benchmarks, ...)")
    return raw


def _cases(raw: dict[str, Any], key: str, path: Path, required: bool) -> list[dict[str, Any]]:
    cases = raw.get(key)
    if cases is None or cases == []:
        if required:
            raise task_error(
                path,
                key,
                "missing or empty; it must list parameter mappings for generate_input, "
                "e.g. `- {size: 4096, seed: 1}`",
            )
        return []
    if not isinstance(cases, list):
        raise task_error(path, key, "must be a list of parameter mappings")
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or not all(isinstance(k, str) for k in case):
            raise task_error(
                path, f"{key}[{i}]", f"must be a mapping of parameter name -> value, got {case!r}"
            )
    return cases


def _modules(raw: dict[str, Any], folder: Path, path: Path) -> dict[str, str]:
    """Module name -> absolute source path for the folder's helper files (reference, task, utils...)."""
    mods: dict[str, str] = {}
    files = raw.get("files") or []
    if not isinstance(files, list):
        raise task_error(path, "files", 'must be a list of {"name": ..., "source": ...} mappings')
    for i, entry in enumerate(files):
        if not isinstance(entry, dict) or "name" not in entry or "source" not in entry:
            raise task_error(path, f"files[{i}]", 'must be a mapping with "name" and "source"')
        name, source = str(entry["name"]), str(entry["source"])
        if source.startswith("@") or not name.endswith(".py"):
            continue  # @SUBMISSION@ is the candidate itself
        src = (folder / source).resolve()
        if not src.is_file():
            raise task_error(path, f"files[{i}].source", f"{source!r} not found (from {folder})")
        mods[name.removesuffix(".py")] = str(src)
    for p in sorted(folder.glob("*.py")):
        mods.setdefault(p.stem, str(p.resolve()))
    return mods


def _check_reference(ref: Path) -> ModuleFacts:
    try:
        facts = ModuleFacts(ref.read_text(), str(ref))
    except OSError as exc:
        raise TaskError(f"{ref}: cannot read: {exc.strerror or exc}") from None
    except SyntaxError as exc:
        raise TaskError(f"{ref}: line {exc.lineno}: syntax error: {exc.msg}") from None
    for fn in REFERENCE_FUNCTIONS:
        if not facts.defines(fn):
            raise task_error(
                ref, fn, f"not defined; reference.py must define {', '.join(REFERENCE_FUNCTIONS)}"
            )
    return facts


def _check_params(facts: ModuleFacts, ref: Path, path: Path, key: str, cases: list[dict[str, Any]]) -> None:
    if "generate_input" not in facts.functions:
        return  # bound some other way (e.g. imported): cannot see its signature
    names, varkw = facts.param_names("generate_input")
    if varkw:
        return
    for i, case in enumerate(cases):
        for p in case:
            if p not in names:
                raise task_error(
                    path,
                    f"{key}[{i}].{p}",
                    f"not a parameter of {ref.name}: generate_input({', '.join(names)})",
                )


def _size(case: dict[str, Any]) -> float:
    nums = [
        v for k, v in case.items() if k != "seed" and isinstance(v, int | float) and not isinstance(v, bool)
    ]
    return math.prod(abs(v) or 1 for v in nums) if nums else 0.0


def load_gpumode(folder: Path) -> Task:
    folder = folder.resolve()
    path = folder / "task.yml"
    if not path.is_file():
        raise TaskError(f"{folder}: no task.yml; a GPU MODE task folder holds task.yml and reference.py")
    raw = _read_yaml(path)
    modules = _modules(raw, folder, path)
    if "reference" not in modules:
        raise TaskError(f"{folder}: no reference.py (defining {', '.join(REFERENCE_FUNCTIONS)})")
    ref = Path(modules["reference"])
    facts = _check_reference(ref)
    benchmarks = _cases(raw, "benchmarks", path, required=True)
    tests = _cases(raw, "tests", path, required=False)
    _check_params(facts, ref, path, "benchmarks", benchmarks)
    _check_params(facts, ref, path, "tests", tests)
    ranking = raw.get("ranking_by", "geom")
    if ranking not in RANKINGS:
        raise task_error(path, "ranking_by", f"{ranking!r} is not one of {', '.join(RANKINGS)}")

    workloads = [Workload(name=f"bench{i}", params=dict(c), split="search") for i, c in enumerate(benchmarks)]
    workloads += [Workload(name=f"test{i}", params=dict(c), split="heldout") for i, c in enumerate(tests)]
    pool = tests or benchmarks
    smallest = min(range(len(pool)), key=lambda i: _size(pool[i]))
    source = "test" if tests else "bench"
    workloads.append(Workload(name="smoke", params=dict(pool[smallest]), split="smoke"))
    description = str(raw.get("description") or facts.docstring or "").strip()
    return Task(
        name=folder.name,
        title=description.splitlines()[0] if description else folder.name,
        dtype="unknown",
        style="gpumode",
        source_path=folder,
        workloads=workloads,
        description=description,
        candidate_entry="custom_kernel",
        smoke_derived=True,
        extras={
            "modules": modules,
            "ranking_by": ranking,
            "smoke_note": f"the smallest {'test' if tests else 'benchmark'} ({source}{smallest})",
        },
    )
