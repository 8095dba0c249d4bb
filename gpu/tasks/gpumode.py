"""GPU MODE importer: a task folder with task.yml and reference.py -> Task.

task.yml lists `tests` and `benchmarks` as parameter mappings for `generate_input(**params)`, a
`ranking_by` rule, and `files` (module name -> source path, e.g. utils.py from ../utils.py).
reference.py defines `generate_input`, `ref_kernel(data)` and `check_implementation(data, output)`.
Candidates define `custom_kernel(data)`.

Mapping: benchmarks -> search workloads (what the leaderboard ranks), tests -> held-out
workloads (checked by the final evaluation), the smallest test -> the smoke workload.

Parameters reach generate_input as GPU MODE's evaluator hands them over: the platform writes each case as
`name: value` text and the evaluator reads back integers (and, in its grouped-GEMM variant, lists of
integers) and leaves everything else text, so task.yml's `nomask: False` arrives as the string "False"
(which is true). Workload params hold those values. A `seed` parameter is combined with the trial's seed at
run time (gpu/tasks/rt/gpumode.py), as the evaluator combines it with its secret seed in ranked runs.

Refused at load: a generate_input that needs a parameter no workload gives (`rank` in the multi-GPU
tasks, which the evaluator runs once per rank). Noted at load: a reference that pins tensors to CUDA
(`extras["needs_gpu"]`), and how the folder's evaluator times (`extras["evaluator"]`, for the `gpumode`
timing protocol).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any, cast

import yaml

from ksearch.gpu.task import Task, TaskError, Workload
from ksearch.gpu.tasks.literals import ModuleFacts
from ksearch.gpu.tasks.specs import task_error

RANKINGS = ("last", "mean", "geom")
# GPU MODE's platform reads a task.yml without `ranking_by` as ranking by the last benchmark alone.
DEFAULT_RANKING = "last"
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


def _check_required(
    facts: ModuleFacts, ref: Path, path: Path, cases: dict[str, list[dict[str, Any]]]
) -> None:
    """Every parameter generate_input needs (no default) must be given by every workload; `seed` is supplied."""
    fn = facts.functions.get("generate_input")
    if fn is None:
        return
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    required = [p.arg for p in positional[: len(positional) - len(a.defaults)]]
    required += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    for key, items in cases.items():
        for i, case in enumerate(items):
            missing = [p for p in required if p not in case and p != "seed"]
            if missing:
                why = (
                    "; GPU MODE's evaluator runs this multi-GPU task once per rank, which ksearch does not"
                    if "rank" in missing
                    else ""
                )
                raise task_error(
                    path,
                    f"{key}[{i}]",
                    f"generate_input needs {', '.join(missing)}, which the workload does not give "
                    f"({ref.name}: generate_input({', '.join(p.arg for p in positional)})){why}",
                )


def spec_value(value: Any) -> Any:
    """A task.yml value as GPU MODE's evaluator hands it to generate_input (see the module docstring)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return value  # a float or a mapping: no GPU MODE evaluator reads one back; passed unchanged


def _text_notes(cases: list[dict[str, Any]]) -> list[str]:
    """Booleans the evaluator turns into text: say so, since 'False' is true in Python."""
    names = sorted({k for c in cases for k, v in c.items() if isinstance(v, bool)})
    return [
        f"{n}: task.yml gives booleans, which GPU MODE's evaluator passes to generate_input as the text "
        f"'True' or 'False' (both true in Python); ksearch passes them the same way"
        for n in names
    ]


def _cuda_pin(node: ast.AST) -> str | None:
    """How `node` pins a tensor to CUDA unconditionally, if it does (a conditional like
    `"cuda" if torch.cuda.is_available() else "cpu"` is no pin)."""

    def is_cuda(v: ast.AST | None) -> bool:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return v.value.startswith("cuda")
        if isinstance(v, ast.JoinedStr) and v.values:  # f"cuda:{rank}"
            return is_cuda(v.values[0])
        return False

    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        for kw in node.keywords:
            if kw.arg == "device" and is_cuda(kw.value):
                return f"device={ast.unparse(kw.value)}"
        if name == "cuda" and isinstance(func, ast.Attribute):
            return ".cuda()"
        if name in ("device", "to") and node.args and is_cuda(node.args[0]):
            return f"{name}({ast.unparse(node.args[0])})"
    if isinstance(node, ast.Assign | ast.AnnAssign) and is_cuda(node.value):
        return ast.unparse(node).splitlines()[0]
    return None


