"""ksearch's `kernelbench` timing protocol next to KernelBench's own evaluation, on real KernelBench problems -> JSON.

    python bench/kernelbench_side_by_side.py [--kb .ext/kb] [--problems level1/88_MinGPTNewGelu ...]
        [--candidates bench/side_by_side/kernelbench] [--no-reference] [--perf-trials 100] [--correct-trials 1]
        [--compile] [--out bench/results/side-by-side-kernelbench-h200.json] [--budget-s 240]

A copy of KernelBench (its `src/kernelbench` package and the chosen problem files) is staged in a temporary
folder. Per problem, the candidates are the reference itself (`class ModelNew(Model): pass` appended to the
problem's source) and every file `<level>_<problem>.py` under --candidates (our own Triton kernels). Parts:

  kernelbench_baseline  (per problem) KernelBench's `timing.measure_ref_program_time` on the reference, eager
                        (and with --compile, torch.compile): its mean, as `scripts/generate_baseline_time.py` records;
  kernelbench_eval      KernelBench's `eval.eval_kernel_against_ref`, as its scripts call it (timing_method
                        "cuda_event", num_perf_trials 100, precision fp32, backend "triton"), in a fresh process:
                        correctness, `runtime` (the mean of its trials) and `ref_runtime`;
  ksearch_kernelbench   ksearch's sandbox (jailed worker) with EvalSettings(timing_protocol="kernelbench"): the
                        candidate's mean_us, and the eager baseline's mean as the worker measured it;
  ksearch               (if time is left) ksearch's own protocol, for context (median_us).

Both KernelBench parts run KernelBench's code unchanged in a driver process (`--kb-driver`) that imports its
modules from the staged copy. Its package imports API clients it does not use for evaluating (`dotenv`, `tqdm`,
`openai`, `litellm`, `requests`): any of them not installed is replaced by an empty placeholder module, named in
the JSON (`kb_stubbed`). `agreement` is ksearch's mean over KernelBench's mean (KernelBench rounds its statistics to
3 significant digits: up to 0.5%); `rel_diff` is agreement - 1. The JSON is rewritten after every part; parts
that would start past --budget-s are recorded as skipped. Runs on one GPU.
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
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation_record import evaluate_record  # noqa: E402  (bench/, the script's own folder)

DEFAULT_KB = ROOT / ".ext" / "kb"
DEFAULT_PROBLEMS = ["level1/88_MinGPTNewGelu", "level1/40_LayerNorm", "level2/76_Gemm_Add_ReLU"]
DEFAULT_CANDIDATES = ROOT / "bench" / "side_by_side" / "kernelbench"
DEFAULT_OUT = ROOT / "bench" / "results" / "side-by-side-kernelbench-h200.json"
REFERENCE_TAIL = "\n\n# the reference as a candidate\nclass ModelNew(Model):\n    pass\n"
KB_TIMEOUT_S = 180.0
KSEARCH_TIMEOUT_S = 200.0
MIN_PART_S = 10.0  # a part is not started with less time than this left
SEED = 20_251_201
# imported by KernelBench's package for generating kernels, not for evaluating them: placeholders if missing
KB_UNUSED_IMPORTS: dict[str, dict[str, Any]] = {
    "dotenv": {"load_dotenv": lambda *a, **k: False},
    "tqdm": {"tqdm": lambda it=None, *a, **k: it},
    "openai": {"OpenAI": None},
    "litellm": {"completion": None},
    "requests": {},
}


# ---------------------------------------------------------------- KernelBench, staged and run as it is


def stage(kb: Path, problems: list[str], dst: Path) -> dict[str, Path]:
    """KernelBench's package and the chosen problem files under `dst`; problem -> staged file."""
    shutil.copytree(
        kb / "src" / "kernelbench", dst / "src" / "kernelbench", ignore=shutil.ignore_patterns("*.pyc")
    )
    out = {}
    for p in problems:
        src = kb / "KernelBench" / f"{p}.py"
        target = dst / "KernelBench" / f"{p}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        out[p] = target
    return out


