"""Where a GPU MODE evaluation's worker seconds go: the worker's operations in this process, profiled -> JSON.

    python bench/trimul_profile.py [--task FOLDER] [--candidates FILE ...] [--out PATH] [--heldout]

On a GPU. The operations a sandbox worker runs for a benchmark call (load, correctness on each search
workload, the candidate's timing on each) run here, in one process, each candidate in turn: per operation and
workload its wall seconds, and per candidate the functions that took the most time (cProfile, cumulative and
own time). The second candidate finds the first one's kept input draws, as in a search. `--heldout` adds
correctness on the held-out workloads (what final_evaluation checks) for the first candidate.

Defaults: GPU MODE's TriMul folder in .ext/reference-kernels and two published kernels from
.ext/K-Search/results/gpumode_trimul/.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_TASK = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"
DEFAULT_CANDIDATES = [
    ROOT / ".ext" / "K-Search" / "results" / "gpumode_trimul" / n for n in ("TTT.py", "shiyegao.py")
]
DEFAULT_OUT = ROOT / "bench" / "results" / "trimul-profile-h200.json"


def _top(prof: cProfile.Profile, key: str, n: int = 30) -> list[str]:
    out = io.StringIO()
    pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key).print_stats(n)
    lines = out.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    return [ln for ln in lines[start:] if ln.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    ap.add_argument("--candidates", type=Path, nargs="*", default=DEFAULT_CANDIDATES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--heldout", action="store_true")
    args = ap.parse_args()

    import torch

    from ksearch.gpu.sandbox.run import task_json
    from ksearch.gpu.tasks.gpumode import load_gpumode
    from ksearch.gpu.worker.state import WorkerState
    from ksearch.worldmodel.models import EvalSettings

    task = load_gpumode(args.task)
    settings = EvalSettings(seed=1234, timing_protocol="gpumode")
    state = WorkerState(torch.device("cuda:0"), {})
    tj = task_json(task)
    state.handle("task", {"task": tj})
    search = [w.name for w in task.by_split("search")]
    held = [w.name for w in task.by_split("heldout")]
    result: dict[str, Any] = {
        "what": "a GPU MODE evaluation's worker operations, in one process, per operation and workload (seconds) "
        "and the functions that took the most time",
        "task": str(args.task),
        "gpu": torch.cuda.get_device_name(0),
        "settings": {"trials": settings.trials, "timing_protocol": settings.timing_protocol},
        "candidates": [],
    }

    def op(name: str, a: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        t0 = time.perf_counter()
        r = state.handle(name, a)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, r

    for i, path in enumerate(args.candidates):
        src = path.read_text()
        entry: dict[str, Any] = {"candidate": path.name, "ops": []}
        prof = cProfile.Profile()
        prof.enable()
        drawn0 = state.inputs_s
        s, r = op("load", {"task": tj, "candidate": {"id": f"c{i}", "language": "triton", "source": src}})
        entry["ops"].append({"op": "load", "seconds": round(s, 3), "ok": r.get("ok")})
        names = search + (held if args.heldout and i == 0 else [])
        for wl in names:
            s, r = op("correctness", {"workload": wl, "seed": settings.seed, "trials": settings.trials})
            c = r["correctness"]
            entry["ops"].append({"op": "correctness", "workload": wl, "seconds": round(s, 3),
                                 "passed": c.get("passed"), "kind": c.get("kind")})  # fmt: skip
        for wl in search:
            a = {"workload": wl, "settings": settings.model_dump(), "which": "candidate"}
            s, r = op("benchmark", a)
            entry["ops"].append({"op": "benchmark", "workload": wl, "seconds": round(s, 3),
                                 "mean_us": r.get("mean_us"), "median_us": r.get("median_us")})  # fmt: skip
        prof.disable()
        entry["inputs_drawn_s"] = round(state.inputs_s - drawn0, 3)
        entry["total_s"] = round(sum(o["seconds"] for o in entry["ops"]), 3)
        entry["by_op"] = {
            k: round(sum(o["seconds"] for o in entry["ops"] if o["op"] == k), 3)
            for k in ("load", "correctness", "benchmark")
        }
        entry["top_cumulative"] = _top(prof, "cumulative")
        entry["top_own"] = _top(prof, "tottime")
        result["candidates"].append(entry)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"{path.name}: {entry['by_op']} inputs {entry['inputs_drawn_s']} s", flush=True)


if __name__ == "__main__":
    main()