def needs_gpu(ref: Path, tree: ast.Module) -> str | None:
    """Why the reference cannot run on a CPU-only machine (the first unconditional CUDA pin), or None."""
    pins = [(getattr(n, "lineno", 0), pin) for n in ast.walk(tree) if (pin := _cuda_pin(n)) is not None]
    if not pins:
        return None
    line, pin = min(pins)
    more = f" (and {len(pins) - 1} more)" if len(pins) > 1 else ""
    return f"{ref.name} line {line} puts tensors on CUDA: {pin}{more}"


def _rel_err_stop(fns: list[ast.FunctionDef]) -> float | None:
    """The `stats.err / stats.mean < X` threshold at which the benchmark loop stops early."""
    for f in fns:
        for c in ast.walk(f):
            if (
                isinstance(c, ast.Compare)
                and isinstance(c.left, ast.BinOp)
                and isinstance(c.left.op, ast.Div)
                and getattr(c.left.left, "attr", None) == "err"
                and isinstance(c.comparators[0], ast.Constant)
            ):
                return float(cast(Any, c.comparators[0].value))  # a number in every GPU MODE eval.py
    return None


def evaluator_facts(modules: dict[str, str]) -> dict[str, Any]:
    """How the folder's own eval.py times a benchmark: its timer ("events": CUDA events around each call,
    "host": the host clock around a synchronized call, "cudagraph": graph replays), whether it flushes the L2
    before each call, and the relative standard error of the mean at which it stops."""
    path = modules.get("eval")
    facts: dict[str, Any] = {"path": path, "timer": "unknown", "clears_l2": False, "rel_err_stop": 0.001}
    if path is None:
        return facts
    try:
        tree = ast.parse(Path(path).read_text(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return facts
    benches = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and "benchmark" in f.name.lower()]
    names: list[str] = [
        str(getattr(c.func, "attr", None) or getattr(c.func, "id", ""))
        for f in benches
        for c in ast.walk(f)
        if isinstance(c, ast.Call)
    ]
    if any("cudagraph" in (f.name.lower()) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)):
        facts["timer"] = "cudagraph"
    elif "Event" in names:
        facts["timer"] = "events"
    elif "perf_counter_ns" in names:
        facts["timer"] = "host"
    facts["clears_l2"] = any("clear_l2" in n for n in names)
    stop = _rel_err_stop(benches)
    if stop is not None:
        facts["rel_err_stop"] = stop
    return facts


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
    _check_required(facts, ref, path, {"benchmarks": benchmarks, "tests": tests})
    ranking = raw.get("ranking_by", DEFAULT_RANKING)
    if ranking not in RANKINGS:
        raise task_error(path, "ranking_by", f"{ranking!r} is not one of {', '.join(RANKINGS)}")

    def params(case: dict[str, Any]) -> dict[str, Any]:
        return {k: spec_value(v) for k, v in case.items()}

    workloads = [
        Workload(name=f"bench{i}", params=params(c), split="search") for i, c in enumerate(benchmarks)
    ]
    workloads += [Workload(name=f"test{i}", params=params(c), split="heldout") for i, c in enumerate(tests)]
    pool = tests or benchmarks
    smallest = min(range(len(pool)), key=lambda i: _size(pool[i]))
    source = "test" if tests else "bench"
    workloads.append(Workload(name="smoke", params=params(pool[smallest]), split="smoke"))
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
            "ranking_declared": "ranking_by" in raw,
            "smoke_note": f"the smallest {'test' if tests else 'benchmark'} ({source}{smallest})",
            "needs_gpu": needs_gpu(ref, facts.tree),
            "evaluator": evaluator_facts(modules),
            "notes": _text_notes(benchmarks + tests),
        },
    )
