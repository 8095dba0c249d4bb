"""The torch.compile baseline as ksearch measures it, next to a fresh per-shape compile measured independently.

    python bench/compile_baseline.py --out bench/results/compile-baseline-h200.json [--tasks a,b] [--modes default]
    python bench/compile_baseline.py --table bench/results/compile-baseline-h200*.json   # README table

For every built-in task (or --tasks) and every workload that is not the smoke one:
  ksearch  the compile baseline through the sandbox, exactly as every evaluation gets it (LocalSandbox's
           baselines: the clean baseline process, its own compiler caches, the default EvalSettings);
  fresh    a new process for that workload alone: torch.compile(reference, dynamic=False, mode=...), the
           same inputs, timed the same way (ksearch.gpu.timing.measure: CUDA events, L2 flush, rotated inputs, the same
           repetition rule); it also counts the sizes dynamo made symbolic (0 for a static compile);
  ratio    ksearch / fresh (1.0 = the same; the issue's bar is within 3%).

Robust on purpose: each task runs under a timeout and each fresh measurement in its own process under
another; a failure is recorded in the JSON (status, error) and the next task runs. The JSON is rewritten
after every task; tasks already complete in --out are kept and skipped (--redo measures them again), so
the same command can be run again to finish what a budget cut off. --budget-s stops starting new tasks
in time (the whole suite takes longer than one 10-minute call: run it in --tasks groups, see the README).
--cpu checks the plumbing on a machine without a GPU (smoke workloads, inductor on the CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.gpu.tasks import builtin_names, load_task  # noqa: E402
from ksearch.worldmodel.models import CompileMode, EvalSettings  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "compile-baseline-h200.json"
AGREE = 0.03  # the bar: the reported baseline within 3% of a fresh per-shape compile
SEED = 20261130  # inputs: the same seeds in both measurements (the worker times seed + 1000 + j)
MIN_TASK_S = 45.0  # do not start a task with less budget left than this


# ----------------------------------------------------------------------------------------- fresh child


def _fresh(spec: dict[str, Any]) -> dict[str, Any]:
    """In a new process: compile the reference for one workload, static, and time it as the worker does."""
    import torch

    from ksearch.gpu.tasks.rt.runtime import TaskRuntime
    from ksearch.gpu.timing import measure as timing

    cpu = spec["cpu"]
    device = torch.device("cpu" if cpu else "cuda:0")
    if not cpu:
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)  # the context now, not inside the first timed call
    task = load_task(spec["task"])
    wl = task.workload(spec["workload"])
    st = EvalSettings.model_validate(spec["settings"])
    rt = TaskRuntime(task)
    ref = rt.build_reference(wl, device)  # type: ignore[arg-type]

    symbols: list[str] = []

    class Symbols(logging.Handler):  # dynamo logs each size it makes symbolic (dynamic) here
        def emit(self, record: logging.LogRecord) -> None:
            msg = record.getMessage()
            if msg.startswith("create_symbol") and "size()" in msg:
                symbols.append(msg[:200])

    shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    shapes_log.addHandler(Symbols(level=logging.INFO))
    shapes_log.setLevel(logging.INFO)

    comp = torch.compile(ref, dynamic=False, mode=st.compile_mode)

    def call(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return comp(inputs)

    seed = st.seed + 1000  # the worker's timing inputs
    sets = [rt.make_inputs(wl, seed, device)]  # type: ignore[arg-type]
    wanted = st.input_sets
    if not cpu:  # as many sets as the worker keeps: at most 30% of free memory
        free, _ = torch.cuda.mem_get_info(device)
        per = max(sum(x.numel() * x.element_size() for x in sets[0] if isinstance(x, torch.Tensor)), 1)
        wanted = max(1, min(wanted, int(0.3 * free // per)))
    sets += [rt.make_inputs(wl, seed + j, device) for j in range(1, wanted)]  # type: ignore[arg-type]
    t0 = time.perf_counter()
    call(sets[0])  # the compile
    if not cpu:
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    if cpu:
        res = timing.time_cpu(call, sets, reps=min(st.min_reps, 3))
    else:
        res = timing.time_gpu(
            call,
            sets,
            warmup=st.warmup,
            min_reps=st.min_reps,
            max_reps=st.max_reps,
            budget_s=st.time_budget_s,
            target_rel_ci=st.target_rel_ci,
            preamble=timing.Preamble(device, flush=st.flush_l2),
        )
    out = res.to_dict()
    out.update(compile_s=round(compile_s, 2), symbolic_sizes=len(symbols), symbols=symbols[:4])
    out["recompiles"] = _recompiles()
    out["torch"] = torch.__version__
    return out


def _recompiles() -> int | str:
    """How many compiles of this process were recompiles (0 for one static shape)."""
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return sum(1 for m in get_compilation_metrics() if getattr(m, "recompile_reason", None))
    except Exception as e:  # a private API of dynamo: its absence is reported, not fatal
        return f"unknown ({type(e).__name__}: {str(e)[:100]})"


def run_fresh(spec: dict[str, Any], caches: Path, timeout_s: float) -> dict[str, Any]:
    """One fresh measurement in its own process group, killed whole on timeout; errors come back as data."""
    from ksearch.gpu.sandbox.pool import compiler_cache_env

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keeps .whl's site
    env = {**os.environ, **compiler_cache_env(caches), "PYTHONPATH": path}
    if spec["cpu"]:
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--fresh-child", json.dumps(spec)]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return {"error": f"timeout after {timeout_s:.0f} s", "log_tail": (stderr or "")[-1500:]}
    wall = round(time.monotonic() - t0, 1)  # the whole process: start, compile, timing
    last = (stdout or "").strip().splitlines()[-1:] or [""]
    try:
        result = json.loads(last[0])
    except ValueError:
        return {"error": f"the fresh process exited {proc.returncode} without a result", "process_s": wall,
                "log_tail": (stderr or "")[-1500:]}  # fmt: skip
    result["process_s"] = wall
    return result


# ---------------------------------------------------------------------------------------- ksearch side


async def ksearch_baselines(
    sb: Any, task: Any, names: list[str], st: EvalSettings
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The eager and compile baselines of `names` exactly as an evaluation gets them (LocalSandbox's own
    `_baselines`: the clean baseline process, its caches, its cache key), with the full timing records
    (an error in place of one that failed), and the sandbox's notes."""
    from ksearch.gpu.sandbox.run import Run
    from ksearch.worldmodel.models import Candidate

    env = await sb._environment()
    run = Run(Candidate.of("# baselines only\n", "triton"), st)
    async with sb.pool.acquire() as w:
        if not sb.clean_baselines:
            reply = await w.call("task", {"task": json.loads(task.model_dump_json())}, sb.call_timeout_s)
            if not reply.get("ok"):
                raise RuntimeError(f"the worker could not set up the task: {reply.get('error')}")
        await sb._baselines(w, run, task, names, env)
    out: dict[str, dict[str, Any]] = {}
    for wl in names:
        keys = {kind: sb._baseline_key(task, wl, kind, env, st) for kind in ("eager", "compile")}
        out[wl] = {kind: await sb.cache.get(key) for kind, key in keys.items()}
    return out, [f for f in run.flags if f.startswith("note:")]


