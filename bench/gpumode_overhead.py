"""Where a GPU MODE candidate's time goes when ksearch times it as the task's evaluator does -> JSON.

    python bench/gpumode_overhead.py [--task FOLDER] [--candidates NAME ...] [--benchmarks bench0 bench2]
                                     [--out PATH]

`bench/gpumode_side_by_side.py` found some candidates a constant few tens of microseconds slower in ksearch's
worker than under the task's eval.py on the small benchmarks only (a cost that the GPU hides once its work is
long enough: host-side work per call). This separates the suspects, per candidate and benchmark, all timed with
the evaluator's loop (synchronize, CUDA events around one call on the same data, the mean of up to 100 calls):

  plain          a fresh process in a staged copy of the task folder (the candidate as submission.py): the
                 evaluator's loop as eval.py runs it; `host_us` is the host time of the call alone (its
                 launches, before any wait), the cost the GPU must hide;
  plain_no_grad  the same calls under torch.no_grad() (ksearch's task runtime wraps every call in it);
  plain_memfrac  the same after torch.cuda.set_per_process_memory_fraction(0.9) (ksearch's worker sets it);
  ksearch_none   ksearch's sandbox with isolation "none", timing_protocol "gpumode";
  ksearch_jail   the same, jailed (the default isolation).
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpumode_side_by_side import DEFAULT_CANDIDATES, DEFAULT_TASK, run_ksearch, stage  # noqa: E402

PLAIN = r"""
import json, sys, time, contextlib
import torch
from reference import generate_input
from submission import custom_kernel

def loop(args, ctx, reps=100):
    data = generate_input(**args)
    with ctx():
        custom_kernel(data)  # the evaluator's one untimed call
        torch.cuda.synchronize()
        dev, host = [], []
        for _ in range(reps):
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            t0 = time.perf_counter()
            out = custom_kernel(data)
            host.append((time.perf_counter() - t0) * 1e6)
            e.record()
            torch.cuda.synchronize()
            dev.append(s.elapsed_time(e) * 1000.0)
            del out
    host.sort()
    return {"mean_us": sum(dev) / len(dev), "host_median_us": host[len(host) // 2], "n": len(dev)}

cfg = json.loads(sys.argv[1])
res = {}
for name, args in cfg.items():
    res[name] = {"plain": loop(dict(args), contextlib.nullcontext)}
    res[name]["plain_no_grad"] = loop(dict(args), torch.no_grad)
torch.cuda.set_per_process_memory_fraction(0.9)
for name, args in cfg.items():
    res[name]["plain_memfrac"] = loop(dict(args), contextlib.nullcontext)
print("RESULT " + json.dumps(res))
"""


def run_plain(folder: Path, source: str, benchmarks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gm-overhead-") as tmp:
        work = Path(tmp) / "task"
        stage(folder, source, work)
        proc = subprocess.run(
            [sys.executable, "-c", PLAIN, json.dumps(benchmarks)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TRITON_CACHE_DIR": str(Path(tmp) / "triton")},
        )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stdout + proc.stderr)[-3000:]}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.gpu.tasks import load_task

    folder = Path(args.task)
    task = load_task(folder)
    params = {w.name: w.params for w in task.by_split("search") if w.name in args.benchmarks}
    # the platform's spec lines are text: eval.py hands generate_input what it parsed, ints as ints
    benchmarks = {
        n: {
            k: (int(v) if isinstance(v, int) or (isinstance(v, str) and v.isdigit()) else v)
            for k, v in p.items()
        }
        for n, p in params.items()
    }
    out: dict[str, Any] = {"task": str(folder), "benchmarks": params, "candidates": {}}
    for name in args.candidates:
        source = (Path(args.candidates_dir) / f"{name}.py").read_text()
        entry: dict[str, Any] = {"plain": await asyncio.to_thread(run_plain, folder, source, benchmarks)}
        for iso in ("none", "namespaces"):
            sb = LocalSandbox(
                scratch_dir=Path(tempfile.gettempdir()) / f"gm-overhead-{iso}",
                call_timeout_s=150.0,
                compile_baseline=False,
                clean_baselines=False,
                isolation=iso,
            )
            try:
                entry[f"ksearch_{'none' if iso == 'none' else 'jail'}"] = await run_ksearch(
                    sb, task, source, "gpumode", list(params), 240.0
                )
            finally:
                await sb.close()
        out["candidates"][name] = entry
        print(json.dumps({name: _brief(entry)}), flush=True)
        save(out, args.out)  # after every candidate: a cut-off run keeps what it measured
    return out


def save(out: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=1, default=str))


def _brief(entry: dict[str, Any]) -> dict[str, Any]:
    brief: dict[str, Any] = {}
    for b, parts in (entry["plain"] if "error" not in entry["plain"] else {}).items():
        brief[b] = {p: round(v["mean_us"], 1) for p, v in parts.items()}
        brief[b]["host_us"] = round(parts["plain"]["host_median_us"], 1)
    for k in ("ksearch_none", "ksearch_jail"):
        for b, v in (entry[k].get("per_shape") or {}).items():
            brief.setdefault(b, {})[k] = round(v["mean_us"], 1)
    return brief


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default=str(DEFAULT_TASK))
    p.add_argument("--candidates-dir", default=str(DEFAULT_CANDIDATES))
    p.add_argument("--candidates", nargs="+", default=["TTT", "zeyushen", "shiyegao"])
    p.add_argument("--benchmarks", nargs="+", default=["bench0", "bench2"])
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpumode-overhead-h200.json"))
    args = p.parse_args()
    t0 = time.perf_counter()
    out = asyncio.run(main_async(args))
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    out["summary"] = {n: _brief(e) for n, e in out["candidates"].items()}
    save(out, args.out)
    print(f"wrote {args.out} in {out['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
