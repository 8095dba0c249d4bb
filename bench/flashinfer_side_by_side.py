"""FlashInfer-Bench's own benchmark runner next to ksearch's `flashinfer` timing protocol, per solution and workload -> JSON.

    python bench/flashinfer_side_by_side.py [--fib .ext/fib] [--out PATH] [--budget-s 240]
                                            [--timers cupti events] [--gemm-m 15 972 8192]

What runs, on one GPU:
- A FlashInfer-Trace dataset staged in a temporary folder: gemm_n4096_k4096 as FlashInfer-Bench ships it
  (--fib's examples/ffi/Example-FlashInfer-Trace, the workloads with M in --gemm-m), and rmsnorm_h4096 and
  fused_add_rmsnorm_h4096 shaped like FlashInfer-Trace's (bench/side_by_side/flashinfer/, three workloads
  each); per definition our Triton kernel (bench/side_by_side/flashinfer/kernels/) and the definition's
  reference, each written as a Solution JSON.
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

Packages beyond ksearch's: FlashInfer-Bench imports pydantic, pyyaml, safetensors, docstring-parser and filelock;
FlashInfer's timer imports numpy and einops; flashinfer-python provides the timer's file; cupti-python (>= 13,
with cuda-bindings) is what makes FlashInfer-Bench's timer use CUPTI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib.util
import json
import math
import os
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
PROBE_TIMEOUT_S = 90.0
MIN_PART_S = 12.0
SEED = 20_260_501

# what stands in for FlashInfer's package: its testing/ files only (the timer), nothing that loads kernels
SHIM_INIT = '''"""FlashInfer, reduced to what FlashInfer-Bench's timer needs: flashinfer.testing (FlashInfer's own files,
copied unchanged from the installed flashinfer-python) and flashinfer.utils.round_up, which it imports.
FlashInfer's kernels and JIT (the rest of its __init__) are left out: the timer uses none of them."""
'''
SHIM_UTILS = '''def round_up(x, y):
    """FlashInfer's flashinfer.utils.round_up: x rounded up to a multiple of y."""
    return (x + y - 1) // y * y
