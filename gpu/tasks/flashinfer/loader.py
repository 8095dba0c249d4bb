"""FlashInfer-Bench importer: a definition JSON plus its workloads JSONL -> Task.

Definition: named const/var axes, ordered named inputs and outputs (dtype, shape over axes, or
shape null for a Python scalar), optional constraints between axes, and a PyTorch reference
defining `run(...)`, called positionally with the inputs in order. Workloads JSONL: one workload a line
(bare, or wrapped as {"definition": ..., "workload": {...}}) giving every var axis a value and each input a
source: {"type": "random"}, {"type": "scalar", "value": ...} or {"type": "safetensors", "path":
..., "tensor_key": ...}. As an extension, a random integer input may state "low"/"high" bounds. A field
written without its default (FlashInfer-Bench's `save_json_file` leaves them out: an axis `{}` or
`{"value": 256}`, an input source without `type`) is read as FlashInfer-Bench's models read it.

Two readers (`_read`): FlashInfer-Bench's own package where it is in use (gpu/tasks/flashinfer/pkg.py: its models,
its TraceSet's way of gathering a dataset's workloads, its configuration), else the minimal one here, with
ksearch's record of its settings (the constants below). Both feed the same checks and the same Task.

Read as FlashInfer-Bench reads it: in a FlashInfer-Trace dataset (the TraceSet layout,
`<root>/definitions/<op_type>/<name>.json`, `<root>/workloads/<op_type>/<name>.jsonl`,
`<root>/blob/...`) safetensors paths are relative to the dataset root; an input a workload does not
describe is random (a scalar one too); random integers are drawn in FlashInfer-Bench's ranges; and
outputs are judged by its default rule (FIB_ATOL / FIB_RTOL, all elements or, for MoE definitions,
FIB_MOE_MATCHED_RATIO of them).

Splits: with three or more workloads every third one is held out; the smoke workload is derived
from the smallest one (var axes capped at SMOKE_AXIS_CAP when all its inputs are random).
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

from ksearch.gpu.dtypes import FLOAT_DTYPES, FP4_DTYPES, FP8_DTYPES, accepted_dtypes, canonical_dtype
from ksearch.gpu.task import Task, TaskError, Tolerance, Workload
from ksearch.gpu.tasks.flashinfer import pkg as fib_pkg
from ksearch.gpu.tasks.flashinfer.pkg import FibConfig
from ksearch.gpu.tasks.specs import task_error

SMOKE_AXIS_CAP = 16
INPUT_TYPES = ("random", "scalar", "safetensors")
# What a Solution built by FlashInfer-Bench's own builders needs of the definition (gpu/fib_build.py)
_DEFINITION_KEYS = ("name", "op_type", "description", "axes", "inputs", "outputs", "reference", "constraints")

# FlashInfer-Bench's default evaluator: an element fails when it is off by more than FIB_ATOL *and*
# by more than FIB_RTOL relative to the reference; every element must pass, except for MoE
# definitions (op_type "moe", or a name with "moe_fp8_block_scale"), where FIB_MOE_MATCHED_RATIO do.
FIB_ATOL = 1e-2
FIB_RTOL = 1e-2
FIB_MOE_MATCHED_RATIO = 0.95
# How FlashInfer-Bench's runner times a solution (bench/config.py's defaults, bench/timing.py's call of FlashInfer's
# bench_gpu_time_with_cupti): the `flashinfer` timing protocol reproduces it (gpu/worker/protocol_flashinfer.py). "timer":
# "cupti" (its CUPTI kernel span) or "events" (its loop when cupti-python is missing). It never uses CUDA graphs.
FIB_EVALUATOR: dict[str, Any] = {
    "warmup": 10,
    "iterations": 50,
    "trials": 3,
    "cold_l2": True,
    "timer": "cupti",
    "cuda_graph": False,
}
# Random integer inputs, [low, high) per dtype, as FlashInfer-Bench draws them (other dtypes keep
# ksearch's defaults: FlashInfer-Bench definitions cannot declare them).
FIB_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-128, 128),
    "int16": (-1024, 1024),
    "int32": (-1024, 1024),
    "int64": (-1024, 1024),
}


# --------------------------------------------------------------------------- definition


def _axes(raw: Any, path: Path) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise task_error(path, "axes", 'must be a mapping of axis name -> {"type": "const"|"var", ...}')
    axes: dict[str, dict[str, Any]] = {}
    for name, spec in raw.items():
        if isinstance(spec, dict) and "type" not in spec:
            # FlashInfer-Bench's own writer leaves defaults out: {"value": 256} is a const axis, {} a var one
            spec = {**spec, "type": "const" if "value" in spec else "var"}
        if not isinstance(spec, dict) or spec.get("type") not in ("const", "var"):
            got = spec.get("type") if isinstance(spec, dict) else spec
            raise task_error(path, f"axes.{name}.type", f"{got!r} is not one of const, var")
        if spec["type"] == "const":
            v = spec.get("value")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise task_error(
                    path, f"axes.{name}.value", f"a const axis needs an integer value >= 0, got {v!r}"
                )
            axes[name] = {"type": "const", "value": v}
        else:
            axes[name] = {"type": "var"}
    return axes


def _tensors(raw: Any, path: Path, field: str, axes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict) or not raw:
        raise task_error(
            path, field, 'must be a mapping of name -> {"shape": [axis, ...] | null, "dtype": ...}'
        )
    out: dict[str, dict[str, Any]] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise task_error(path, f"{field}.{name}", "must be a mapping with shape and dtype")
        if "dtype" not in spec:
            raise task_error(path, f"{field}.{name}.dtype", "missing")
        dtype = canonical_dtype(spec["dtype"])
        if dtype is None:
            raise task_error(
                path,
                f"{field}.{name}.dtype",
                f"unknown dtype {spec['dtype']!r}; accepted: {accepted_dtypes()}",
            )
        if "shape" not in spec:
            raise task_error(
                path, f"{field}.{name}.shape", "missing (a list of axis names, or null for a scalar)"
            )
        shape = spec["shape"]
        if shape is not None:
            if not isinstance(shape, list) or not all(isinstance(a, str) for a in shape):
                raise task_error(
                    path, f"{field}.{name}.shape", f"must be a list of axis names or null, got {shape!r}"
                )
            for a in shape:
                if a not in axes:
                    raise task_error(
                        path,
                        f"{field}.{name}.shape",
                        f"axis {a!r} is not declared in axes ({', '.join(axes)})",
                    )
        out[name] = {"shape": shape, "dtype": dtype}
    return out


def _reference(raw: Any, path: Path, inputs: dict[str, Any]) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise task_error(path, "reference", "missing; it is PyTorch source defining run(...)")
    try:
        tree = ast.parse(raw)
    except SyntaxError as exc:
        raise task_error(path, "reference", f"line {exc.lineno}: syntax error: {exc.msg}") from None
    run = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"), None)
    if run is None:
        raise task_error(path, "reference", "defines no top-level function `run`")
    # FlashInfer-Bench calls the reference positionally, inputs in the definition's order, whatever its
    # parameters are named; it checks their number (any number up to the inputs' with *args)
    a = run.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    required_kw = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    n = len(inputs)
    if required_kw or (len(positional) > n if a.vararg else len(positional) != n):
        takes = ", ".join([*positional, *(["*" + a.vararg.arg] if a.vararg else []), *required_kw])
        raise task_error(
            path,
            "reference",
            f"run({takes}) cannot take the {n} input(s) positionally, in the definition's order "
            f"({', '.join(inputs)}), as FlashInfer-Bench calls it: it needs {n} positional parameter(s)",
        )
    return raw


def _constraints(raw: Any, path: Path, axes: dict[str, Any]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise task_error(
            path, "constraints", 'must be a list of expressions over axes, e.g. "H_qo == H_kv * 4"'
        )
    for i, expr in enumerate(raw):
        try:
            names = {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}
        except SyntaxError:
            raise task_error(path, f"constraints[{i}]", f"not an expression: {expr!r}") from None
        unknown = names - set(axes)
        if unknown:
            raise task_error(path, f"constraints[{i}]", f"unknown axis {sorted(unknown)[0]!r} in {expr!r}")
    return list(raw)


def eval_constraint(expr: str, values: dict[str, int]) -> bool:
    """Evaluate a constraint with only axis names, numbers, arithmetic and comparisons."""
    allowed = (
        ast.Expression, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load,
        ast.And, ast.Or, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Add, ast.Sub,
        ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub,
    )  # fmt: skip
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise TaskError(f"constraint {expr!r}: {type(node).__name__} is not allowed")
    return bool(eval(compile(tree, "<constraint>", "eval"), {"__builtins__": {}}, dict(values)))


# --------------------------------------------------------------------------- workloads


def _bind_axes(raw: Any, where: str, axes: dict[str, Any]) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: axes: must be a mapping of var axis -> integer")
    values: dict[str, int] = {}
    for name, spec in axes.items():
        if spec["type"] == "const":
            if name in raw and raw[name] != spec["value"]:
                raise TaskError(
                    f"{where}: axes.{name}: const axis is {spec['value']}, the workload says {raw[name]!r}"
                )
            continue
        if name not in raw:
            raise TaskError(f"{where}: axes.{name}: var axis {name!r} has no value in this workload")
        v = raw[name]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise TaskError(f"{where}: axes.{name}: must be an integer >= 0, got {v!r}")
        values[name] = v
    unknown = set(raw) - set(axes)
    if unknown:
        raise TaskError(
            f"{where}: axes.{sorted(unknown)[0]}: not an axis of the definition ({', '.join(axes)})"
        )
    return values


def _bind_inputs(
    raw: Any, where: str, inputs: dict[str, Any], bases: list[Path], root: Path | None = None
) -> dict[str, dict[str, Any]]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: inputs: must be a mapping of input name -> descriptor")
    unknown = set(raw) - set(inputs)
    if unknown:
        raise TaskError(
            f"{where}: inputs.{sorted(unknown)[0]}: not an input of the definition ({', '.join(inputs)})"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, spec in inputs.items():
        desc = raw.get(name, {"type": "random"})
        field = f"{where}: inputs.{name}"
        if isinstance(desc, dict) and "type" not in desc:
            # written without its default: its fields say which it is, as FlashInfer-Bench's model reads it
            kind = (
                "safetensors"
                if "path" in desc and "tensor_key" in desc
                else "scalar"
                if "value" in desc
                else "random"
            )
            desc = {**desc, "type": kind}
        if not isinstance(desc, dict) or desc.get("type") not in INPUT_TYPES:
            got = desc.get("type") if isinstance(desc, dict) else desc
            raise TaskError(f"{field}.type: {got!r} is not one of {', '.join(INPUT_TYPES)}")
        kind = desc["type"]
        if spec["shape"] is None and kind == "safetensors":
            raise TaskError(f"{field}: a scalar input cannot come from a safetensors file")
        if kind == "scalar":
            if "value" not in desc or not isinstance(desc["value"], int | float | bool):
                raise TaskError(f"{field}.value: a scalar input needs a number or bool value")
            out[name] = {"type": "scalar", "value": desc["value"]}
        elif kind == "safetensors":
            for key in ("path", "tensor_key"):
                if not isinstance(desc.get(key), str) or not desc[key]:
                    raise TaskError(f"{field}.{key}: required for a safetensors input")
            out[name] = {"type": "safetensors", "path": str(_find_file(desc["path"], bases, field, root)),
                         "tensor_key": desc["tensor_key"]}  # fmt: skip
        else:
            entry: dict[str, Any] = {"type": "random"}
            for key in ("low", "high"):
                if key in desc:
                    if not isinstance(desc[key], int):
                        raise TaskError(f"{field}.{key}: must be an integer")
                    entry[key] = desc[key]
            out[name] = entry
    return out


def _find_file(ref: str, bases: list[Path], field: str, root: Path | None) -> Path:
    p = Path(ref).expanduser()
    candidates = [p] if p.is_absolute() else [b / p for b in bases]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    looked = ", ".join(str(c) for c in candidates)
    where = (
        f"paths are relative to the dataset root {root}; " if root is not None and not p.is_absolute() else ""
    )
    raise TaskError(f"{field}.path: safetensors file not found ({where}looked at: {looked})")


def dataset_root(definition: Path) -> Path | None:
    """The FlashInfer-Trace dataset (TraceSet) a definition belongs to: the folder above its `definitions/`."""
    for parent in definition.resolve().parents:
        if parent.name == "definitions":
            return parent.parent
    return None


def find_workloads_file(definition: Path, name: str | None = None) -> Path:
    """The JSONL next to a definition, or, in a dataset, where FlashInfer-Trace keeps it.

    In a dataset the workloads of `name` are at the definition's place under workloads/, else in a
    `<name>.jsonl` under any op-type folder there (FlashInfer-Bench reads every JSONL under workloads/)."""
    stem = definition.stem
    tried = [
        definition.with_suffix(".jsonl"),
        definition.parent / f"{stem}.workloads.jsonl",
        definition.parent / "workloads.jsonl",
    ]
    parts = definition.parts
    if "definitions" in parts:
        i = len(parts) - 1 - parts[::-1].index("definitions")
        tried.append(Path(*parts[:i], "workloads", *parts[i + 1 :]).with_suffix(".jsonl"))
    for p in tried:
        if p.is_file():
            return p
    root = dataset_root(definition)
    if root is not None and (root / "workloads").is_dir():
        found = sorted((root / "workloads").rglob(f"{name or stem}.jsonl"))
        if found:
            return found[0]
        tried.append(root / "workloads" / "**" / f"{name or stem}.jsonl")
    raise TaskError(
        f"{definition}: no workloads JSONL found for this definition; looked for: {', '.join(str(p) for p in tried)}"
    )


def minimal_config(name: str, op_type: str) -> FibConfig:
    """FlashInfer-Bench's settings for a definition as ksearch records them (the reader without its package)."""
    return FibConfig(
        reader="minimal",
        atol=FIB_ATOL,
        rtol=FIB_RTOL,
        matched_ratio=matched_ratio(name, op_type),
        evaluator="DefaultEvaluator",
        int_ranges=dict(FIB_INT_RANGES),
        warmup=FIB_EVALUATOR["warmup"],
        iterations=FIB_EVALUATOR["iterations"],
        trials=FIB_EVALUATOR["trials"],
    )


