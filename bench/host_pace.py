"""Where a short call's host time goes: one Triton call (rmsnorm_h4096, 7 rows, one launch) issued in a bare
process and inside ksearch's sandbox workers (jailed and not), with FlashInfer's own events timer and ksearch's
`flashinfer` events loop on the same call -> JSON.

    python bench/host_pace.py [--fib .ext/fib] [--fib-wheels .whl/fib] [--out PATH]

Why: FlashInfer-Bench's runner read 4.8 us for this call where ksearch's worker read 15.6 us with the same loop
(flush, start event, call, end event): the span reads the host once issuing the call takes longer than the GPU's
flush. Each part says how long issuing one call takes on the host (the median of 200 back-to-back calls, one
synchronize at the end) and what each events loop reads, so that the process that differs shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench" / "side_by_side" / "flashinfer"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench"))

KERNEL = HERE / "kernels" / "rmsnorm_h4096_rows.py"

PART = r"""
import importlib.util, json, statistics, sys, time
import torch
spec = importlib.util.spec_from_file_location("k", sys.argv[1]); k = importlib.util.module_from_spec(spec)
spec.loader.exec_module(k)
x = torch.randn(7, 4096, device="cuda", dtype=torch.bfloat16); w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
call = lambda: k.run(x, w)
for _ in range(50): call()
torch.cuda.synchronize()
issue = []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(200): call()
    issue.append((time.perf_counter() - t0) / 200 * 1e6)
    torch.cuda.synchronize()
out = {"issue_us": round(statistics.median(issue), 2)}
from ksearch.gpu.worker.protocol_flashinfer import _events, cuda_gpu
gpu = cuda_gpu("cuda:0", True)
ms, _ = _events(call, 50, gpu, gpu.flush)
out["ksearch_events_us"] = round(statistics.median(ms) * 1000, 2)
try:
    from flashinfer.testing import bench_gpu_time_with_cuda_event
    t = bench_gpu_time_with_cuda_event(call, dry_run_iters=10, repeat_iters=50, cold_l2_cache=True)
    out["flashinfer_events_us"] = round(statistics.median(t) * 1000, 2)
except Exception as e:
    out["flashinfer_events_error"] = f"{type(e).__name__}: {e}"[:300]
print(json.dumps(out))
"""


def bare(env: dict[str, str]) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-c", PART, str(KERNEL)], capture_output=True, text=True, env=env,
                       timeout=300)  # fmt: skip
    if p.returncode:
        return {"error": p.stderr[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


async def in_sandbox(isolation: str, fib_task: Any, tmp: Path) -> dict[str, Any]:
    from evaluation_record import evaluate_record

    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.worldmodel.models import Candidate, EvalSettings

    task = fib_task.model_copy(deep=True)
    task.extras.setdefault("evaluator", {})["timer"] = "events"
    sb = LocalSandbox(scratch_dir=tmp / isolation, isolation=isolation)
    try:
        st = EvalSettings(seed=7, trials=1, workloads=[w.name for w in task.workloads if "3b0c6a1e" in w.name],
                          timing_protocol="flashinfer")  # fmt: skip
        rec = await evaluate_record(sb, task, Candidate.of(KERNEL.read_text(), "triton"), st, 240.0,
                                    per_key="per_workload")  # fmt: skip
        return {"jailed": sb.jailed, "isolation": sb.isolation, **rec}
    finally:
        await sb.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fib", default=str(ROOT / ".ext" / "fib"))
    ap.add_argument("--fib-wheels", default=str(ROOT / ".whl" / "fib"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "host-pace-h200.json")
    a = ap.parse_args(argv)
    from fib_runner import fib_env, stage_fib

    from ksearch.gpu.tasks import load_task

    out: dict[str, Any] = {"what": __doc__.split("\n\n")[0], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    with tempfile.TemporaryDirectory(prefix="ksearch-pace-") as t:
        tmp = Path(t)
        staged = stage_fib(Path(a.fib), tmp / "stage", Path(a.fib_wheels))
        env = fib_env(staged, "events", tmp)
        env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(ROOT)
        out["bare_process"] = bare(env)
        print(json.dumps(out["bare_process"]), flush=True)
        task = load_task(str(HERE / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"),
                         workloads=str(HERE / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl"))  # fmt: skip
        for iso in ("namespaces", "none"):
            t0 = time.perf_counter()
            try:
                rec = asyncio.run(in_sandbox(iso, task, tmp))
            except Exception as e:
                rec = {"error": f"{type(e).__name__}: {e}"[:500]}
            rec["seconds"] = round(time.perf_counter() - t0, 1)
            out[f"sandbox_{iso}"] = rec
            print(json.dumps(rec)[:1500], flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