'''
NO_CUPTI = """raise ModuleNotFoundError("cupti-python hidden: FlashInfer-Bench times with CUDA events", name="cupti")\n"""


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
            sols[sname] = {
                "json": solution_json(sname, name, code, "triton", dps, doc),
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


# ---------------------------------------------------------------- FlashInfer-Bench, as a program


def stage_fib(fib: Path, dst: Path, wheels: Path) -> dict[str, Any]:
    """A copy of --fib's flashinfer_bench package; the packages only FlashInfer-Bench needs, installed from
    --fib-wheels into a folder of their own (on its processes' path only, so ksearch's environment does not see
    them); the `flashinfer` stand-in; a folder that hides cupti-python. Returns the paths and what was found."""
    info: dict[str, Any] = {}
    shutil.copytree(
        fib / "flashinfer_bench",
        dst / "fib" / "flashinfer_bench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    info["fib_path"] = str(dst / "fib")
    if (fib / ".git").exists():  # a checkout of its own (else git would answer for the repository around it)
        with contextlib.suppress(Exception):
            info["fib_commit"] = subprocess.run(
                ["git", "-C", str(fib), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20
            ).stdout.strip()
    digest = hashlib.sha256()
    for f in sorted((fib / "flashinfer_bench").rglob("*.py")):
        digest.update(f.relative_to(fib).as_posix().encode() + b"\0" + f.read_bytes())
    info["fib_sources_sha256"] = digest.hexdigest()[:16]
    site = dst / "site"
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if found:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
             "--target", str(site), *map(str, found)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        info["wheels"] = [w.name for w in found]
        if p.returncode:
            info["wheels_error"] = (p.stdout + p.stderr)[-1500:]
    info["site_path"] = str(site)
    if (site / "flashinfer" / "testing").is_dir():
        src: Path | None = site / "flashinfer"
    else:
        spec = importlib.util.find_spec(
            "flashinfer"
        )  # an installed FlashInfer, found without running its __init__
        src = (
            Path(next(iter(spec.submodule_search_locations)))
            if spec and spec.submodule_search_locations
            else None
        )
    if src is None or not (src / "testing").is_dir():
        info["flashinfer"] = (
            f"missing: put flashinfer-python's wheel in {wheels} (its testing/ holds the timer)"
        )
        return info
    shim = dst / "shim" / "flashinfer"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(SHIM_INIT)
    (shim / "utils.py").write_text(SHIM_UTILS)
    shutil.copytree(src / "testing", shim / "testing", ignore=shutil.ignore_patterns("__pycache__"))
    info["flashinfer"] = f"testing/ from {src}"
    hide = dst / "nocupti" / "cupti"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text(NO_CUPTI)
    info["shim_path"] = str(dst / "shim")
    info["nocupti_path"] = str(dst / "nocupti")
    return info


def fib_env(staged: dict[str, Any], timer: str, cache: Path) -> dict[str, str]:
    paths = [staged["shim_path"]] + ([staged["nocupti_path"]] if timer == "events" else [])
    paths += [staged["site_path"], staged["fib_path"]]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["FIB_CACHE_PATH"] = str(cache / "fib-cache")
    env["TRITON_CACHE_DIR"] = str(cache / "triton-cache")
    return env


PROBE = r"""
import importlib.metadata as md, json, warnings
out = {}
try:
    from cupti import cupti  # FlashInfer's own check, as bench_gpu_time_with_cupti makes it
    v = md.version("cupti-python")
    out["cupti_python"] = v
    out["timer"] = "cupti" if int(v.split(".")[0]) >= 13 else "events"
except Exception as e:
    out["timer"] = "events"
    out["cupti_error"] = f"{type(e).__name__}: {e}"[:300]
for pkg in ("flashinfer-python", "cuda-bindings", "einops", "safetensors", "docstring-parser", "pydantic", "PyYAML"):
    try:
        out[pkg] = md.version(pkg)
    except Exception:
        out[pkg] = None
try:
    import flashinfer.testing
    out["flashinfer_testing"] = flashinfer.testing.__file__
    import flashinfer_bench.bench.timing as t
    out["fib_timing"] = t.__file__
except Exception as e:
    out["import_error"] = f"{type(e).__name__}: {e}"[:500]
print(json.dumps(out))
"""


def probe_fib(staged: dict[str, Any], timer: str, cache: Path) -> dict[str, Any]:
    env = fib_env(staged, timer, cache)
    try:
        p = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
        return (
            json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"error": p.stderr[-1500:]}
        )
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def fib_worker(cfg_path: Path, out_path: Path) -> None:
    """In its own process, on FlashInfer-Bench's path: its Benchmark on the staged dataset, every trace kept."""
    import logging
    import warnings

    cfg = json.loads(cfg_path.read_text())
    logging.basicConfig(level=logging.WARNING)
    from flashinfer_bench import Benchmark, BenchmarkConfig, TraceSet

    res: dict[str, Any] = {"started": time.strftime("%H:%M:%S")}
    t0 = time.perf_counter()
    ts = TraceSet.from_path(cfg["root"])
    config = BenchmarkConfig.default(definitions=cfg["definitions"])
    res["config"] = {
        k: v for k, v in config.model_dump().items() if k not in ("op_type_config", "definition_config")
    }
    res["resolved"] = {
        d: config.resolve_eval_config(ts.definitions[d]).model_dump() for d in cfg["definitions"]
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench = Benchmark(ts, config)
        try:
            result = bench.run_all(dump_traces=False)
        finally:
            bench.close()
    res["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})
    res["traces"] = trace_rows(result)
    res["seconds"] = time.perf_counter() - t0
    out_path.write_text(json.dumps(res, indent=1, default=str))


def trace_rows(result: Any) -> list[dict[str, Any]]:
    """What FlashInfer-Bench recorded per (definition, workload, solution): its status and numbers."""
    traces = []
    for name, items in result.traces.items():
        for t in items:
            ev = t.evaluation
            perf = ev.performance if ev is not None else None
            corr = ev.correctness if ev is not None else None
            log = (ev.log or "") if ev is not None else ""
            traces.append(
                {
                    "definition": name,
                    "workload": t.workload.uuid,
                    "axes": t.workload.axes,
                    "solution": t.solution,
                    "status": ev.status.value if ev is not None else None,
                    "latency_ms": perf.latency_ms if perf is not None else None,
                    "reference_latency_ms": perf.reference_latency_ms if perf is not None else None,
                    "speedup_factor": perf.speedup_factor if perf is not None else None,
                    "max_abs_error": corr.max_absolute_error if corr is not None else None,
                    "max_rel_error": corr.max_relative_error if corr is not None else None,
                    "fell_back_to_events": "Falling back to CUDA events" in log,
                    "log_tail": log[-1500:] if ev is None or ev.status.value != "PASSED" else "",
                    "environment": ev.environment.model_dump() if ev is not None else None,
                }
            )
    return traces


def run_fib(
    staged: dict[str, Any], root: Path, definitions: list[str], timer: str, cache: Path, timeout_s: float
) -> dict[str, Any]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fib-run-") as tmp:
        cfg, out = Path(tmp) / "cfg.json", Path(tmp) / "out.json"
        cfg.write_text(json.dumps({"root": str(root), "definitions": definitions}))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--fib-worker", str(cfg), str(out)]
        try:
            p = subprocess.run(
                cmd, env=fib_env(staged, timer, cache), capture_output=True, text=True, timeout=timeout_s
            )
            tail = (p.stdout + p.stderr)[-3000:] if p.returncode else ""
            rc: int | None = p.returncode
        except subprocess.TimeoutExpired as e:
            rc, tail = None, f"timed out after {timeout_s:.0f} s; " + str(e.stderr or "")[-2000:]
        res = json.loads(out.read_text()) if out.exists() else {}
    res["returncode"] = rc
    res["error"] = tail
    res["wall_s"] = time.perf_counter() - t0
    return res


# ---------------------------------------------------------------- ksearch, through its sandbox


async def run_ksearch(
    sb: Any, task: Any, solution: str, names: list[str], timeout_s: float
) -> dict[str, Any]:
    from ksearch.gpu.tasks.fib_solution import parse_solution, solution_to_candidate
    from ksearch.worldmodel.models import Candidate, EvalSettings

    t0 = time.perf_counter()
    conv = solution_to_candidate(parse_solution(solution), task)
    st = EvalSettings(seed=SEED, trials=1, workloads=names, timing_protocol="flashinfer")
    try:
        ev = await asyncio.wait_for(
            sb.evaluate(Candidate.of(conv.source, conv.language), task, st), timeout_s
        )
    except TimeoutError:
        return {"error": f"timed out after {timeout_s:.0f} s", "seconds": time.perf_counter() - t0}
    per = {
        t.workload: {
            "mean_us": t.mean_us,
            "median_us": t.median_us,
            "ci_us": [t.ci_low_us, t.ci_high_us],
            "n": t.n,
            "statistic": t.statistic,
            "protocol": t.protocol,
            "eager_us": t.eager_median_us,
            "host_median_us": t.host_median_us,
            "flags": t.flags,
        }
        for t in ev.timings
    }
    return {
        "status": ev.status,
        "error": ev.error,
        "flags": ev.flags,
        "pure_pytorch": ev.pure_pytorch,
        "language": conv.language,
        "correctness": [
            {"workload": c.workload, "passed": c.passed, "kind": c.kind, "message": (c.message or "")[:300]}
            for c in ev.correctness
        ],
        "per_workload": per,
        "seconds": time.perf_counter() - t0,
    }


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


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


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
    from ksearch.gpu.sandbox import LocalSandbox

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
    if argv[:1] == ["--fib-worker"]:
        fib_worker(Path(argv[1]), Path(argv[2]))
        return 0
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
