"""ksearch's evaluation of GPU MODE kernels next to the task's own evaluator, per benchmark shape -> JSON.

    python bench/gpumode_side_by_side.py [--task FOLDER] [--candidates FILE ...] [--no-reference]
                                         [--out PATH] [--budget-s 330]

Defaults: the TriMul folder of a reference-kernels copy (.ext/reference-kernels/problems/bioml/trimul) and
every .py under .ext/K-Search/results/gpumode_trimul/ (the published TriMul kernels); the task's reference
is evaluated too, as a candidate that calls ref_kernel.

Parts, per candidate (the reference first, a candidate built with a C++ extension last, its build being
slowest; the first two parts for every candidate before the third for any):
  gpumode_eval     the folder's own eval.py, run as a program on a staged copy of the folder (the files its
                   task.yml maps, the candidate as submission.py), in benchmark mode on the task's benchmarks
                   written as the platform writes them (`name: value; ...`), with a fresh Triton cache;
                   its per-benchmark mean (and runs, std, best, worst) as it reports them;
  ksearch_gpumode  ksearch's sandbox, timing_protocol "gpumode": the same loop in ksearch's worker (mean_us);
  ksearch          ksearch's sandbox, its own protocol (median_us: L2 flushed, launch covered, inputs rotated,
                   the data copied per call outside the timed region).
  gpumode_eval_again  (--evaluator-again) the same eval.py run again in a new process, after ksearch's: the
                   owner's own spread between two processes (`evaluator_self_agreement`, second over first).
  --processes N    the matching pair N times, alternating, each run in a new process (ksearch's: the candidate
                   under a comment naming the run, so the sandbox loads it in a fresh worker): `over_processes`
                   per shape gives each harness's per-process means, their median and spread, and the ratio of
                   the medians. On a launch-bound shape one process's reading is the host's pace in it, which
                   moves between processes on the same machine; the medians compare the harnesses, the spreads
                   say how far one reading of either can be trusted.
`agreement` is ksearch_gpumode's mean over gpumode_eval's mean per shape, `ksearch_over_gpumode` ksearch's
median over gpumode_eval's mean. A `probe` part, in its own process, records what explains the gaps and the
inputs: the cost of copying each benchmark's data (what ksearch's timing once included), whether a fresh
process's global generators are seeded (the evaluator's worker never seeds them), and, for workloads whose
task.yml gives a boolean False, the --probe-candidates (default TTT) judged by the task's check on data built as
the evaluator builds it (the text 'False') and as a real boolean, for three seeds.

Each part has its own timeout and records its error instead of stopping the run; the JSON is rewritten after
every part, and parts that would start past the time budget are recorded as skipped. Runs on one GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation_record import evaluate_record  # noqa: E402  (bench/, the script's own folder)

DEFAULT_TASK = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"
DEFAULT_CANDIDATES = ROOT / ".ext" / "K-Search" / "results" / "gpumode_trimul"
DEFAULT_OUT = ROOT / "bench" / "results" / "gpumode-trimul-h200.json"
REFERENCE_SUBMISSION = (
    "from reference import ref_kernel\n\n\ndef custom_kernel(data):\n    return ref_kernel(data)\n"
)
GPUMODE_TIMEOUT_S = 170.0
KSEARCH_TIMEOUT_S = 200.0
PROBE_TIMEOUT_S = 120.0
MIN_PART_S = 15.0  # a part is not started with less time than this left


# ---------------------------------------------------------------- the task folder as GPU MODE's runner stages it


def task_yml(folder: Path) -> dict[str, Any]:
    raw = yaml.safe_load((folder / "task.yml").read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{folder}/task.yml is not a mapping")
    return raw


def stage(folder: Path, submission: str, dst: Path) -> None:
    """The files task.yml maps, under their names, and the candidate as submission.py."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in task_yml(folder).get("files") or []:
        name, source = str(entry["name"]), str(entry["source"])
        if source == "@SUBMISSION@":
            (dst / name).write_text(submission)
        else:
            shutil.copyfile(folder / source, dst / name)
    if not (dst / "submission.py").exists():
        (dst / "submission.py").write_text(submission)


