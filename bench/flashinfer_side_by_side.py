"""FlashInfer-Bench's own benchmark runner next to ksearch's `flashinfer` timing protocol, per solution and workload -> JSON.

    python bench/flashinfer_side_by_side.py [--fib .ext/fib] [--fib-wheels .whl/fib] [--out PATH] [--budget-s 240]
                                            [--timers cupti events] [--gemm-m 15 972 8192] [--definitions ...]

What runs, on one GPU:
- A FlashInfer-Trace dataset staged in a temporary folder: gemm_n4096_k4096 as FlashInfer-Bench ships it
  (--fib's examples/ffi/Example-FlashInfer-Trace, the workloads with M in --gemm-m), and rmsnorm_h4096 and
  fused_add_rmsnorm_h4096 shaped like FlashInfer-Trace's (bench/side_by_side/flashinfer/, three workloads
  each); per definition our Triton kernel (bench/side_by_side/flashinfer/kernels/), written as a Solution JSON
  by ksearch's exporter (the code behind `ksearch export --solution`; by hand, with the reason recorded as
  `written_by`, where it refuses), and the definition's reference, written by hand.
- fib: FlashInfer-Bench's own `Benchmark(TraceSet.from_path(...), BenchmarkConfig.default()).run_all()`, from a
  copy of --fib's flashinfer_bench package, unchanged, in a process of its own (its PersistentRunner spawns its
  worker). Its timer is FlashInfer's `flashinfer.testing.bench_gpu_time_with_cupti`: FlashInfer's own
  testing/ files from the installed flashinfer-python wheel, under a `flashinfer` package that leaves out
  FlashInfer's kernels and JIT (its __init__ would load them; the timer uses none). Timer "cupti": as
  installed (CUPTI when cupti-python >= 13 imports; the probe says whether it does); "events": cupti-python
  hidden (a `cupti` module that cannot be imported), so FlashInfer-Bench takes its CUDA-event loop.
- ksearch: the same Solution JSONs through ksearch's sandbox (jailed workers), EvalSettings(timing_protocol=
  "flashinfer") with the task's extras["evaluator"]["timer"] set to the same timer; its statistic, `mean_us`
  (the mean of the three input sets' medians), against FlashInfer-Bench's `latency_ms`. The reference's own
  baselines too: FlashInfer-Bench's `reference_latency_ms` against ksearch's eager baseline.

Each part has a timeout and records its error instead of stopping the run; the JSON is rewritten after every
part; parts that would start past --budget-s are recorded as skipped.

Packages beyond ksearch's: FlashInfer-Bench imports pydantic and pyyaml (ksearch has them), safetensors,
docstring-parser and filelock; FlashInfer's timer file imports numpy and einops; flashinfer-python provides that
file; cupti-python 13 (which imports cuda-bindings) makes the timer use CUPTI. Their wheels go in --fib-wheels
(default .whl/fib) and are installed, without their dependencies, into a folder only FlashInfer-Bench's processes
see (bench/side_by_side/flashinfer/fib_runner.py):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl/fib \
        flashinfer-python==0.6.9 einops docstring-parser safetensors filelock \
        cupti-python==13.0.1 cuda-bindings==13.0.3 cuda-pathfinder==1.9.1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench" / "side_by_side" / "flashinfer"
sys.path.insert(0, str(HERE))
from evaluation_record import evaluate_record  # noqa: E402  (bench/, the script's own folder)
from fib_runner import probe_fib, run_fib, stage_fib  # noqa: E402  (beside the dataset it runs)

DEFAULT_OUT = ROOT / "bench" / "results" / "side-by-side-flashinfer-h200.json"
EXAMPLE = Path("examples") / "ffi" / "Example-FlashInfer-Trace"
GEMM = "gemm_n4096_k4096"
# (kernel file, definition, op_type, destination-passing)
KERNELS = [
    ("rmsnorm_h4096_rows.py", "rmsnorm_h4096", "rmsnorm", False),
    ("fused_add_rmsnorm_h4096_two_pass.py", "fused_add_rmsnorm_h4096", "rmsnorm", True),
    ("gemm_n4096_k4096_splitk.py", GEMM, "gemm", True),
]
AUTHOR = "ksearch-side-by-side"
FIB_TIMEOUT_S = 200.0
KSEARCH_TIMEOUT_S = 120.0
MIN_PART_S = 12.0
SEED = 20_260_501

# ---------------------------------------------------------------- the dataset, staged as FlashInfer-Trace lays it out


def solution_json(
    name: str, definition: str, source: str, language: str, dps: bool, description: str
) -> dict[str, Any]:
    return {
        "name": name,
        "definition": definition,
        "author": AUTHOR,
        "description": description,
        "spec": {
            "language": language,
            "target_hardware": ["NVIDIA H200"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": dps,
        },
        "sources": [{"path": "main.py", "content": source}],
    }


def exported_solution(
    sname: str, definition: str, workloads: Path, code: str, doc: str
) -> tuple[dict[str, Any] | None, str]:
    """Our kernel as ksearch writes a search's candidate out (`ksearch export --solution`): the Solution
    FlashInfer-Bench's own benchmark then runs. (None, why) where the exporter refuses it."""
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.flashinfer.export import Identity, solution_from_candidate
    from ksearch.gpu.tasks.flashinfer.export import solution_json as export_json

    try:
        task = load_task(definition, str(workloads))
        who = Identity(name=sname, author=AUTHOR, description=doc or None, target_hardware=["NVIDIA H200"])
        return json.loads(export_json(solution_from_candidate(code, "triton", task, who))), "ksearch export"
    except Exception as e:  # recorded beside the solution, which is then written by hand
        return None, f"ksearch's exporter refused it: {type(e).__name__}: {str(e)[:300]}"