def kb_driver(cfg_path: Path) -> None:
    """In a fresh process: KernelBench's own evaluation or baseline timing, its result written as JSON."""
    cfg = json.loads(cfg_path.read_text())
    out_path = Path(cfg["out"])
    res: dict[str, Any] = {"kb_stubbed": []}
    for name, attrs in KB_UNUSED_IMPORTS.items():
        try:
            __import__(name)
        except ImportError:
            mod = types.ModuleType(name)
            mod.__dict__.update(attrs)
            sys.modules[name] = mod
            res["kb_stubbed"].append(name)
    sys.path.insert(0, cfg["src"])
    import torch
    from kernelbench import eval as kb_eval  # type: ignore[import-not-found]  # the staged copy
    from kernelbench import timing as kb_timing

    res["kb_modules"] = {m: getattr(sys.modules.get(m), "__file__", None) for m in ("kernelbench.eval",)}
    ref_src = Path(cfg["problem"]).read_text()
    device = torch.device("cuda:0")
    t0 = time.perf_counter()
    if cfg["mode"] == "baseline":
        for kind, compiled in (("eager", False), ("compile", True)):
            if compiled and not cfg["compile"]:
                continue
            res[kind] = kb_timing.measure_ref_program_time(
                ref_arch_name=cfg["name"],
                ref_arch_src=ref_src,
                num_trials=cfg["perf_trials"],
                timing_method="cuda_event",
                use_torch_compile=compiled,
                device=device,
                precision="fp32",
            )
    else:
        r = kb_eval.eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=Path(cfg["candidate"]).read_text(),
            num_correct_trials=cfg["correct_trials"],
            num_perf_trials=cfg["perf_trials"],
            measure_performance=True,
            timing_method="cuda_event",
            verbose=False,
            build_dir=None,
            device=device,
            backend="triton",
            precision=kb_eval.get_torch_dtype_from_string("fp32"),
        )
        res["result"] = None if r is None else json.loads(json.dumps(r.model_dump(), default=str))
    res["seconds"] = time.perf_counter() - t0
    out_path.write_text(json.dumps(res, indent=1, default=str))