def spec_lines(cases: list[dict[str, Any]]) -> str:
    """Test cases as the platform hands them to eval.py: one `name: value; name: value` line each."""
    return "".join("; ".join(f"{k}: {v}" for k, v in case.items()) + "\n" for case in cases)


def parse_popcorn(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def run_gpumode_eval(folder: Path, submission: str, names: list[str], timeout_s: float) -> dict[str, Any]:
    """The folder's eval.py in benchmark mode on a staged copy; per-benchmark stats in microseconds."""
    t0 = time.perf_counter()
    raw = task_yml(folder)
    main = str((raw.get("config") or {}).get("main") or "eval.py")
    with tempfile.TemporaryDirectory(prefix="gm-eval-") as tmp:
        work = Path(tmp) / "task"
        stage(folder, submission, work)
        (work / "benchmarks.txt").write_text(spec_lines(raw["benchmarks"]))
        log = Path(tmp) / "popcorn.txt"
        env = {k: v for k, v in os.environ.items() if k != "POPCORN_SEED"}
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton-cache")  # a cold cache, as before every submission
        with open(log, "w") as fd_file:
            fd = fd_file.fileno()
            env["POPCORN_FD"] = str(fd)
            try:
                proc = subprocess.run(
                    [sys.executable, main, "benchmark", "benchmarks.txt"],
                    cwd=work,
                    env=env,
                    pass_fds=(fd,),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
                rc: int | None = proc.returncode
                tail = (proc.stdout + proc.stderr)[-3000:]
            except subprocess.TimeoutExpired as e:
                rc, tail = None, f"timed out after {timeout_s:.0f} s; " + str(e.stderr or "")[-2000:]
        fields = parse_popcorn(log.read_text())
    per: dict[str, Any] = {}
    for i, name in enumerate(names):
        if f"benchmark.{i}.mean" in fields:
            per[name] = {
                "mean_us": float(fields[f"benchmark.{i}.mean"]) / 1e3,
                "std_us": float(fields[f"benchmark.{i}.std"]) / 1e3,
                "best_us": float(fields[f"benchmark.{i}.best"]) / 1e3,
                "worst_us": float(fields[f"benchmark.{i}.worst"]) / 1e3,
                "runs": int(float(fields[f"benchmark.{i}.runs"])),
            }
        elif f"benchmark.{i}.error" in fields:
            per[name] = {"error": fields[f"benchmark.{i}.error"][:1000]}
    return {
        "check": fields.get("check"),
        "returncode": rc,
        "per_shape": per,
        "output_tail": tail if fields.get("check") != "pass" else "",
        "seconds": time.perf_counter() - t0,
    }


# ---------------------------------------------------------------- ksearch


def language_of(source: str) -> str:
    if "load_inline" in source or "cpp_extension" in source:
        return "cpp_ext"
    if re.search(r"^\s*(import triton|from triton)", source, re.M):
        return "triton"
    if "cupy" in source or re.search(r"\bgpu\.nvrtc\b|\bgpu import\b.*\bnvrtc\b", source):  # either name
        return "cuda"
    return "triton"  # pure PyTorch (the reference): no kernel of its own


async def run_ksearch(
    sb: Any, task: Any, source: str, protocol: str, names: list[str], timeout_s: float
) -> dict[str, Any]:
    from ksearch.worldmodel.models import Candidate, EvalSettings

    st = EvalSettings(seed=20_251_101, trials=1, workloads=names, timing_protocol=protocol)  # type: ignore[arg-type]
    return await evaluate_record(sb, task, Candidate.of(source, language_of(source)), st, timeout_s)


# ---------------------------------------------------------------- the probe (its own process)


def probe_worker(work: Path, cfg_path: Path, out_path: Path) -> None:
    """Runs in a fresh process inside a staged task folder; writes what it measured to out_path."""
    import importlib.util

    os.chdir(work)
    sys.path.insert(0, str(work))
    import torch

    res: dict[str, Any] = {
        # before anything seeds them: what the evaluator's worker process draws its weights from
        "fresh_process_seeds": {"cuda": torch.cuda.initial_seed(), "cpu": torch.initial_seed()},
    }
    cfg = json.loads(cfg_path.read_text())
    import reference

    def save() -> None:
        out_path.write_text(json.dumps(res, indent=1, default=str))

    def clone(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.clone()
        if isinstance(x, list | tuple):
            return type(x)(clone(v) for v in x)
        if isinstance(x, dict):
            return {k: clone(v) for k, v in x.items()}
        return x

    def nbytes(x: Any) -> int:
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size()
        if isinstance(x, list | tuple):
            return sum(nbytes(v) for v in x)
        if isinstance(x, dict):
            return sum(nbytes(v) for v in x.values())
        return 0

    flush = torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda")
    copies: dict[str, Any] = {}
    for name, params in cfg["benchmarks"].items():
        try:
            data = reference.generate_input(**params)
            times = []
            for _ in range(10):
                flush.fill_(42)
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                c = clone(data)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e) * 1000.0)
                del c
            copies[name] = {"bytes": nbytes(data), "copy_median_us": sorted(times)[len(times) // 2]}
            del data
        except Exception as e:  # recorded: the other benchmarks still run
            copies[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    res["data_copy"] = copies
    save()

    def verdict(result: Any) -> tuple[bool, str]:
        if isinstance(result, tuple):
            return bool(result[0]), str(result[1])[:200]
        return not result, str(result)[:200]

    typing_runs: dict[str, Any] = {}
    for cand_name, cand_file in cfg["candidates"].items():
        runs: list[dict[str, Any]] = []
        typing_runs[cand_name] = runs
        try:
            spec = importlib.util.spec_from_file_location(f"probe_{cand_name}", cand_file)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception as e:
            runs.append({"error": f"import failed: {type(e).__name__}: {e}"[:500]})
            continue
        for name, item in cfg["bool_workloads"].items():
            for k in range(3):
                for typing, params in (("as_evaluator_passes_it", item["text"]), ("as_boolean", item["raw"])):
                    p = {**params, "seed": int(params["seed"]) + k}
                    row: dict[str, Any] = {"workload": name, "seed": p["seed"], "typing": typing}
                    try:
                        torch.manual_seed(p["seed"])
                        data = reference.generate_input(**p)
                        mask = data[1] if isinstance(data, tuple) and len(data) > 1 else None
                        if isinstance(mask, torch.Tensor):
                            row["mask_all_ones"] = bool((mask == 1).all())
                        keep = clone(data)
                        out = mod.custom_kernel(clone(data))
                        torch.cuda.synchronize()
                        row["passed"], row["message"] = verdict(reference.check_implementation(keep, out))
                        exp = reference.ref_kernel(clone(data))
                        diff = (out.float() - exp.float()).abs()
                        row["max_abs_err"] = float(diff.max())
                        worst = int(diff.flatten().argmax())
                        row["worst"] = {
                            "got": float(out.flatten()[worst]),
                            "expected": float(exp.flatten()[worst]),
                        }
                        del data, keep, out, exp, diff
                    except Exception as e:
                        row["error"] = f"{type(e).__name__}: {e}"[:500]
                    runs.append(row)
                    save()
    res["bool_typing"] = typing_runs
    save()


def run_probe(folder: Path, candidates: dict[str, Path], timeout_s: float) -> dict[str, Any]:
    from ksearch.gpu.tasks.gpumode import spec_value

    t0 = time.perf_counter()
    raw = task_yml(folder)
    benches = {f"bench{i}": {k: spec_value(v) for k, v in c.items()} for i, c in enumerate(raw["benchmarks"])}
    bool_wls = {
        f"bench{i}": {"raw": dict(c), "text": {k: spec_value(v) for k, v in c.items()}}
        for i, c in enumerate(raw["benchmarks"])
        if any(v is False for v in c.values()) and "seed" in c
    }
    with tempfile.TemporaryDirectory(prefix="gm-probe-") as tmp:
        work = Path(tmp) / "task"
        stage(folder, REFERENCE_SUBMISSION, work)
        cfg = Path(tmp) / "cfg.json"
        out = Path(tmp) / "out.json"
        cfg.write_text(
            json.dumps(
                {
                    "benchmarks": benches,
                    "bool_workloads": bool_wls,
                    "candidates": {k: str(v) for k, v in candidates.items()},
                }
            )
        )
        env = dict(os.environ, TRITON_CACHE_DIR=str(Path(tmp) / "triton-cache"))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--probe-worker", str(work), str(cfg), str(out)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
            tail = (proc.stdout + proc.stderr)[-2000:] if proc.returncode else ""
        except subprocess.TimeoutExpired:
            tail = f"timed out after {timeout_s:.0f} s (what it measured so far is kept)"
        res = json.loads(out.read_text()) if out.exists() else {}
    seeds = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.initial_seed(), torch.initial_seed())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    res["another_fresh_process_seeds"] = seeds.stdout.strip() or seeds.stderr[-300:]
    res["error"] = tail
    res["seconds"] = time.perf_counter() - t0
    return res


# ---------------------------------------------------------------- assembly


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def over_processes(runs: dict[str, list[dict[str, Any]]], names: list[str]) -> dict[str, Any]:
    """Per shape: each harness's means over its processes, their median, spread (max over min) and the ratio of
    ksearch's median to the evaluator's."""
    out: dict[str, Any] = {}
    for n in names:
        row: dict[str, Any] = {}
        for part in ("gpumode_eval", "ksearch_gpumode"):
            vals = [
                r["per_shape"][n]["mean_us"]
                for r in runs.get(part, [])
                if ((r.get("per_shape") or {}).get(n) or {}).get("mean_us")
            ]
            if vals:
                row[part] = {
                    "means_us": [round(v, 1) for v in vals],
                    "median_us": round(statistics.median(vals), 1),
                    "spread": round(max(vals) / min(vals), 3),
                }
        if len(row) == 2:
            row["median_ratio"] = round(
                row["ksearch_gpumode"]["median_us"] / row["gpumode_eval"]["median_us"], 4
            )
        out[n] = row
    ratios = [r["median_ratio"] for r in out.values() if "median_ratio" in r]
    return {
        "per_shape": out,
        "max_median_deviation": round(max(abs(r - 1) for r in ratios), 4) if ratios else None,
        "processes": {p: len(v) for p, v in runs.items()},
    }


def summarize(entry: dict[str, Any], names: list[str]) -> None:
    gm = (entry.get("gpumode_eval") or {}).get("per_shape") or {}
    kg = (entry.get("ksearch_gpumode") or {}).get("per_shape") or {}
    ks = (entry.get("ksearch") or {}).get("per_shape") or {}
    agree, over = {}, {}
    for n in names:
        ref = (gm.get(n) or {}).get("mean_us")
        if not ref:
            continue
        if (kg.get(n) or {}).get("mean_us"):
            agree[n] = kg[n]["mean_us"] / ref
        if (ks.get(n) or {}).get("median_us"):
            over[n] = ks[n]["median_us"] / ref
    entry["agreement"] = agree
    entry["max_deviation"] = max((abs(r - 1) for r in agree.values()), default=None)
    entry["within_5pct"] = bool(agree) and len(agree) == len(names) and entry["max_deviation"] <= 0.05
    entry["ksearch_over_gpumode"] = over
    again = (entry.get("gpumode_eval_again") or {}).get("per_shape") or {}
    if again:
        # the evaluator against itself, in a second process: how far two runs of the owner's own code differ
        own = {
            n: again[n]["mean_us"] / gm[n]["mean_us"]
            for n in names
            if (again.get(n) or {}).get("mean_us") and (gm.get(n) or {}).get("mean_us")
        }
        entry["evaluator_self_agreement"] = own
        entry["evaluator_max_self_deviation"] = max((abs(r - 1) for r in own.values()), default=None)
    runs = entry.get("processes") or {}
    if runs:
        entry["over_processes"] = over_processes(runs, names)
    entry["geomean_us"] = {
        "gpumode_eval_mean": geomean([(gm.get(n) or {}).get("mean_us") or 0 for n in names]),
        "ksearch_gpumode_mean": geomean([(kg.get(n) or {}).get("mean_us") or 0 for n in names]),
        "ksearch_median": geomean([(ks.get(n) or {}).get("median_us") or 0 for n in names]),
    }


def plan(args: argparse.Namespace) -> tuple[Path, Any, list[Path], dict[str, str]]:
    """The task folder, its ksearch task, the candidate files and every candidate's source by name."""
    from ksearch.gpu.tasks import load_task

    folder = Path(args.task).resolve()
    files = (
        [Path(c).resolve() for c in args.candidates]
        if args.candidates
        else sorted(DEFAULT_CANDIDATES.glob("*.py"))
    )
    cands: dict[str, str] = {} if args.no_reference else {"reference": REFERENCE_SUBMISSION}
    for f in files:
        cands[f.stem] = f.read_text()
    return folder, load_task(str(folder)), files, cands


async def main_async(args: argparse.Namespace) -> int:
    from ksearch.gpu.sandbox.local import LocalSandbox

    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    folder, task, files, cands = await asyncio.to_thread(plan, args)
    names = [w.name for w in task.by_split("search")]
    paths = {f.stem: str(f) for f in files}
    order = sorted(cands, key=lambda n: (language_of(cands[n]) == "cpp_ext", n != "reference", n))
    out: dict[str, Any] = {
        "task": str(folder),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "budget_s": args.budget_s,
        "benchmarks": {w.name: w.params for w in task.by_split("search")},
        "evaluator": task.extras.get("evaluator"),
        "settings": "ksearch: EvalSettings defaults, trials=1; no torch.compile baseline; eager baseline in the "
        "same worker",
        "candidates": {n: {"file": paths.get(n), "language": language_of(cands[n])} for n in order},
    }
    out_path = Path(args.out)
    await asyncio.to_thread(out_path.parent.mkdir, parents=True, exist_ok=True)

    def save() -> None:
        out["elapsed_s"] = time.perf_counter() - t_start
        out_path.write_text(json.dumps(out, indent=1, default=str))

    def left() -> float:
        return deadline - time.perf_counter()

    with contextlib.suppress(Exception):
        import torch

        out["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    save()
    if not args.skip_probe and left() > MIN_PART_S:
        try:
            probe_files = {f.stem: f for f in files if f.stem in args.probe_candidates}
            out["probe"] = run_probe(folder, probe_files, min(PROBE_TIMEOUT_S, left()))
        except Exception:
            out["probe"] = {"error": traceback.format_exc()[-2000:]}
        save()
    sb = LocalSandbox(
        scratch_dir=Path(tempfile.gettempdir()) / "gm-side-by-side",
        call_timeout_s=150.0,
        compile_baseline=False,
        clean_baselines=False,
    )
    # the matching pair first for every candidate (the agreement), then ksearch's own protocol for every one
    pair = ("gpumode_eval", "ksearch_gpumode") + (("gpumode_eval_again",) if args.evaluator_again else ())
    repeats = [
        (f"{p}#{r}", r) for r in range(2, args.processes + 1) for p in ("gpumode_eval", "ksearch_gpumode")
    ]
    phases = [(n, p) for n in order for p in (*pair, *(name for name, _ in repeats))]
    phases += [(n, "ksearch") for n in order]
    try:
        for name, part in phases:
            entry = out["candidates"][name]
            src = cands[name]
            if (
                "#" in part
            ):  # a repeat of the matching pair in a new process (a new candidate id: a fresh worker)
                base, r = part.split("#")
                src = f"{src}\n# side by side: process {r}\n"
                if left() < MIN_PART_S:
                    continue
                try:
                    if base == "gpumode_eval":
                        rec = await asyncio.to_thread(
                            run_gpumode_eval, folder, src, names, min(GPUMODE_TIMEOUT_S, left())
                        )
                    else:
                        rec = await run_ksearch(
                            sb, task, src, "gpumode", names, min(KSEARCH_TIMEOUT_S, left())
                        )
                except Exception:
                    rec = {"error": traceback.format_exc()[-2000:]}
                procs = entry.setdefault("processes", {})
                for first in ("gpumode_eval", "ksearch_gpumode"):
                    if first not in procs and first in entry:
                        procs[first] = [entry[first]]
                procs.setdefault(base, []).append(rec)
                summarize(entry, names)
                save()
                continue
            if left() < MIN_PART_S:
                entry[part] = {"skipped": f"time budget spent ({args.budget_s:.0f} s)"}
                summarize(entry, names)
                continue
            try:
                if part in ("gpumode_eval", "gpumode_eval_again"):
                    entry[part] = await asyncio.to_thread(
                        run_gpumode_eval, folder, src, names, min(GPUMODE_TIMEOUT_S, left())
                    )
                else:
                    protocol = "gpumode" if part == "ksearch_gpumode" else "ksearch"
                    entry[part] = await run_ksearch(
                        sb, task, src, protocol, names, min(KSEARCH_TIMEOUT_S, left())
                    )
            except Exception:
                entry[part] = {"error": traceback.format_exc()[-2000:]}
            summarize(entry, names)
            save()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sb.close(), 60)
    save()
    for name in order:
        e = out["candidates"][name]
        dev = e.get("max_deviation")
        g = e.get("geomean_us") or {}
        print(
            f"{name:14s} gpumode_eval {_us(g.get('gpumode_eval_mean'))}  ksearch[gpumode] {_us(g.get('ksearch_gpumode_mean'))}"
            f"  ksearch {_us(g.get('ksearch_median'))}  max |dev| {'-' if dev is None else f'{100 * dev:.1f}%'}"
            f"  status {(e.get('ksearch_gpumode') or {}).get('status')}/{(e.get('ksearch') or {}).get('status')}"
        )
        op = e.get("over_processes")
        if op:
            print(f"{'':14s} over {op['processes']} processes: max |median dev| {op['max_median_deviation']}")
    print(f"wrote {out_path} in {time.perf_counter() - t_start:.0f} s")
    return 0


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:8.1f} us"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe-worker"]:
        probe_worker(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--task", default=str(DEFAULT_TASK), help="a GPU MODE task folder (task.yml, reference.py, eval.py)"
    )
    p.add_argument("--candidates", nargs="*", help=f"candidate files (default: {DEFAULT_CANDIDATES}/*.py)")
    p.add_argument(
        "--no-reference", action="store_true", help="do not evaluate the task's reference as a candidate"
    )
    p.add_argument("--skip-probe", action="store_true")
    p.add_argument(
        "--evaluator-again",
        action="store_true",
        help="run eval.py a second time per candidate, in a new process: the owner's own process-to-process spread",
    )
    p.add_argument(
        "--probe-candidates",
        nargs="*",
        default=["TTT"],
        help="candidates (by file stem) the probe judges on data built with the evaluator's and with real booleans",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run the matching pair this many times per candidate, each in a new process (over_processes)",
    )
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--budget-s", type=float, default=330.0)
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