# -------------------------------------------------------------------------------------------- driver


def _save(out: Path, report: dict[str, Any], t0: float) -> None:
    report["elapsed_s"] = round(time.monotonic() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(out)


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    rows = [r for t in report["tasks"].values() for r in t.get("rows", [])]
    ratios = [r["ratio"] for r in rows if r.get("ratio") is not None]
    worst = max(rows, key=lambda r: abs((r.get("ratio") or 1.0) - 1.0), default=None)
    return {
        "workloads": len(rows),
        "compared": len(ratios),
        "within_3pct": sum(1 for x in ratios if abs(x - 1.0) <= AGREE),
        "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "worst": {k: worst[k] for k in ("task", "workload", "mode", "ratio")} if worst and ratios else None,
        "tasks": {n: t.get("status") for n, t in report["tasks"].items()},
    }


def start_report(args: argparse.Namespace) -> dict[str, Any]:
    """The report to fill: --out's, so tasks complete there are kept (unless --redo), else a new one."""
    out = Path(args.out)
    report: dict[str, Any] = {"tasks": {}}
    if out.is_file() and not args.redo:
        with contextlib.suppress(ValueError):
            report = json.loads(out.read_text())
    report.update(
        script="bench/compile_baseline.py",
        argv=sys.argv[1:],
        started=time.strftime("%Y-%m-%d %H:%M:%S"),
        python=platform.python_version(),
        modes=args.modes.split(","),
        agree_within=AGREE,
    )
    report.setdefault("tasks", {})
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        report["commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=str(ROOT), timeout=10
        ).stdout.strip()
    return report


async def measure(args: argparse.Namespace, report: dict[str, Any], scratch: Path) -> dict[str, Any]:
    from ksearch.gpu.sandbox.kvcache import JsonFileCache
    from ksearch.gpu.sandbox.local import LocalSandbox

    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    names = args.tasks.split(",") if args.tasks else builtin_names()
    modes: list[CompileMode] = args.modes.split(",")  # type: ignore[assignment]
    out = Path(args.out)
    # A fresh baseline cache for this run (so nothing measured earlier is reused); compiler caches persist.
    cache_file = Path(tempfile.mkdtemp(prefix="baseline-cache-", dir=scratch)) / "cache.json"

    def sandbox() -> LocalSandbox:
        return LocalSandbox(
            n_workers=1,
            scratch_dir=scratch / "sandbox",
            cache=JsonFileCache(cache_file),
            cpu_mode=True if args.cpu else None,
            compile_baseline=True,
            clean_baselines=True,  # as on every GPU
            build_timeout_s=args.compile_timeout_s,
        )

    sb = sandbox()
    try:
        try:
            env = await asyncio.wait_for(sb._environment(), 300)
        except Exception as e:  # no worker could start: say so in the JSON rather than only on stderr
            report["error"] = f"the sandbox did not start: {type(e).__name__}: {e}"[:2000]
            names = []
        else:
            report["environment"] = env.model_dump()
        for name in names:
            done = report["tasks"].get(name, {})
            if done.get("status") == "ok" and not args.redo:
                print(f"{name}: kept from {out.name}", flush=True)
                continue
            left = deadline - time.monotonic()
            if left < MIN_TASK_S:
                report["tasks"][name] = {"status": "not_reached", "error": f"budget: {left:.0f} s left"}
                continue
            print(f"{name}: measuring ({left:.0f} s of budget left)", flush=True)
            rec, sb = await measure_task(
                args, sb, sandbox, name, modes, min(args.task_timeout_s, left), scratch
            )
            report["tasks"][name] = rec
            report["summary"] = _summary(report)
            _save(out, report, t0)
            print(f"{name}: {rec['status']} in {rec['wall_s']} s " + _brief(rec), flush=True)
    finally:
        await sb.close()
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    report["summary"] = _summary(report)
    _save(out, report, t0)
    return report


def _brief(rec: dict[str, Any]) -> str:
    return ", ".join(
        f"{r['workload']}[{r['mode']}] {r['ratio']:.3f}" if r.get("ratio") else f"{r['workload']} -"
        for r in rec.get("rows", [])
    )


async def measure_task(
    args: argparse.Namespace,
    sb: Any,
    make_sandbox: Any,
    name: str,
    modes: list[CompileMode],
    timeout_s: float,
    scratch: Path,
) -> tuple[dict[str, Any], Any]:
    t0 = time.monotonic()
    rec: dict[str, Any] = {"status": "ok", "rows": []}
    try:
        task = load_task(name)
        wls = [w for w in task.workloads if (w.split == "smoke") == bool(args.cpu)]
        for mode in modes:
            st = EvalSettings(seed=SEED, workloads=[w.name for w in wls], compile_mode=mode)
            left = timeout_s - (time.monotonic() - t0)
            try:
                ks, notes = await asyncio.wait_for(
                    ksearch_baselines(sb, task, [w.name for w in wls], st), left
                )
            except TimeoutError:
                rec.update(status="timeout", error=f"the ksearch baselines did not finish in {left:.0f} s")
                await sb.close()  # kills its workers; a new sandbox serves the next task
                return _finish(rec, t0), make_sandbox()
            rec.setdefault("notes", []).extend(notes)
            for w in wls:
                left = timeout_s - (time.monotonic() - t0)
                if left < 5:
                    rec.update(
                        status="timeout", error="the task's time ran out before every fresh measurement"
                    )
                    return _finish(rec, t0), sb
                spec = {"task": name, "workload": w.name, "settings": st.model_dump(), "cpu": bool(args.cpu)}
                # max-autotune benchmarks kernel configurations while it compiles: minutes for a GEMM
                patience = args.fresh_timeout_s * (3 if mode != "default" else 1)
                fresh = await asyncio.to_thread(
                    run_fresh, spec, scratch / "fresh-caches", min(patience, left)
                )
                comp = ks[w.name].get("compile") or {}
                eager = ks[w.name].get("eager") or {}
                ratio = (
                    comp["median_us"] / fresh["median_us"]
                    if comp.get("median_us") and fresh.get("median_us")
                    else None
                )
                rec["rows"].append(
                    {
                        "task": name,
                        "workload": w.name,
                        "split": w.split,
                        "mode": mode,
                        "ksearch": {"compile": comp, "eager": eager},
                        "fresh": fresh,
                        "ratio": round(ratio, 4) if ratio else None,
                        "within_3pct": abs(ratio - 1.0) <= AGREE if ratio else None,
                    }
                )
                if ratio is None:
                    rec["status"] = "incomplete"
    except Exception as e:  # one task's failure is recorded; the others still run
        rec.update(
            status="error", error=f"{type(e).__name__}: {e}"[:2000], trace=traceback.format_exc()[-3000:]
        )
    return _finish(rec, t0), sb


def _finish(rec: dict[str, Any], t0: float) -> dict[str, Any]:
    rec["wall_s"] = round(time.monotonic() - t0, 1)
    return rec


def table(paths: list[Path]) -> str:
    """The README's table from one or more result files (later files win for a task measured twice)."""
    tasks: dict[str, Any] = {}
    device = ""
    for p in paths:
        data = json.loads(p.read_text())
        tasks.update(data.get("tasks", {}))
        device = (data.get("environment") or {}).get("device", device)
    out = [
        f"| task | workload | split | mode | eager | torch.compile as ksearch reports it | fresh static "
        f"compile{f' ({device})' if device else ''} | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def us(rec: dict[str, Any] | None) -> str:
        return f"{rec['median_us']:.1f} us" if rec and rec.get("median_us") else "-"

    for name in sorted(tasks):
        t = tasks[name]
        if not t.get("rows"):
            out.append(f"| {name} | - | | | | {t.get('status')}: {str(t.get('error', ''))[:80]} | | |")
        for r in t.get("rows", []):
            ratio = f"{r['ratio']:.3f}" if r.get("ratio") else (r["fresh"].get("error") or "-")[:60]
            out.append(
                f"| {name} | {r['workload']} | {r['split']} | {r['mode']} | {us(r['ksearch'].get('eager'))} | "
                f"{us(r['ksearch'].get('compile'))} | {us(r['fresh'])} | {ratio} |"
            )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="the JSON to write (and to resume from)")
    ap.add_argument("--tasks", help="comma-separated built-in task names (default: all)")
    ap.add_argument(
        "--modes", default="default", help="comma-separated compile modes, e.g. default,max-autotune"
    )
    ap.add_argument("--budget-s", type=float, default=460.0, help="start no task after this many seconds")
    ap.add_argument("--task-timeout-s", type=float, default=300.0, help="one task, every workload and mode")
    ap.add_argument("--fresh-timeout-s", type=float, default=200.0, help="one fresh measurement process")
    ap.add_argument("--compile-timeout-s", type=float, default=600.0, help="the sandbox's compile baseline")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "ksearch-compile-bench"))
    ap.add_argument("--redo", action="store_true", help="measure tasks already complete in --out again")
    ap.add_argument("--cpu", action="store_true", help="plumbing check without a GPU (smoke workloads)")
    ap.add_argument("--table", nargs="+", type=Path, help="print the README table of these result files")
    ap.add_argument("--fresh-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fresh_child:
        try:
            result = _fresh(json.loads(args.fresh_child))
        except Exception as e:  # reported to the parent as data
            result = {"error": f"{type(e).__name__}: {e}"[:2000], "trace": traceback.format_exc()[-2000:]}
        print("\n" + json.dumps(result), flush=True)
        return
    if args.table:
        print(table(args.table))
        return
    unknown = [
        m for m in args.modes.split(",") if m not in ("default", "max-autotune", "max-autotune-no-cudagraphs")
    ]
    if unknown:
        ap.error(f"--modes: unknown {unknown}; accepted: default, max-autotune, max-autotune-no-cudagraphs")
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(measure(args, start_report(args), scratch))
    print(json.dumps(report["summary"], indent=1))
    print(table([Path(args.out)]))


if __name__ == "__main__":
    main()
