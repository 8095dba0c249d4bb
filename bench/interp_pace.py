"""What a Triton-interpreter call of each built-in seed costs, with ksearch.gpu.tasks.rt.interp_pace off and on.

    python bench/interp_pace.py [--tasks softmax,rmsnorm,...] [--reps 3] [--out FILE]

Each way runs in a fresh process (TRITON_INTERPRET=1, one torch thread, the bf16 dot fix installed as a worker has
it): every task's Triton seed is called on its smoke workload once to warm up, then `--reps` times, each call's
CPU time (its process's) measured. The outputs of the two ways are compared bit for bit (a SHA-256 of every output
tensor's bytes). Writes bench/results/interp-pace-{machine}.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import provenance  # bench/, the script's own folder

RESULTS = Path(__file__).resolve().parent / "results"
TASKS = "softmax,rmsnorm,row_sum,layernorm,cross_entropy,fused_add_rmsnorm,swiglu,gemm_fp32,causal_attention"

CHILD = r"""
import hashlib, json, sys, tempfile, time
from pathlib import Path
import torch
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.rt import interp_bf16, interp_pace
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module

torch.set_num_threads(1)
names, reps, pace = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3] == "on"
interp_bf16.install()
installed = interp_pace.install() if pace else False

def digest(out):
    h = hashlib.sha256()
    for t in (out if isinstance(out, (tuple, list)) else [out]):
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]

rows = {}
for name in names:
    task = load_task(name)
    wl = task.smoke()
    rt = TaskRuntime(task)
    mod = load_candidate_module(task.seeds["triton"], f"seed_{name}", Path(tempfile.mkdtemp()))
    fn = rt.build_candidate(mod, wl, "cpu")
    inputs = rt.make_inputs(wl, 1, "cpu")
    with torch.no_grad():
        out = fn(inputs)  # the warm-up call
        secs = []
        for _ in range(reps):
            c = time.process_time()
            again = fn(inputs)
            secs.append(time.process_time() - c)
    rows[name] = {"workload": wl.name, "cpu_s": secs, "digest": digest(out), "same_each_call": digest(again) == digest(out)}
print(json.dumps({"installed": installed, "rows": rows}))
"""


def _one_way(pace: bool, names: list[str], reps: int) -> dict[str, Any]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(names), str(reps), "on" if pace else "off"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if p.returncode != 0:
        raise SystemExit(f"the {'on' if pace else 'off'} run failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=TASKS, help="built-in task names with a Triton seed, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="timed calls per task and way (default 3)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    names = [n for n in args.tasks.split(",") if n]
    off, on = _one_way(False, names, args.reps), _one_way(True, names, args.reps)
    if not on["installed"]:
        raise SystemExit("interp_pace did not install on this Triton: nothing to compare")
    rows = []
    for n in names:
        a, b = off["rows"][n], on["rows"][n]
        ma, mb = statistics.median(a["cpu_s"]), statistics.median(b["cpu_s"])
        rows.append(
            {
                "task": n,
                "workload": a["workload"],
                "off_cpu_s": [round(x, 4) for x in a["cpu_s"]],
                "on_cpu_s": [round(x, 4) for x in b["cpu_s"]],
                "off_median_s": round(ma, 4),
                "on_median_s": round(mb, 4),
                "saved": round(1 - mb / ma, 3) if ma > 0 else None,
                "same_output": a["digest"] == b["digest"] and a["same_each_call"] and b["same_each_call"],
            }
        )
    total_off = sum(r["off_median_s"] for r in rows)
    total_on = sum(r["on_median_s"] for r in rows)
    import torch
    import triton

    machine = f"cpu{os.cpu_count()}"
    result = {
        "what": "CPU seconds of one Triton-interpreter call of each built-in Triton seed on its smoke workload "
        "(the median of --reps calls after a warm-up, each way in a fresh process), interp_pace off and on",
        "command": "python bench/interp_pace.py" + (f" --tasks {args.tasks}" if args.tasks != TASKS else ""),
        "commit": provenance.commit(),
        "dirty": provenance.dirty(),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "gpu": False},
        "triton": triton.__version__,
        "torch": torch.__version__,
        "reps": args.reps,
        "rows": rows,
        "all_same_output": all(r["same_output"] for r in rows),
        "sum_off_s": round(total_off, 3),
        "sum_on_s": round(total_on, 3),
        "saved": round(1 - total_on / total_off, 3) if total_off > 0 else None,
    }
    out = args.out or RESULTS / f"interp-pace-{machine}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        print(
            f"{r['task']:>18}: {r['off_median_s']:.3f} s -> {r['on_median_s']:.3f} s a call; same output: {r['same_output']}"
        )
    print(f"all tasks: {total_off:.2f} s -> {total_on:.2f} s ({result['saved']:.0%} less); wrote {out}")
    if not result["all_same_output"]:
        raise SystemExit("interp_pace changed an output")


if __name__ == "__main__":
    main()