def stage_dataset(fib: Path, dst: Path, gemm_m: list[int]) -> dict[str, Any]:
    """definitions/, workloads/ and solutions/ under dst; returns the plan: per definition its file, workloads
    (uuid, axes) and solutions (name -> file, kernel, dps)."""
    plan: dict[str, Any] = {}
    for src in sorted((HERE / "definitions").rglob("*.json")):
        rel = src.relative_to(HERE)
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst / rel)
        wsrc = HERE / "workloads" / rel.relative_to("definitions").with_suffix(".jsonl")
        (dst / "workloads" / rel.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wsrc, dst / "workloads" / rel.parent.name / wsrc.name)
        plan[src.stem] = {"op_type": rel.parent.name, "file": str(dst / rel), "workloads_file": wsrc}
    ex = fib / EXAMPLE
    (dst / "definitions" / "gemm").mkdir(parents=True, exist_ok=True)
    (dst / "workloads" / "gemm").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ex / "definitions" / f"{GEMM}.json", dst / "definitions" / "gemm" / f"{GEMM}.json")
    lines = [
        line
        for line in (ex / "workloads" / f"{GEMM}.jsonl").read_text().splitlines()
        if line.strip() and json.loads(line)["workload"]["axes"].get("M") in gemm_m
    ]
    (dst / "workloads" / "gemm" / f"{GEMM}.jsonl").write_text("\n".join(lines) + "\n")
    plan[GEMM] = {"op_type": "gemm", "file": str(dst / "definitions" / "gemm" / f"{GEMM}.json")}
    for name, entry in plan.items():
        wfile = dst / "workloads" / entry["op_type"] / f"{name}.jsonl"
        entry["workloads"] = [
            {"uuid": json.loads(line)["workload"]["uuid"], "axes": json.loads(line)["workload"]["axes"]}
            for line in wfile.read_text().splitlines()
            if line.strip()
        ]
        entry.pop("workloads_file", None)
        definition = json.loads(Path(entry["file"]).read_text())
        sols: dict[str, Any] = {}
        for kfile, dname, _op, dps in KERNELS:
            if dname != name:
                continue
            code = (HERE / "kernels" / kfile).read_text()
            doc = code.split('"""')[1].split("\n\n")[0].replace("\n", " ") if code.startswith('"""') else ""
            sname = f"{name}_triton_{Path(kfile).stem.removeprefix(name + '_')}"
            written, how = exported_solution(sname, entry["file"], wfile, code, doc)
            if written is None or written.get("spec", {}).get("destination_passing_style") != dps:
                written, how = solution_json(sname, name, code, "triton", dps, doc), f"by hand ({how})"
            sols[sname] = {
                "json": written,
                "written_by": how,
                "kernel": f"bench/side_by_side/flashinfer/kernels/{kfile}",
                "dps": dps,
            }
        sols[f"{name}_reference"] = {
            "json": solution_json(
                f"{name}_reference",
                name,
                definition["reference"],
                "python",
                False,
                "the definition's reference",
            ),
            "kernel": None,
            "dps": False,
        }
        for sname, s in sols.items():
            folder = dst / "solutions" / AUTHOR / entry["op_type"] / name
            folder.mkdir(parents=True, exist_ok=True)
            s["file"] = str(folder / f"{sname}.json")
            Path(s["file"]).write_text(json.dumps(s["json"], indent=1))
        entry["solutions"] = {k: {kk: vv for kk, vv in v.items() if kk != "json"} for k, v in sols.items()}
    return plan


