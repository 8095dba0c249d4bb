"""Quick validation of the sandbox's GPU path (a subset of bench/sandbox.py plus targeted checks).

    python bench/gpu_check.py [--out DIR] [--budget-s 270]

Writes DIR/gpu_check.json (default: $OUT or bench/results). Checks, on the row_sum task: worker
start and measured ceilings; Triton and NVRTC candidates end to end; Triton resources from a warm
launch; an NVRTC compile error mapped to the candidate's line; the kernel audit's cost; the fault
suite; the side-stream cheat; Nsight Compute on an NVRTC kernel; a torch extension build.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from sandbox import Bench, cuda_variant, source, summary  # noqa: E402

from ksearch.gpu.sandbox.local import LocalSandbox  # noqa: E402
from ksearch.worldmodel.models import Candidate, EvalSettings  # noqa: E402


async def targeted(bench: Bench, sb: LocalSandbox) -> dict[str, Any]:
    task = bench.tasks["row_sum"]
    wl = bench.workloads["row_sum"]
    out: dict[str, Any] = {}
    r = await sb.compile(Candidate.of(task.seeds["triton"], "triton"), task)
    out["triton_compile_report"] = {
        "ok": r.ok,
        "mode": r.mode,
        "kernels": [k.model_dump() for k in r.kernels],
    }

    marker = "acc += row[j];"
    broken = source("row_sum_nvrtc").replace(marker, "acc += row[j] + undefined_offset;")
    line = next(i for i, ln in enumerate(broken.splitlines(), 1) if "undefined_offset" in ln)
    ev = await sb.evaluate(Candidate.of(broken, "cuda"), task, EvalSettings(seed=1, trials=1, workloads=[wl]))
    diags = [d.model_dump() for d in ev.compile.diagnostics] if ev.compile else []
    out["nvrtc_compile_error"] = {
        "status": ev.status,
        "expected_line": line,
        "diagnostics": diags[:6],
        "line_mapped": any(d["line"] == line and d["severity"] == "error" for d in diags),
    }

    timings = {}
    for audit in (False, True):
        sb.kernel_audit = audit
        src = cuda_variant(source("row_sum_nvrtc"), 500 + int(audit))
        t = time.monotonic()
        ev = await sb.evaluate(
            Candidate.of(src, "cuda"), task, EvalSettings(seed=2, trials=3, workloads=[wl])
        )
        timings[f"audit_{audit}"] = {
            "wall_s": round(time.monotonic() - t, 3),
            **summary(ev),
            "compile_kernels": [k.model_dump() for k in ev.compile.kernels],
        }
    sb.kernel_audit = True
    out["kernel_audit_cost"] = timings
    return out


async def amain(args: argparse.Namespace) -> None:
    out_dir = Path(args.out or os.environ.get("OUT") or (Path(__file__).parent / "results"))
    bench = Bench(out_dir / "gpu_check.json", args.budget_s, tasks=args.tasks.split(","))
    bench.aa_rounds = args.aa_rounds
    parts = args.parts.split(",")
    sb = LocalSandbox(n_workers=1, call_timeout_s=args.call_timeout_s)
    bench.report["settings"] = {"call_timeout_s": args.call_timeout_s, "budget_s": args.budget_s}
    try:
        await bench.run(sb, ["setup", *[p for p in parts if p == "e2e"]])
        if "targeted" in parts:
            t = time.monotonic()
            try:
                bench.report["parts"]["targeted"] = await targeted(bench, sb)
            except Exception:
                bench.report["parts"]["targeted"] = {"error": traceback.format_exc()[-3000:]}
            bench.report["parts"]["targeted"]["part_seconds"] = round(time.monotonic() - t, 1)
            bench.save()
        await bench.run(sb, [p for p in parts if p not in ("e2e", "targeted")])
    finally:
        await sb.close()
        bench.save()
    print(json.dumps(bench.report, indent=1)[:30000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="directory for gpu_check.json")
    ap.add_argument("--budget-s", type=float, default=270.0)
    ap.add_argument("--call-timeout-s", type=float, default=20.0)
    ap.add_argument("--tasks", default="row_sum", help="comma-separated built-in tasks (row_sum is required)")
    ap.add_argument("--parts", default="e2e,targeted,faults,ncu,ext", help="also: repeat, aa")
    ap.add_argument("--aa-rounds", type=int, default=10)
    asyncio.run(amain(ap.parse_args()))


if __name__ == "__main__":
    main()
