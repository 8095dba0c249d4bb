"""Survey the built-in suite on a GPU: each seed checked against the reference on every workload,
the error as a fraction of the tolerance, and eager vs seed times.

    python -m ksearch.gpu.tasks.survey [NAME ...] [--json OUT]

A developer's sanity check of the suite (sizes large enough, seeds correct), not the evaluator:
timing here is plain CUDA events around back-to-back calls, without the sandbox's safeguards.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.inputs import as_outputs, dtype_name
from ksearch.gpu.task import Tolerance
from ksearch.gpu.tasks import builtin_names, load_task
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module


def tolerance_use(got: torch.Tensor, exp: torch.Tensor, tol: Tolerance) -> float:
    """max |got - exp| / (atol + rtol |exp|): below 1 passes, the smaller the larger the margin."""
    if got.shape != exp.shape:
        return math.inf
    atol, rtol = tol.for_dtype(dtype_name(exp.dtype))
    g, e = got.double(), exp.double()
    ratio = (g - e).abs() / (atol + rtol * e.abs()).clamp_min(1e-300)
    return float(ratio.nan_to_num(math.inf).max()) if ratio.numel() else 0.0


def time_ms(fn: Any, inputs: list, reps: int) -> float:
    fn(inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn(inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def survey(name: str, scratch: Path, reps: int, lang: str = "triton") -> list[dict[str, Any]]:
    task = load_task(name)
    if lang not in task.seeds:
        return []
    rt = TaskRuntime(task)
    module = load_candidate_module(task.seeds[lang], f"seed_{lang}_{name}", scratch)
    rows = []
    for wl in task.workloads:
        if wl.split == "smoke":
            continue
        inputs = rt.make_inputs(wl, 0, "cuda")
        ref = rt.build_reference(wl, "cuda")
        cand = rt.build_candidate(module, wl, "cuda")
        expected = as_outputs(ref(inputs))
        got = as_outputs(cand(inputs))
        use = max(tolerance_use(g, e, rt.tolerance()) for g, e in zip(got, expected, strict=True))
        eager = time_ms(ref, inputs, reps)
        seed = time_ms(cand, inputs, reps)
        cost = rt.cost(wl)
        rows.append({
            "task": name, "lang": lang, "workload": wl.name, "split": wl.split, "tolerance_use": use, "correct": use <= 1.0,
            "eager_ms": eager, "seed_ms": seed,
            "eager_tflops": cost.flops / eager / 1e9 if cost else None,
            "eager_gbps": cost.bytes / eager / 1e6 if cost else None,
        })  # fmt: skip
        del inputs, expected, got
        torch.cuda.empty_cache()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--lang", default="triton", help="which seed to run: triton or cuda")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.names or builtin_names():
            try:
                rows += survey(name, Path(scratch), args.reps, args.lang)
            except Exception as exc:
                rows.append({"task": name, "error": f"{type(exc).__name__}: {exc}"})
            last = [r for r in rows if r["task"] == name]
            for r in last:
                if "error" in r:
                    print(f"{name:18s} ERROR {r['error']}", flush=True)
                else:
                    print(f"{name:18s} {r['workload']:18s} {r['split']:8s} tol-use {r['tolerance_use']:.3g} "
                          f"eager {r['eager_ms']:.3f} ms seed {r['seed_ms']:.3f} ms "
                          f"eager {r['eager_tflops'] or 0:.1f} TFLOP/s {r['eager_gbps'] or 0:.0f} GB/s", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