def run_kb(
    mode: str, staged_src: Path, problem: Path, name: str, candidate: Path | None, args: Any, timeout_s: float
) -> dict[str, Any]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kb-drv-") as tmp:
        cfg = {
            "mode": mode,
            "src": str(staged_src),
            "problem": str(problem),
            "name": name,
            "candidate": str(candidate) if candidate else None,
            "perf_trials": args.perf_trials,
            "correct_trials": args.correct_trials,
            "compile": args.compile,
            "out": str(Path(tmp) / "out.json"),
        }
        cfg_path = Path(tmp) / "cfg.json"
        cfg_path.write_text(json.dumps(cfg))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--kb-driver", str(cfg_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
            rc: int | None = proc.returncode
            tail = (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            rc, tail = None, f"timed out after {timeout_s:.0f} s; " + str(e.stderr or "")[-2000:]
        out = json.loads(Path(cfg["out"]).read_text()) if Path(cfg["out"]).exists() else {}
    out["returncode"] = rc
    out["output_tail"] = tail[-1500:]  # KernelBench prints what it timed, and its errors
    out["wall_s"] = time.perf_counter() - t0
    return out


def kb_mean_us(part: dict[str, Any] | None) -> float | None:
    """KernelBench's reported mean (ms, 3 significant digits) in microseconds."""
    r = (part or {}).get("result") or {}
    if not r.get("correctness") or (r.get("runtime") or -1) <= 0:
        return None
    return float(r["runtime"]) * 1000.0


# ---------------------------------------------------------------- ksearch


class RecordingCache:
    """The sandbox's baseline cache, in memory: every baseline this run measures, as the worker returned it."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    async def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value


def baseline_of(cache: RecordingCache, task_name: str, kind: str, protocol: str) -> dict[str, Any] | None:
    """The raw baseline the worker measured for this task, kind and protocol (see EvalSteps._baseline_key)."""
    marker = ":compile[" if kind == "compile" else ":eager:"
    suffix = f":protocol={protocol}"
    for key, value in cache.data.items():
        if not key.startswith("baseline:") or f":{task_name}:" not in key or marker not in key:
            continue
        if key.endswith(suffix) if protocol != "ksearch" else ":protocol=" not in key:
            return {k: value.get(k) for k in ("mean_us", "median_us", "n", "flags", "error") if k in value}
    return None


async def run_ksearch(
    sb: Any, task: Any, source: str, protocol: str, args: Any, timeout_s: float
) -> dict[str, Any]:
    from ksearch.worldmodel.models import Candidate, EvalSettings

    trials = (
        args.perf_trials if protocol == "kernelbench" else 200
    )  # the kernelbench protocol: min(100, max_reps)
    st = EvalSettings(
        seed=SEED,
        trials=args.correct_trials,
        workloads=["default"],
        timing_protocol=protocol,
        min_reps=min(10, trials),
        max_reps=trials,
    )
    return await evaluate_record(sb, task, Candidate.of(source, "triton"), st, timeout_s)


# ---------------------------------------------------------------- assembly


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(out: dict[str, Any]) -> None:
    pairs = []
    for pname, prob in out["problems"].items():
        for cname, c in prob["candidates"].items():
            kb = kb_mean_us(c.get("kernelbench_eval"))
            ks = (((c.get("ksearch_kernelbench") or {}).get("per_shape") or {}).get("default") or {}).get(
                "mean_us"
            )
            own = (((c.get("ksearch") or {}).get("per_shape") or {}).get("default") or {}).get("median_us")
            agree = ratio(ks, kb)
            c["kernelbench_us"], c["ksearch_kernelbench_us"] = kb, ks
            c["agreement"] = agree
            c["rel_diff"] = None if agree is None else agree - 1.0
            c["within_5pct"] = agree is not None and abs(agree - 1.0) <= 0.05
            c["ksearch_protocol_over_kernelbench"] = ratio(own, kb)
            ref_rt = ((c.get("kernelbench_eval") or {}).get("result") or {}).get("ref_runtime")
            c["kernelbench_ref_runtime_us"] = float(ref_rt) * 1000.0 if ref_rt and ref_rt > 0 else None
            pairs.append(
                {
                    "problem": pname,
                    "candidate": cname,
                    "kernelbench_us": kb,
                    "ksearch_us": ks,
                    "rel_diff": c["rel_diff"],
                    "within_5pct": c["within_5pct"],
                    "kernelbench_correct": ((c.get("kernelbench_eval") or {}).get("result") or {}).get(
                        "correctness"
                    ),
                    "ksearch_status": (c.get("ksearch_kernelbench") or {}).get("status"),
                }
            )
        base = prob.get("kernelbench_baseline") or {}
        for kind in ("eager", "compile"):
            kb_b = (base.get(kind) or {}).get("mean")
            ks_b = (prob.get("ksearch_baseline") or {}).get(kind) or {}
            kb_us = float(kb_b) * 1000.0 if kb_b else None
            agree = ratio(ks_b.get("mean_us"), kb_us)
            if kb_us is not None or ks_b:
                prob.setdefault("baseline", {})[kind] = {
                    "kernelbench_us": kb_us,
                    "ksearch_us": ks_b.get("mean_us"),
                    "rel_diff": None if agree is None else agree - 1.0,
                }
                pairs.append(
                    {
                        "problem": pname,
                        "candidate": f"baseline:{kind}",
                        "kernelbench_us": kb_us,
                        "ksearch_us": ks_b.get("mean_us"),
                        "rel_diff": None if agree is None else agree - 1.0,
                        "within_5pct": agree is not None and abs(agree - 1.0) <= 0.05,
                    }
                )
    out["pairs"] = pairs
    done = [p for p in pairs if p["rel_diff"] is not None]
    out["summary"] = {
        "pairs": len(pairs),
        "measured": len(done),
        "within_5pct": sum(p["within_5pct"] for p in done),
        "max_abs_rel_diff": max((abs(p["rel_diff"]) for p in done), default=None),
    }


def _git_head(folder: Path) -> str | None:
    """The commit checked out in `folder`, if it is the top of a git work tree (not a folder inside another)."""
    try:
        top = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return top[1] if len(top) == 2 and Path(top[0]).resolve() == folder.resolve() else None


def environment(kb: Path) -> dict[str, Any]:
    env: dict[str, Any] = {
        "host": platform.node(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    with contextlib.suppress(Exception):
        import torch

        env.update(
            torch=torch.__version__,
            cuda=torch.version.cuda,
            device=torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU",
        )
    with contextlib.suppress(Exception):
        import triton

        env["triton"] = triton.__version__
    with contextlib.suppress(Exception):
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    for key, where in (("kernelbench_commit", kb), ("ksearch_commit", ROOT)):
        env[key] = _git_head(where)
    with contextlib.suppress(Exception):
        status = ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"]
        env["ksearch_modified_files"] = subprocess.run(
            status, capture_output=True, text=True, timeout=30
        ).stdout.count("\n")
    return env


class Plan:
    """The staged KernelBench copy, the ksearch tasks, and every (problem, candidate) with its file and source."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        from ksearch.gpu.tasks import load_task

        self.kb = Path(args.kb).resolve()
        self.staged = stage(self.kb, args.problems, tmp / "kb")
        self.src = tmp / "kb" / "src"
        self.items: list[tuple[str, str, Path, str]] = []  # (problem, candidate name, file, source)
        for p, f in self.staged.items():
            stem = p.replace("/", "_")
            if not args.no_reference:
                ref_file = tmp / "candidates" / f"{stem}_reference.py"
                ref_file.parent.mkdir(parents=True, exist_ok=True)
                ref_file.write_text(f.read_text() + REFERENCE_TAIL)
                self.items.append((p, "reference", ref_file, ref_file.read_text()))
            for c in sorted(Path(args.candidates).resolve().glob(f"{stem}*.py")):
                if c.stem == stem or c.stem.startswith(f"{stem}__"):  # <level>_<problem>[__<variant>].py
                    self.items.append((p, c.stem.removeprefix(stem).strip("_") or "ours", c, c.read_text()))
        self.tasks = {p: load_task(str(f)) for p, f in self.staged.items()}


async def main_async(args: argparse.Namespace) -> int:
    from ksearch.gpu.sandbox.local import LocalSandbox

    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    out_path = Path(args.out)
    out: dict[str, Any] = {
        "what": "ksearch's kernelbench timing protocol vs KernelBench's own eval_kernel_against_ref, per problem",
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "settings": {
            "kernelbench": f"eval_kernel_against_ref(timing_method='cuda_event', num_perf_trials={args.perf_trials}, "
            f"num_correct_trials={args.correct_trials}, precision=fp32, backend='triton'); "
            f"measure_ref_program_time(num_trials={args.perf_trials}, cuda_event, fp32)",
            "ksearch": f"LocalSandbox (jailed worker), EvalSettings(timing_protocol='kernelbench', "
            f"trials={args.correct_trials}, workloads=['default']); eager baseline in the same worker",
            "budget_s": args.budget_s,
        },
        "environment": await asyncio.to_thread(environment, Path(args.kb)),
        "problems": {},
    }

    def save() -> None:
        out["elapsed_s"] = time.perf_counter() - t_start
        summarize(out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(out, indent=1, default=str))

    def left() -> float:
        return deadline - time.perf_counter()

    tmp = Path(tempfile.mkdtemp(prefix="kb-side-by-side-"))
    plan = await asyncio.to_thread(Plan, args, tmp)
    for p in plan.staged:
        out["problems"][p] = {"file": f"KernelBench/{p}.py", "candidates": {}}
    for p, name, cf, _src in plan.items:
        shown = str(cf.relative_to(ROOT)) if cf.is_relative_to(ROOT) else f"(staged) {cf.name}"
        out["problems"][p]["candidates"][name] = {"file": shown}
    out["settings"]["tolerance_float32"] = {
        p: list(t.tolerance.for_dtype("float32")) for p, t in plan.tasks.items()
    }
    await asyncio.to_thread(save)
    cache = RecordingCache()
    sb = LocalSandbox(
        scratch_dir=tmp / "sandbox",
        call_timeout_s=150.0,
        compile_baseline=args.compile,
        clean_baselines=False,
        cache=cache,
    )

    async def part(entry: dict[str, Any], key: str, job: Any) -> None:
        if left() < MIN_PART_S:
            entry[key] = {"skipped": f"time budget spent ({args.budget_s:.0f} s)"}
        else:
            try:
                entry[key] = await job()
            except Exception:
                entry[key] = {"error": traceback.format_exc()[-2000:]}
        await asyncio.to_thread(save)

    try:
        for p, f in plan.staged.items():
            prob = out["problems"][p]
            await part(
                prob,
                "kernelbench_baseline",
                lambda p=p, f=f: asyncio.to_thread(
                    run_kb, "baseline", plan.src, f, p, None, args, min(KB_TIMEOUT_S, left())
                ),
            )
            for pp, name, cf, src in plan.items:
                if pp != p:
                    continue
                entry = prob["candidates"][name]
                await part(
                    entry,
                    "kernelbench_eval",
                    lambda cf=cf, f=f, p=p: asyncio.to_thread(
                        run_kb, "eval", plan.src, f, p, cf, args, min(KB_TIMEOUT_S, left())
                    ),
                )
                await part(
                    entry,
                    "ksearch_kernelbench",
                    lambda src=src, p=p: run_ksearch(
                        sb, plan.tasks[p], src, "kernelbench", args, min(KSEARCH_TIMEOUT_S, left())
                    ),
                )
            prob["ksearch_baseline"] = {
                kind: baseline_of(cache, plan.tasks[p].name, kind, "kernelbench")
                for kind in ("eager", "compile")
            }
            await asyncio.to_thread(save)
        if not args.skip_ksearch_protocol:
            for p, name, _cf, src in plan.items:
                entry = out["problems"][p]["candidates"][name]
                await part(
                    entry,
                    "ksearch",
                    lambda src=src, p=p: run_ksearch(
                        sb, plan.tasks[p], src, "ksearch", args, min(KSEARCH_TIMEOUT_S, left())
                    ),
                )
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sb.close(), 60)
        shutil.rmtree(tmp, ignore_errors=True)
    save()
    for pr in out["pairs"]:
        d = pr["rel_diff"]
        print(
            f"{pr['problem']:28s} {pr['candidate']:18s} kernelbench {_us(pr['kernelbench_us'])}  "
            f"ksearch[kernelbench] {_us(pr['ksearch_us'])}  {'-' if d is None else f'{100 * d:+.1f}%'}"
        )
    s = out["summary"]
    print(
        f"{s['within_5pct']} of {s['measured']} measured pairs within 5%; wrote {out_path} in "
        f"{time.perf_counter() - t_start:.0f} s"
    )
    return 0