# ---------------------------------------------------------------- ksearch, through its sandbox


async def run_ksearch(
    sb: Any, task: Any, solution: str, names: list[str], timeout_s: float
) -> dict[str, Any]:
    from ksearch.gpu.tasks.flashinfer.solution import parse_solution, solution_to_candidate
    from ksearch.worldmodel.models import Candidate, EvalSettings

    conv = solution_to_candidate(parse_solution(solution), task)
    st = EvalSettings(seed=SEED, trials=1, workloads=names, timing_protocol="flashinfer")
    return await evaluate_record(
        sb, task, Candidate.of(conv.source, conv.language), st, timeout_s, per_key="per_workload",
        language=conv.language,
    )  # fmt: skip


# ---------------------------------------------------------------- assembly


def short(uuid: str) -> str:
    return uuid[:8]  # ksearch's workload name for a FlashInfer-Bench workload


def pairs_for(entry: dict[str, Any], timer: str, workloads: list[dict[str, Any]]) -> None:
    part = entry["timers"].setdefault(timer, {})
    fib = part.get("fib") or {}
    ks = ((part.get("ksearch") or {}).get("per_workload")) or {}
    pairs: dict[str, Any] = {}
    for w in workloads:
        f = (fib.get(w["uuid"]) or {}).get("latency_ms")
        k = (ks.get(short(w["uuid"])) or {}).get("mean_us")
        if f and k:
            pairs[short(w["uuid"])] = {
                "axes": w["axes"],
                "fib_us": f * 1000.0,
                "ksearch_us": k,
                "rel_diff": k / (f * 1000.0) - 1,
            }
    part["pairs"] = pairs
    devs = [abs(p["rel_diff"]) for p in pairs.values()]
    part["max_abs_rel_diff"] = max(devs) if devs else None
    part["within_5pct"] = bool(pairs) and len(pairs) == len(workloads) and max(devs) <= 0.05


def reference_pairs(out: dict[str, Any], timer: str, plan: dict[str, Any]) -> None:
    """FlashInfer-Bench's reference_latency_ms (the baseline its runner times in its main process) against
    ksearch's eager baseline under the same protocol."""
    rows: dict[str, Any] = {}
    for dname, entry in plan.items():
        fib_traces = ((out.get("fib") or {}).get(timer) or {}).get("traces") or []
        for w in entry["workloads"]:
            fr = next(
                (
                    t["reference_latency_ms"]
                    for t in fib_traces
                    if t["workload"] == w["uuid"] and t["reference_latency_ms"]
                ),
                None,
            )
            kr = None
            for sname in entry["solutions"]:
                ks = ((out["candidates"][sname]["timers"].get(timer) or {}).get("ksearch") or {}).get(
                    "per_workload"
                ) or {}
                kr = kr or (ks.get(short(w["uuid"])) or {}).get("eager_us")
            if fr and kr:
                rows[f"{dname}/{short(w['uuid'])}"] = {
                    "fib_us": fr * 1000.0,
                    "ksearch_us": kr,
                    "rel_diff": kr / (fr * 1000.0) - 1,
                }
    out.setdefault("reference_baselines", {})[timer] = rows