def fib_tolerance(config: FibConfig) -> Tolerance:
    """FlashInfer-Bench's default rule as a ksearch Tolerance (for the checks that use one).

    The task's own check (FlashInferRuntime.check) applies the exact rule; on float outputs ksearch's
    |d| <= atol + rtol*|ref| with the same numbers is never stricter than FlashInfer-Bench's
    (|d| <= atol or |d| <= rtol*|ref|)."""
    floats = (*FLOAT_DTYPES, *FP8_DTYPES, *FP4_DTYPES)
    return Tolerance(
        atol=dict.fromkeys(floats, config.atol),
        rtol=dict.fromkeys(floats, config.rtol),
        mismatch_ratio=round(1.0 - config.matched_ratio, 6),
    )


def evaluator_notes(name: str, op_type: str, config: FibConfig) -> list[str]:
    """Where ksearch judges a definition differently from FlashInfer-Bench: with its package, the evaluators it
    resolves besides its default rule (and the low-bit one, a matched ratio); without, ksearch's record."""
    if config.reader == "minimal":
        return special_evaluator_notes(name, op_type)
    if config.evaluator in ("DefaultEvaluator", "LowBitEvaluator"):
        return []
    return [
        f"FlashInfer-Bench judges this definition with its {config.evaluator}; ksearch applies the default rule "
        f"(atol {config.atol:g} and rtol {config.rtol:g} on every output), which may be stricter here"
    ]


