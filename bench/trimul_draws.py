"""Where a GPU MODE final evaluation's seconds per timed call go on TriMul: drawing the call's fresh inputs (on the
CPU as the owner's code draws them, with the fills made on the GPU, kept or not) and running the check -> JSON.

    python bench/trimul_draws.py [--task FOLDER] [--out bench/results/trimul-draws-h200.json]

Per Cauchy benchmark (and one normal one), fresh seeds each time, in one process:
- `cpu_draw_s`: generate_input as the owner's code runs it, the Cauchy fill on the CPU;
- `gpu_fills_s`: the same under gpu/tasks/draws/gpu_fills.py (a fill of fresh memory kept on the GPU until read:
  gpu/tasks/draws/lazy_fills.py);
- `gpu_fills_via_host_s`: the same with every fill written into its CPU tensor (the values cross to the host and
  back, as before fills were kept on the GPU);
- `make_inputs_once_s` / `make_inputs_kept_s`: ksearch's runtime drawing it (fills on the GPU) for a call asked for
  once (a final evaluation's per-call data) and for one that is kept (a host copy and a checksum);
- `check_s`: the task's check_implementation on the data and a correct output (it runs the reference).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.gpu.tasks import load_task  # noqa: E402
from ksearch.gpu.tasks.draws import gpu_fills  # noqa: E402
from ksearch.gpu.tasks.draws.lazy_fills import LazyFills  # noqa: E402
from ksearch.gpu.tasks.rt.common import seed_everything  # noqa: E402
from ksearch.gpu.tasks.rt.runtime import TaskRuntime  # noqa: E402

DEFAULT_TASK = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"


def _timed(fn: Any, reps: int) -> float:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return round(statistics.median(out), 3)


def via_host(owner: Any) -> Any:
    keep = LazyFills.can_keep
    LazyFills.can_keep = lambda self, t: False  # type: ignore[method-assign]
    try:
        return owner(True)
    finally:
        LazyFills.can_keep = keep  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "trimul-draws-h200.json")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workloads", default="bench1,bench4,bench6")
    a = ap.parse_args()
    task = load_task(str(a.task))
    rt = TaskRuntime(task)
    impl = rt._impl
    gen, check, ref = (
        impl.reference.generate_input,
        impl.reference.check_implementation,
        impl.reference.ref_kernel,
    )
    seeds = iter(range(10_000, 20_000, 13))
    rows: dict[str, Any] = {}
    torch.zeros(1, device="cuda")
    for name in a.workloads.split(","):
        wl = task.workload(name)
        params = {k: v for k, v in wl.params.items()}

        def owner(fills: bool, params: dict[str, Any] = params) -> Any:
            s = next(seeds)
            seed_everything(s)
            ctx = gpu_fills.gpu_fills("cuda", s) if fills else contextlib.nullcontext()
            with ctx:
                return gen(**{**params, "seed": s})

        row = {
            "params": params,
            "cpu_draw_s": _timed(
                lambda: owner(False), 1 if params.get("distribution") == "cauchy" else a.reps
            ),
            "gpu_fills_s": _timed(lambda: owner(True), a.reps),
            "gpu_fills_via_host_s": _timed(lambda: via_host(owner), a.reps),
            "make_inputs_once_s": _timed(lambda: rt.make_inputs(wl, next(seeds), "cuda", once=True), a.reps),  # noqa: B023
            "make_inputs_kept_s": _timed(lambda: rt.make_inputs(wl, next(seeds), "cuda"), a.reps),  # noqa: B023
        }
        data = rt.make_inputs(wl, next(seeds), "cuda", once=True)[0]
        out = ref(data)
        row["check_s"] = _timed(lambda: check(data, out), a.reps)  # noqa: B023
        rows[name] = row
        print(name, row, flush=True)
    res = {
        "what": __doc__.split("\n\n")[0],
        "task": str(a.task),
        "device": torch.cuda.get_device_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "workloads": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