def environment() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    env: dict[str, Any] = {"host": platform.node(), "python": sys.version.split()[0]}
    for pkg in (
        "torch",
        "triton",
        "numpy",
        "cupy-cuda13x",
        "flashinfer-python",
        "cupti-python",
        "pydantic",
        "safetensors",
    ):
        try:
            env[pkg] = version(pkg)
        except PackageNotFoundError:
            env[pkg] = None
    with contextlib.suppress(Exception):
        q = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        env["gpu"] = q.stdout.strip()
    return env


def prepare(
    args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, str]]:
    """The staged dataset and FlashInfer-Bench; the output's first state; ksearch's tasks; the Solution texts."""
    from ksearch.gpu.tasks import load_task

    fib = Path(args.fib).resolve()
    plan = stage_dataset(fib, tmp / "dataset", args.gemm_m)
    plan = {k: v for k, v in plan.items() if not args.definitions or k in args.definitions}
    staged = stage_fib(fib, tmp / "stage", Path(args.fib_wheels).resolve())
    out: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "budget_s": args.budget_s,
        "environment": environment(),
        "fib_staging": staged,
        "settings": {
            "fib": "BenchmarkConfig.default() (warmup_runs 10, iterations 50, num_trials 3, persistent runner); "
            "cupti: as installed; events: cupti-python hidden",
            "ksearch": "EvalSettings(timing_protocol='flashinfer', trials=1), the task's evaluator timer set to the "
            "same; jailed sandbox, no torch.compile baseline, eager baseline in the same worker",
            "statistic": "FlashInfer-Bench latency_ms (mean over its 3 input sets of each set's median) vs ksearch "
            "WorkloadTiming.mean_us (the same statistic); rel_diff = ksearch / fib - 1",
        },
        "definitions": {k: {kk: vv for kk, vv in v.items() if kk != "solutions"} for k, v in plan.items()},
        "candidates": {
            s: {"definition": d, **info, "timers": {}}
            for d, e in plan.items()
            for s, info in e["solutions"].items()
        },
        "fib": {},
    }
    tasks = {d: load_task(e["file"]) for d, e in plan.items()}
    sources = {c["file"]: Path(c["file"]).read_text() for c in out["candidates"].values()}
    return plan, staged, out, tasks, sources


