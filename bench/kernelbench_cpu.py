"""`ksearch task show FILE --check` over every .py in a folder tree, as a CPU dev machine runs it: each file
in its own process tree under a virtual-memory limit (`ulimit -v`), on 2 cores, with a wall-clock limit.
Writes a table: file, ok, seconds, peak RSS of the process tree, error (and its cause).

    python bench/kernelbench_cpu.py .ext/kb/KernelBench --levels level1,level2,level3 \\
        --out bench/results/kernelbench-cpu.json

Derived facts (the smoke workload's sizes) are cached per file content; by default every run starts from
an empty cache, so the seconds include deriving them, as a first `task show` on a new machine does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]
MEM_KB = 8_000_000  # `ulimit -v 8000000`
TIMEOUT_S = 30.0
CORES = 2


class Row(BaseModel):
    file: str
    ok: bool
    seconds: float
    peak_rss_mb: float | None = Field(
        None,
        description="Largest resident set of the file's process tree (of a timed-out one: of the processes "
        "reaped before the kill)",
    )
    error: str | None = None
    cause: str | None = Field(None, description="timeout | memory | load | reference | crash | other")


class Limits(BaseModel):
    virtual_memory_kb: int
    timeout_s: float
    cores: list[int]
    facts_cache: str


class Report(BaseModel):
    command: str
    machine: dict[str, str | int | None]
    limits: Limits
    folder: str
    files: int
    sampled: str | None = None
    passed: int
    failed_by_cause: dict[str, int]
    seconds_total: float
    seconds_max: float
    peak_rss_mb_max: float | None
    rows: list[Row]


def _cores(n: int) -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:n]


def _limit(mem_kb: int, cores: list[int]) -> None:
    """In the child before exec: what `ulimit -v` and `taskset` would set (inherited by its subprocesses)."""
    resource.setrlimit(resource.RLIMIT_AS, (mem_kb * 1024, mem_kb * 1024))
    os.sched_setaffinity(0, cores)


def _cause(error: str, returncode: int | None) -> str:
    low = error.lower()
    if any(
        m in low
        for m in ("can't allocate memory", "memoryerror", "bad_alloc", "out of memory", "cannot allocate")
    ):
        return "memory"
    if returncode is not None and returncode < 0:
        return "crash"
    if returncode == 2:  # `fail`: the task did not load
        return "load"
    return "reference" if error else "other"


def check_one(path: Path, env: dict[str, str], mem_kb: int, cores: list[int], timeout_s: float) -> Row:
    cmd = [sys.executable, "-m", "server.cli", "task", "show", str(path), "--check", "--json"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            cwd=str(ROOT),
            env=env,
            start_new_session=True,  # its own process group: a timeout ends the whole tree
            preexec_fn=lambda: _limit(mem_kb, cores),
        )
        status, usage, timed_out = None, None, False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout_s:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    # ru_maxrss (KiB on Linux) covers the child and every descendant it waited for
    rss = round(usage.ru_maxrss / 1024, 1) if usage is not None else None
    rel = str(path)
    if timed_out:
        return Row(
            file=rel,
            ok=False,
            seconds=seconds,
            peak_rss_mb=rss,
            error=f"over {timeout_s:.0f} s",
            cause="timeout",
        )
    error: str | None = None
    ok = False
    try:
        data = json.loads(stdout[stdout.index("{") :]) if "{" in stdout else None
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("check"), dict):
        ok = bool(data["check"].get("ok")) and proc.returncode == 0
        error = None if ok else str(data["check"].get("error") or f"exit code {proc.returncode}")
    else:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        error = " ".join(tail[-3:])[-600:] if tail else f"exit code {proc.returncode}, no output"
    return Row(
        file=rel,
        ok=ok,
        seconds=seconds,
        peak_rss_mb=rss,
        error=error[:600] if error else None,
        cause=None if ok else _cause(error or "", proc.returncode),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument(
        "--levels", default="", help="only these subfolders, comma-separated (e.g. level1,level2)"
    )
    ap.add_argument("--sample", type=int, default=0, help="check a random sample of this many files")
    ap.add_argument("--seed", type=int, default=0, help="of the sample")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per file")
    ap.add_argument("--mem-kb", type=int, default=MEM_KB, help="virtual memory limit (as ulimit -v)")
    ap.add_argument("--cores", type=int, default=CORES)
    ap.add_argument("--warm", action="store_true", help="reuse the facts cache instead of a fresh one")
    args = ap.parse_args(argv)

    roots = [args.folder / lv for lv in args.levels.split(",") if lv] or [args.folder]
    files = sorted(p for r in roots for p in r.rglob("*.py") if p.is_file())
    if not files:
        ap.error(f"no .py files under {', '.join(map(str, roots))}")
    sampled = None
    if args.sample and args.sample < len(files):
        sampled = f"{args.sample} of {len(files)} files, random.Random({args.seed}).sample"
        files = sorted(random.Random(args.seed).sample(files, args.sample))
    cores = _cores(args.cores)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    load_at_start = f"{os.getloadavg()[0]:.2f}"  # other work on the machine slows every row
    with tempfile.TemporaryDirectory(prefix="ksearch-facts-") as fresh:
        if not args.warm:
            env["KSEARCH_FACTS_CACHE"] = fresh
        rows = []
        for i, f in enumerate(files, 1):
            row = check_one(f, env, args.mem_kb, cores, args.timeout)
            try:
                row.file = str(f.relative_to(args.folder))
            except ValueError:
                row.file = str(f)
            rows.append(row)
            mark = "ok " if row.ok else f"FAIL ({row.cause})"
            print(
                f"[{i}/{len(files)}] {mark} {row.seconds:5.1f}s {row.peak_rss_mb or 0:7.0f} MB  {row.file}",
                flush=True,
            )
    failed = Counter(r.cause or "other" for r in rows if not r.ok)
    report = Report(
        command=" ".join(
            ["python", "bench/kernelbench_cpu.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        machine={
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_1m_at_start": load_at_start,
            "load_avg_1m_at_end": f"{os.getloadavg()[0]:.2f}",
        },
        limits=Limits(
            virtual_memory_kb=args.mem_kb,
            timeout_s=args.timeout,
            cores=cores,
            facts_cache="warm (reused)" if args.warm else "fresh per run",
        ),
        folder=str(args.folder),
        files=len(rows),
        sampled=sampled,
        passed=sum(r.ok for r in rows),
        failed_by_cause=dict(failed.most_common()),
        seconds_total=round(sum(r.seconds for r in rows), 1),
        seconds_max=round(max(r.seconds for r in rows), 1),
        peak_rss_mb_max=max((r.peak_rss_mb for r in rows if r.peak_rss_mb is not None), default=None),
        rows=rows,
    )
    for r in report.rows:
        r.seconds = round(r.seconds, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report.model_dump_json(indent=1) + "\n")
    print(f"{report.passed} of {report.files} passed; failures by cause: {report.failed_by_cause or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
