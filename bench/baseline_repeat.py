"""The eager and torch.compile baselines of several tasks, each measured in several fresh processes: how far one
process's reading is from another's.

    python bench/baseline_repeat.py [--tasks conv2d,gemm_bf16,...] [--processes 3] [--budget-s 500] [--out FILE]
    python bench/baseline_repeat.py --smoke [--tasks softmax] [--processes 2]      # CPU: eager only, smoke workload

Every reading is a new Python process with a new sandbox over its own empty scratch folder (its compiler caches,
its baseline cache and its database: nothing carries over from the process before), which asks for the baselines
as a search does: `ksearch.create_search` on the task, then `LocalSandbox.reference_times` with the search's
baseline settings (its search workloads, compile mode and timing protocol), the numbers every speedup divides by.
The processes run one at a time, round by round (every task once, then every task again...), so a drift of the
machine over the run shows in every task alike. Around each process `nvidia-smi` reads the SM and memory clocks,
the temperature and the power.

Per task and workload: each process's eager and torch.compile reading (us, the protocol's statistic) and their
spread, (max - min) / median over the processes, flagged past 3%. Without a GPU the sandbox measures no baselines
for a search (`reference_times` is empty there), so `--smoke` reads the eager baseline the evaluation of the
task's reference, as a candidate, is given on the smoke workload (the compile baseline only with --compile: inductor
on the CPU takes tens of seconds). The JSON is rewritten after every process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # bench/, the script's own folder
from pydantic import BaseModel, Field

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ksearch.gpu.jail.smi import query_gpus  # noqa: E402  (standard library only)

FIXTURES = HERE / "host_flow_tasks"
DEFAULT_TASKS = ",".join(
    [
        "conv2d",
        "gemm_bf16",
        "cross_entropy",
        "layernorm",
        str(FIXTURES / "conv_transpose2d_bf16.py"),
        str(FIXTURES / "gemm_bf16.py"),
    ]
)
SMOKE_TASKS = f"softmax,{FIXTURES / 'cross_entropy.py'}"
SPREAD_FLAG = 0.03
SMI_FIELDS = "uuid,clocks.sm,clocks.mem,temperature.gpu,power.draw"


class SmiRow(BaseModel):
    uuid: str
    clocks_sm_mhz: str
    clocks_mem_mhz: str
    temperature_c: str
    power_w: str


class ProcessReading(BaseModel):
    round: int
    ok: bool
    seconds: float
    error: str = ""
    times_us: dict[str, dict[str, float | None]] = Field(
        default_factory=dict, description="workload -> {eager, compile}: us, the protocol's statistic"
    )
    protocol: str | None = None
    compile_mode: str | None = None
    env: dict[str, Any] = Field(
        default_factory=dict, description="the sandbox's hardware facts, as results carry"
    )
    smi_before: list[SmiRow] = Field(default_factory=list)
    smi_after: list[SmiRow] = Field(default_factory=list)
    how: str = ""


class Spread(BaseModel):
    n: int
    median_us: float
    min_us: float
    max_us: float
    spread: float = Field(description="(max - min) / median")
    flagged: bool = Field(description=f"spread > {SPREAD_FLAG:.0%}")


class TaskResult(BaseModel):
    task: str
    processes: list[ProcessReading] = Field(default_factory=list)
    spread: dict[str, dict[str, Spread]] = Field(
        default_factory=dict, description="workload -> kind (eager, compile) -> the spread over the processes"
    )
    worst_spread: float | None = None
    flagged: list[str] = Field(default_factory=list, description="'workload kind' pairs past the flag")


class Report(BaseModel):
    what: str = (
        "eager and torch.compile baselines per task and workload, each read in several fresh processes (a new "
        "sandbox over an empty scratch folder each), and their spread between processes"
    )
    command: list[str]
    started: str
    finished: str | None = None
    commit: str | None
    machine: dict[str, Any]
    smoke: bool
    processes_per_task: int
    spread_flag: float = SPREAD_FLAG
    tasks: list[TaskResult] = Field(default_factory=list)
    not_run: list[str] = Field(default_factory=list)
    wall_s: float | None = None


def smi() -> list[SmiRow]:
    return [
        SmiRow(uuid=r[0], clocks_sm_mhz=r[1], clocks_mem_mhz=r[2], temperature_c=r[3], power_w=r[4])
        for r in query_gpus(SMI_FIELDS)
        if len(r) >= 5
    ]


def spread_of(values: list[float]) -> Spread:
    med = statistics.median(values)
    sp = (max(values) - min(values)) / med if med > 0 else 0.0
    return Spread(
        n=len(values),
        median_us=med,
        min_us=min(values),
        max_us=max(values),
        spread=sp,
        flagged=sp > SPREAD_FLAG,
    )


def summarize(t: TaskResult) -> None:
    t.spread, t.flagged = {}, []
    readings = [p for p in t.processes if p.ok]
    workloads = sorted({w for p in readings for w in p.times_us})
    for wl in workloads:
        for kind in ("eager", "compile"):
            vals = [v for p in readings if (v := p.times_us.get(wl, {}).get(kind)) is not None]
            if len(vals) < 2:
                continue
            s = t.spread.setdefault(wl, {})[kind] = spread_of(vals)
            if s.flagged:
                t.flagged.append(f"{wl} {kind}")
    spreads = [s.spread for per in t.spread.values() for s in per.values()]
    t.worst_spread = max(spreads) if spreads else None


# --------------------------------------------------------------------------------------------- the child


async def child(task_ref: str, scratch: Path, smoke: bool, compile_baseline: bool) -> dict[str, Any]:
    """In a fresh process: a new sandbox over `scratch`, the baselines asked for as a search asks for them."""
    import ksearch
    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.tools.common import baseline_settings

    sb = LocalSandbox(
        scratch_dir=scratch / "sandbox",
        compile_baseline=compile_baseline if smoke else None,  # on a GPU: the sandbox's own default (on)
        call_timeout_s=300.0,
    )
    ws = await ksearch.Workspace.open(scratch / "k.db", sandbox=sb)
    try:
        s = await ksearch.create_search(ws, ksearch.CreateSearchIn(task=task_ref, name="baselines"))
        task = ws.search_task(s)
        settings = baseline_settings(task, s)
        out: dict[str, Any] = {
            "protocol": settings.timing_protocol,
            "compile_mode": settings.compile_mode,
        }
        if not smoke:
            times = await sb.reference_times(task, settings)
            out["times_us"] = times or {}
            out["how"] = "LocalSandbox.reference_times with the search's baseline settings"
        else:
            # no GPU: reference_times is empty; the baselines an evaluation is given are read instead, with the
            # reference itself as the candidate (cheap in the interpreter: it launches no Triton kernel)
            src = task.source_path.read_text() if task.source_path else ""
            cand = ksearch.Candidate.of(src + "\n\nclass ModelNew(Model):\n    pass\n", "triton")
            wl = next(w.name for w in task.workloads if w.split == "smoke")
            ev = await sb.evaluate(cand, task, settings.model_copy(update={"workloads": [wl]}))
            if ev.status != "ok":
                raise RuntimeError(f"the reference as a candidate: {ev.status}: {(ev.error or '')[:500]}")
            out["times_us"] = {t.workload: {"eager": t.eager_us, "compile": t.compile_us} for t in ev.timings}
            out["how"] = "the baselines of an evaluation (the reference as a candidate) on the smoke workload"
        out["env"] = (await sb.hardware()).model_dump(mode="json")
        return out
    finally:
        await ws.close()


def run_child(task: str, smoke: bool, compile_baseline: bool, timeout_s: float, r: int) -> ProcessReading:
    scratch = Path(tempfile.mkdtemp(prefix="baseline-repeat-"))
    result = scratch / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", task, "--scratch", str(scratch)]
    cmd += (
        ["--child-out", str(result)]
        + (["--smoke"] if smoke else [])
        + (["--compile"] if compile_baseline else [])
    )
    before = smi()
    t0 = time.monotonic()
    err = ""
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            # this checkout first, then whatever the caller's path held (the GPU machine's carried wheels)
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            },
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if proc.returncode != 0:
            err = f"rc {proc.returncode}: {(proc.stdout + proc.stderr)[-1500:]}"
    except subprocess.TimeoutExpired:
        err = f"no answer within {timeout_s:.0f} s: killed"
    took = time.monotonic() - t0
    after = smi()
    reading = ProcessReading(round=r, ok=False, seconds=round(took, 2), smi_before=before, smi_after=after)
    if not err and result.is_file():
        got = json.loads(result.read_text())
        reading = reading.model_copy(
            update={
                "ok": True,
                "times_us": got["times_us"],
                "protocol": got.get("protocol"),
                "compile_mode": got.get("compile_mode"),
                "env": got.get("env") or {},
                "how": got.get("how", ""),
            }
        )
    else:
        reading.error = err or "the process wrote no result"
    shutil.rmtree(scratch, ignore_errors=True)  # the next process starts from nothing: nothing to keep
    return reading


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=None, help="built-in names or task file paths, comma-separated")
    ap.add_argument(
        "--processes", type=int, default=None, help="fresh processes per task (default 3; smoke 2)"
    )
    ap.add_argument("--budget-s", type=float, default=500.0, help="no process starts past this many seconds")
    ap.add_argument("--process-timeout-s", type=float, default=None, help="one process's cap (240; smoke 90)")
    ap.add_argument("--smoke", action="store_true", help="CPU: the eager baseline of an evaluation on smoke")
    ap.add_argument(
        "--compile", action="store_true", help="with --smoke: the torch.compile baseline too (slow)"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="default bench/results/baseline-repeat-<machine>.json"
    )
    ap.add_argument("--machine", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        got = asyncio.run(child(a.child, a.scratch, a.smoke, a.compile))
        a.child_out.write_text(json.dumps(got))
        return 0

    gpus = query_gpus("name,uuid,driver_version")
    smoke = a.smoke or not gpus or bool(os.environ.get("KSEARCH_CPU_MODE"))
    tasks = [t for t in (a.tasks or (SMOKE_TASKS if smoke else DEFAULT_TASKS)).split(",") if t]
    n_proc = a.processes or (2 if smoke else 3)
    timeout_s = a.process_timeout_s or (90.0 if smoke else 240.0)
    machine = a.machine or (
        f"cpu{os.cpu_count()}"
        if smoke
        else ("h200" if "H200" in gpus[0][0] else gpus[0][0].replace(" ", "-").lower())
    )
    out = a.out or ROOT / "bench" / "results" / f"baseline-repeat-{machine}.json"
    report = Report(
        command=[sys.executable, *sys.argv],
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        commit=provenance.commit(),
        machine={
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "gpus": [{"name": g[0], "uuid": g[1], "driver": g[2]} for g in gpus if len(g) >= 3],
        },
        smoke=smoke,
        processes_per_task=n_proc,
        tasks=[TaskResult(task=t) for t in tasks],
    )
    t0 = time.monotonic()

    def save() -> None:
        report.wall_s = round(time.monotonic() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report.model_dump_json(indent=1) + "\n")

    longest = 0.0
    for r in range(1, n_proc + 1):
        for t in report.tasks:
            left = a.budget_s - (time.monotonic() - t0)
            # a process is not started where the longest one so far would not fit (none at all past the budget)
            if left <= 0 or left < longest:
                report.not_run.append(f"{t.task} (process {r}): --budget-s left {max(0.0, left):.0f} s")
                continue
            reading = run_child(t.task, smoke, a.compile, min(timeout_s, max(left, 10.0)), r)
            longest = max(longest, reading.seconds)
            t.processes.append(reading)
            summarize(t)
            save()
            eager = {w: v.get("eager") for w, v in reading.times_us.items()}
            print(
                f"{t.task} process {r}: {'ok' if reading.ok else reading.error[:200]} in {reading.seconds:.1f} s "
                f"eager {eager}",
                flush=True,
            )
    report.finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    save()
    for t in report.tasks:
        worst = f"{t.worst_spread:.2%}" if t.worst_spread is not None else "n/a"
        print(f"{t.task}: {len(t.processes)} processes, worst spread {worst}, flagged {t.flagged or 'none'}")
    print(f"-> {out}")
    return 0 if all(p.ok for t in report.tasks for p in t.processes) else 1


if __name__ == "__main__":
    sys.exit(main())