async def main_async(args: argparse.Namespace) -> int:
    from ksearch.gpu.sandbox.local import LocalSandbox

    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    tmp = Path(tempfile.mkdtemp(prefix="fib-side-by-side-"))
    root = tmp / "dataset"
    plan, staged, out, tasks, sources = await asyncio.to_thread(prepare, args, tmp)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out["elapsed_s"] = time.perf_counter() - t_start
        out_path.write_text(json.dumps(out, indent=1, default=str))

    def left() -> float:
        return deadline - time.perf_counter()

    save()
    sb: Any = None
    try:
        for timer in args.timers:
            if "shim_path" not in staged:
                probe = {"error": staged.get("flashinfer")}
            else:
                probe = await asyncio.to_thread(probe_fib, staged, timer, tmp)
            out["fib"][timer] = {"probe": probe}
            save()
            skip = None
            if "error" in probe or "import_error" in probe:
                skip = "FlashInfer-Bench's runner cannot be imported here (see probe)"
            elif timer == "cupti" and probe.get("timer") != "cupti":
                out["fib"][timer]["skipped"] = (
                    "FlashInfer-Bench cannot use CUPTI here (cupti-python >= 13 not importable): nothing to compare"
                )
                save()
                continue
            elif left() < MIN_PART_S:
                skip = f"time budget spent ({args.budget_s:.0f} s)"
            if skip is not None:
                out["fib"][timer]["skipped"] = skip
            else:
                try:
                    res = await asyncio.to_thread(
                        run_fib, staged, root, list(plan), timer, tmp, min(FIB_TIMEOUT_S, left())
                    )
                except Exception:
                    res = {"error": traceback.format_exc()[-2000:]}
                out["fib"][timer].update(res)
                keep = (
                    "status",
                    "latency_ms",
                    "max_abs_error",
                    "max_rel_error",
                    "fell_back_to_events",
                    "log_tail",
                )
                for t in res.get("traces") or []:
                    if t["solution"] in out["candidates"]:
                        part = out["candidates"][t["solution"]]["timers"].setdefault(timer, {})
                        part.setdefault("fib", {})[t["workload"]] = {k: t[k] for k in keep}
            save()
            if sb is None:
                sb = LocalSandbox(
                    scratch_dir=tmp / "ksearch",
                    call_timeout_s=150.0,
                    compile_baseline=False,
                    clean_baselines=False,
                )
            for cinfo in out["candidates"].values():
                dname = cinfo["definition"]
                part = cinfo["timers"].setdefault(timer, {})
                if left() < MIN_PART_S:
                    part["ksearch"] = {"skipped": f"time budget spent ({args.budget_s:.0f} s)"}
                    continue
                task = tasks[dname]
                task.extras["evaluator"] = {**task.extras.get("evaluator", {}), "timer": timer}
                names = [short(w["uuid"]) for w in plan[dname]["workloads"]]
                try:
                    part["ksearch"] = await run_ksearch(
                        sb, task, sources[cinfo["file"]], names, min(KSEARCH_TIMEOUT_S, left())
                    )
                except Exception:
                    part["ksearch"] = {"error": traceback.format_exc()[-2000:]}
                pairs_for(cinfo, timer, plan[dname]["workloads"])
                reference_pairs(out, timer, plan)
                save()
    finally:
        if sb is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sb.close(), 60)
        shutil.rmtree(tmp, ignore_errors=True)
    every = [
        p["rel_diff"]
        for c in out["candidates"].values()
        for part in c["timers"].values()
        for p in (part.get("pairs") or {}).values()
    ]
    out["summary"] = {
        "pairs": len(every),
        "within_5pct": sum(abs(d) <= 0.05 for d in every),
        "max_abs_rel_diff": max((abs(d) for d in every), default=None),
    }
    save()
    for sname, c in out["candidates"].items():
        for timer, part in c["timers"].items():
            pairs = part.get("pairs") or {}
            cells = "  ".join(
                f"{w}: {p['fib_us']:8.1f} / {p['ksearch_us']:8.1f} us ({100 * p['rel_diff']:+.1f}%)"
                for w, p in pairs.items()
            )
            print(f"{sname:48s} {timer:6s} {cells or '-'}")
    s = out["summary"]
    print(
        f"{s['within_5pct']} of {s['pairs']} pairs within 5%; wrote {out_path} in {time.perf_counter() - t_start:.0f} s"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--fib",
        default=str(ROOT / ".ext" / "fib"),
        help="a FlashInfer-Bench checkout (flashinfer_bench/, examples/)",
    )
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--budget-s", type=float, default=240.0)
    p.add_argument("--timers", nargs="+", default=["cupti", "events"], choices=["cupti", "events"])
    p.add_argument(
        "--gemm-m", nargs="+", type=int, default=[15, 972, 8192], help="M of the gemm workloads to run"
    )
    p.add_argument("--definitions", nargs="+", help="only these definitions (default: all three)")
    p.add_argument(
        "--fib-wheels",
        default=str(ROOT / ".whl" / "fib"),
        help="wheels of what only FlashInfer-Bench needs (flashinfer-python, einops, ...), installed for its "
        "processes alone",
    )
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
