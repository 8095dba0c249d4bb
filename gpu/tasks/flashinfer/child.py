"""The child process that asks FlashInfer-Bench's own package (gpu/tasks/flashinfer/pkg.py starts it).

`python -m ksearch.gpu.tasks.flashinfer.child` reads requests on stdin, a JSON line each ({"op": OP, "request": {...}}),
and writes a JSON line on stdout for each: the answer, or {"error": "<FlashInfer-Bench's own message, with the
file and line>"}. OP is `read` (a definition and its workloads, with FlashInfer-Bench's settings for it),
`check_solution` or `write_solution`. This process imports flashinfer_bench, and with it torch.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ksearch.gpu.tasks.flashinfer.loader import FIB_INT_RANGES, FIB_MOE_MATCHED_RATIO

# Draws per integer dtype when measuring the range FlashInfer-Bench's input generator uses: with 2**16 draws
# from at most 2048 values, an end of the range is missed with probability below 1e-13.
_RANGE_DRAWS = 1 << 16


def _first(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc + ': ' if loc else ''}{str(err['msg']).removeprefix('Value error, ')}"


def _int_ranges() -> dict[str, tuple[int, int]]:
    """[low, high) of the random integers FlashInfer-Bench's own generator draws (its ranges are not exported
    as a setting: they are measured, on the CPU, from many draws)."""
    import torch
    from flashinfer_bench.bench import utils

    draw = getattr(utils, "_rand_tensor", None)
    if draw is None:  # a version without it: ksearch's record of them
        return dict(FIB_INT_RANGES)
    torch.manual_seed(0)
    out: dict[str, tuple[int, int]] = {}
    for name in FIB_INT_RANGES:
        t = draw([_RANGE_DRAWS], getattr(torch, name), torch.device("cpu"))
        out[name] = (int(t.min()), int(t.max()) + 1)
    return out


def _config(definition: Any) -> dict[str, Any]:
    import importlib.metadata

    from flashinfer_bench.bench.config import BenchmarkConfig
    from flashinfer_bench.bench.evaluators import resolve_evaluator

    cfg = BenchmarkConfig()
    evaluator = resolve_evaluator(definition).__name__
    ratio = cfg.required_matched_ratio
    if ratio is None:
        # the low-bit evaluator sets its ratio inside its check (not a setting): ksearch's record of it
        ratio = FIB_MOE_MATCHED_RATIO if evaluator == "LowBitEvaluator" else 1.0
    return {
        "reader": f"flashinfer-bench {importlib.metadata.version('flashinfer-bench')}",
        "atol": cfg.atol,
        "rtol": cfg.rtol,
        "matched_ratio": ratio,
        "evaluator": evaluator,
        "int_ranges": _int_ranges(),
        "warmup": cfg.warmup_runs,
        "iterations": cfg.iterations,
        "trials": cfg.num_trials,
    }


def _workload_rows(definition: Any, files: list[Path]) -> list[tuple[str, int, dict[str, Any]]] | str:
    """Each workload line for `definition`: a trace line (as TraceSet reads workloads/) or, in a loose JSONL, a
    bare workload. Lines for other definitions are not read further. A refused line: its file, line and why."""
    from flashinfer_bench.data import Trace, Workload

    rows: list[tuple[str, int, dict[str, Any]]] = []
    for f in files:
        for lineno, line in enumerate(f.read_text().splitlines(), 1):
            if not line.strip():
                continue
            where = f"{f} line {lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                return f"{where}: not valid JSON: {e.msg}"
            if not isinstance(obj, dict):
                return f"{where}: each line must be a JSON object"
            try:
                if "workload" in obj:
                    if obj.get("definition") not in (None, definition.name):
                        continue  # another definition's workload
                    workload = Trace.model_validate(obj).workload
                else:
                    workload = Workload.model_validate(obj)
            except ValidationError as e:
                return f"{where}: FlashInfer-Bench's workload model refuses it: {_first(e)}"
            rows.append((str(f), lineno, workload.model_dump(mode="json")))
    return rows


def read(request: dict[str, Any]) -> dict[str, Any]:
    from flashinfer_bench.data import Definition, load_json_file
    from flashinfer_bench.utils import dtype_str_to_torch_dtype

    path = Path(request["definition"])
    try:
        definition = load_json_file(Definition, path)
    except ValidationError as e:
        return {"error": f"{path}: FlashInfer-Bench's Definition model refuses it: {_first(e)}"}
    for field, specs in (("inputs", definition.inputs), ("outputs", definition.outputs)):
        for name, spec in specs.items():
            try:
                dtype_str_to_torch_dtype(spec.dtype.value)
            except (ValueError, AttributeError) as e:  # AttributeError: the torch dtype it maps to is missing
                import torch

                return {
                    "error": f"{path}: {field}.{name}.dtype: FlashInfer-Bench maps {spec.dtype.value!r} to a "
                    f"torch dtype this torch ({torch.__version__}) does not have ({e})"
                }
    if request["workloads"] is not None:
        files = [Path(request["workloads"])]
    else:  # a dataset: its TraceSet reads every JSONL under workloads/ and keeps each line by its definition
        files = sorted((Path(request["root"]) / "workloads").rglob("*.jsonl"))
    rows = _workload_rows(definition, files)
    if isinstance(rows, str):
        return {"error": rows}
    if not rows:
        where = request["workloads"] or f"any JSONL under {Path(request['root']) / 'workloads'}"
        return {"error": f"{where}: no workloads for definition {definition.name!r}"}
    return {"definition": definition.model_dump(mode="json"), "rows": rows, "config": _config(definition)}


def check_solution(request: dict[str, Any]) -> dict[str, Any]:
    from flashinfer_bench.data import Solution

    try:
        solution = Solution.model_validate_json(request["text"])
    except ValidationError as e:
        return {"error": _first(e)}
    return {"solution": solution.model_dump(mode="json")}


def write_solution(request: dict[str, Any]) -> dict[str, Any]:
    from flashinfer_bench.data import Solution, save_json_file

    try:
        solution = Solution.model_validate(request["solution"])
    except ValidationError as e:
        return {"error": _first(e)}
    with tempfile.TemporaryDirectory(prefix="ksearch-fib-") as d:
        out = Path(d) / "solution.json"
        save_json_file(solution, out)
        return {"text": out.read_text()}


OPS = {"read": read, "check_solution": check_solution, "write_solution": write_solution}


def main() -> None:
    """Answer requests, a JSON line each ({"op": ..., "request": ...}), until stdin closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever FlashInfer-Bench prints goes to stderr, never into an answer
    for line in sys.stdin:
        if not line.strip():
            continue
        asked = json.loads(line)
        op = OPS.get(asked.get("op"))
        answer = (
            op(asked["request"])
            if op
            else {"error": f"unknown question {asked.get('op')!r}; accepted: {', '.join(OPS)}"}
        )
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