def _us(v: float | None) -> str:
    return "       -   " if v is None else f"{v:9.1f} us"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--kb-driver"]:
        kb_driver(Path(argv[1]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--kb", default=str(DEFAULT_KB), help="a KernelBench checkout (src/kernelbench, KernelBench/)"
    )
    p.add_argument("--problems", nargs="+", default=DEFAULT_PROBLEMS, help="level/stem of problem files")
    p.add_argument(
        "--candidates", default=str(DEFAULT_CANDIDATES), help="folder of <level>_<stem>*.py candidates"
    )
    p.add_argument("--no-reference", action="store_true", help="do not evaluate the reference as a candidate")
    p.add_argument(
        "--perf-trials",
        type=int,
        default=100,
        choices=range(1, 101),
        metavar="1..100",
        help="KernelBench's num_perf_trials (its scripts: 100; ksearch's protocol takes at most 100)",
    )
    p.add_argument(
        "--correct-trials",
        type=int,
        default=1,
        help="KernelBench's num_correct_trials (its function's default 1; its scripts use 5)",
    )
    p.add_argument("--compile", action="store_true", help="also the torch.compile baseline, in both")
    p.add_argument("--skip-ksearch-protocol", action="store_true", help="no ksearch-protocol part at the end")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--budget-s", type=float, default=240.0)
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