def special_evaluator_notes(name: str, op_type: str) -> list[str]:
    """Where ksearch judges a definition differently from FlashInfer-Bench: the definitions it gives a special
    evaluator (bench/evaluators/), which ksearch judges by the default rule, stricter there."""
    if op_type == "sampling":
        how = "its sampling evaluator (sampled frequencies within a total variation distance of 0.2)"
    elif name.startswith("dsa_topk_indexer"):
        how = "its top-k indexer evaluator (valid, unique indices; the scores at them compared sorted)"
    elif name in (
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1",
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    ):
        how = "its DSA sparse-attention evaluator (the lse output optional)"
    else:
        return []
    return [
        f"FlashInfer-Bench judges this definition with {how}; ksearch applies the default rule (atol and rtol "
        "1e-2 on every output), which is stricter here"
    ]


def matched_ratio(name: str, op_type: str) -> float:
    """The fraction of output elements that must pass, as FlashInfer-Bench's evaluators require."""
    return FIB_MOE_MATCHED_RATIO if op_type == "moe" or "moe_fp8_block_scale" in name else 1.0


def _read_jsonl(path: Path, definition_name: str) -> list[tuple[str, int, dict[str, Any]]]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from None
    rows: list[tuple[str, int, dict[str, Any]]] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path} line {lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise TaskError(f"{path} line {lineno}: each line must be a JSON object")
        if "workload" in obj:
            if obj.get("definition") not in (None, definition_name):
                continue  # a shared file: another definition's workload
            obj = obj["workload"]
            if not isinstance(obj, dict):
                raise TaskError(f"{path} line {lineno}: workload: must be a JSON object")
        rows.append((str(path), lineno, obj))
    if not rows:
        raise TaskError(f"{path}: no workloads for definition {definition_name!r}")
    return rows


def _input_numel(inputs: dict[str, Any], axes: dict[str, Any], values: dict[str, int]) -> int:
    total = 0
    for spec in inputs.values():
        if spec["shape"] is not None:
            total += math.prod(axis_value(a, axes, values) for a in spec["shape"])
    return total


def axis_value(name: str, axes: dict[str, Any], values: dict[str, int]) -> int:
    spec = axes[name]
    return int(spec["value"]) if spec["type"] == "const" else int(values[name])


def _smoke(
    workloads: list[Workload], axes: dict[str, Any], inputs: dict[str, Any], constraints: list[str]
) -> tuple[Workload, str]:
    smallest = min(workloads, key=lambda w: _input_numel(inputs, axes, w.params["axes"]))
    params = json.loads(json.dumps(smallest.params))
    if all(d["type"] != "safetensors" for d in params["inputs"].values()):
        capped = {k: min(v, SMOKE_AXIS_CAP) for k, v in params["axes"].items()}
        if all(eval_constraint(c, {**_consts(axes), **capped}) for c in constraints):
            params["axes"] = capped
            return (Workload(name="smoke", params=params, split="smoke"),
                    f"derived from {smallest.name!r} with var axes capped at {SMOKE_AXIS_CAP}")  # fmt: skip
    return (Workload(name="smoke", params=params, split="smoke"),
            f"a copy of {smallest.name!r} (file inputs or constraints prevent shrinking; may be slow on the CPU)")  # fmt: skip


def _consts(axes: dict[str, Any]) -> dict[str, int]:
    return {k: v["value"] for k, v in axes.items() if v["type"] == "const"}


# --------------------------------------------------------------------------- entry


def load_definition(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(raw, dict):
        raise TaskError(f"{path}: a FlashInfer-Bench definition is a JSON object")
    return raw


def _read(
    path: Path, raw: dict[str, Any], workloads_path: Path | None, root: Path | None
) -> tuple[dict[str, Any], list[tuple[str, int, dict[str, Any]]], FibConfig, Path]:
    """The definition, its workload lines (file, line, workload), FlashInfer-Bench's settings for it and the
    workloads file: through FlashInfer-Bench's package where it is in use (gpu/tasks/flashinfer/pkg.py), else read
    here. In a dataset, the package gathers the definition's workloads from every JSONL under `workloads/`
    as its TraceSet does, and ksearch's reader looks for `<name>.jsonl` there."""
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise task_error(path, "name", "missing; a definition needs a unique name")
    if fib_pkg.in_use():
        named = workloads_path or (find_workloads_file(path, name) if root is None else None)
        got = fib_pkg.read(path, named, root)
        first = Path(got.rows[0][0])
        return got.definition, got.rows, got.config, first
    wpath = workloads_path or find_workloads_file(path, name)
    op_type = str(raw.get("op_type") or raw.get("type") or "")
    return raw, _read_jsonl(wpath, name), minimal_config(name, op_type), wpath


def load_flashinfer(path: Path, workloads_path: Path | None = None) -> Task:
    path = path.resolve()
    root = dataset_root(path)
    raw, rows, config, wpath = _read(
        path, load_definition(path), workloads_path.resolve() if workloads_path else None, root
    )
    name = str(raw["name"])
    axes = _axes(raw.get("axes"), path)
    inputs = _tensors(raw.get("inputs"), path, "inputs", axes)
    outputs = _tensors(raw.get("outputs"), path, "outputs", axes)
    reference = _reference(raw.get("reference"), path, inputs)
    constraints = _constraints(raw.get("constraints"), path, axes)

    wpath = wpath.resolve()
    # FlashInfer-Bench resolves a dataset's safetensors paths against its root only; loose files
    # (no dataset around them) against the JSONL's folder, the definition's, then the working directory.
    bases = [root] if root is not None else [wpath.parent, path.parent, Path.cwd()]
    workloads: list[Workload] = []
    seen: set[str] = set()
    for file, lineno, obj in rows:
        where = f"{file} line {lineno}"
        values = _bind_axes(obj.get("axes", {}), where, axes)
        for c in constraints:
            if not eval_constraint(c, {**_consts(axes), **values}):
                raise TaskError(f"{where}: axes: constraint {c!r} does not hold for {values}")
        descs = _bind_inputs(obj.get("inputs"), where, inputs, bases, root)
        wname = str(obj.get("uuid") or f"w{len(workloads)}")[:8]
        if wname in seen:
            wname = f"{wname}-{len(workloads)}"
        seen.add(wname)
        workloads.append(Workload(name=wname, params={"axes": values, "inputs": descs}, split="search"))
    if len(workloads) >= 3:
        for i, w in enumerate(workloads):
            if i % 3 == 2:
                w.split = "heldout"
    smoke, smoke_note = _smoke(workloads, axes, inputs, constraints)
    workloads.append(smoke)

    op_type = str(raw.get("op_type") or raw.get("type") or "")
    out_dtypes = [o["dtype"] for o in outputs.values()]
    dtype = next((d for d in out_dtypes if d in (*FLOAT_DTYPES, *FP8_DTYPES, *FP4_DTYPES)), out_dtypes[0])
    description = str(raw.get("description") or "")
    return Task(
        name=name,
        title=description.splitlines()[0] if description else name,
        op=op_type,
        dtype=dtype,
        declared=["dtype", "op"] if op_type else ["dtype"],
        style="flashinfer",
        source_path=path,
        workloads=workloads,
        description=description,
        candidate_entry="run",
        smoke_derived=True,
        has_cost=True,
        tolerance=fib_tolerance(config),
        extras={
            "axes": axes,
            "inputs": inputs,
            "outputs": outputs,
            "reference": reference,
            "constraints": constraints,
            "workloads_path": str(wpath),
            "dataset_root": str(root) if root is not None else None,
            "matched_ratio": config.matched_ratio,
            "tags": list(raw.get("tags") or []),
            "smoke_note": smoke_note,
            "evaluator": {
                **FIB_EVALUATOR,
                "warmup": config.warmup,
                "iterations": config.iterations,
                "trials": config.trials,
            },
            "fib": config.model_dump(mode="json"),
            "definition": {k: raw[k] for k in _DEFINITION_KEYS if k in raw},
            "notes": evaluator_notes(name, op_type, config),
        },
    )
