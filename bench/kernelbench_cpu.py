"""`ksearch task show FILE --check` over every .py in a folder tree, as a CPU dev machine runs it: each file
in its own process tree under a virtual-memory limit (`ulimit -v`), on 2 cores, with a wall-clock limit.
Writes a table: file, ok, seconds, peak RSS of the process tree, error (and its cause).

    python bench/kernelbench_cpu.py .ext/kb/KernelBench --levels level1,level2,level3 \\
        --out bench/results/kernelbench-cpu.json

Derived facts (the smoke workload's sizes) are cached per file content; by default every run starts from
an empty cache, so the seconds include deriving them, as a first `task show` on a new machine does.

    python bench/kernelbench_cpu.py .ext/kb/KernelBench --levels level1,level2,level3 \\
        --redo bench/results/kernelbench-cpu.json --out bench/results/kernelbench-cpu.json

checks again only the files an earlier result did not pass, under the same limits, and writes that result
with those rows replaced: `runs` lists every command the rows come from, and each row names its run.
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
    run: int = Field(0, description="index in the report's `runs` of the command that checked this file")


class Limits(BaseModel):
    virtual_memory_kb: int
    timeout_s: float
    cores: list[int]
    facts_cache: str


Machine = dict[str, str | int | None]


class Run(BaseModel):
    """One command whose rows a report holds."""

    command: str
    machine: Machine
    checked: int  # files it checked


class Report(BaseModel):
    command: str  # the command that wrote this file (with --redo: the last of `runs`)
    machine: Machine
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
    runs: list[Run] = Field(default_factory=list)  # empty in a file written before --redo existed: `command`


def build_report(
    rows: list[Row], runs: list[Run], limits: Limits, folder: str, sampled: str | None
) -> Report:
    """The totals over `rows`; the last of `runs` is the command writing it."""
    failed = Counter(r.cause or "other" for r in rows if not r.ok)
    for r in rows:
        r.seconds = round(r.seconds, 2)
    return Report(
        command=runs[-1].command,
        machine=runs[-1].machine,
        limits=limits,
        folder=folder,
        files=len(rows),
        sampled=sampled,
        passed=sum(r.ok for r in rows),
        failed_by_cause=dict(failed.most_common()),
        seconds_total=round(sum(r.seconds for r in rows), 1),
        seconds_max=round(max(r.seconds for r in rows), 1),
        peak_rss_mb_max=max((r.peak_rss_mb for r in rows if r.peak_rss_mb is not None), default=None),
        rows=rows,
        runs=runs,
    )


def to_redo(earlier: Report) -> list[str]:
    """The files (relative to the folder) an earlier result did not pass, in its order."""
    return [r.file for r in earlier.rows if not r.ok]


def merged(earlier: Report, redone: list[Row], run: Run) -> Report:
    """`earlier` with the rows of the files checked again replaced by `redone`, and `run` added to its runs.

    Rows keep the earlier order; a passed row is kept as it was, with the run that checked it."""
    runs = list(earlier.runs) or [
        Run(command=earlier.command, machine=earlier.machine, checked=earlier.files)
    ]
    index = len(runs)
    fresh = {r.file: r.model_copy(update={"run": index}) for r in redone}
    unknown = sorted(set(fresh) - {r.file for r in earlier.rows})
    if unknown:
        raise ValueError(f"rows for files the earlier result does not have: {', '.join(unknown)}")
    rows = [fresh.get(r.file, r) for r in earlier.rows]
    return build_report(rows, [*runs, run], earlier.limits, earlier.folder, earlier.sampled)


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
    cmd = [sys.executable, "-m", "ksearch.server.cli", "task", "show", str(path), "--check", "--json"]
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


def _machine(load_at_start: str) -> Machine:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_1m_at_start": load_at_start,
        "load_avg_1m_at_end": f"{os.getloadavg()[0]:.2f}",
    }


def check_files(files: list[Path], folder: Path, args: argparse.Namespace, cores: list[int]) -> list[Row]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="ksearch-facts-") as fresh:
        if not args.warm:
            env["KSEARCH_FACTS_CACHE"] = fresh
        for i, f in enumerate(files, 1):
            row = check_one(f, env, args.mem_kb, cores, args.timeout)
            try:
                row.file = str(f.relative_to(folder))
            except ValueError:
                row.file = str(f)
            rows.append(row)
            mark = "ok " if row.ok else f"FAIL ({row.cause})"
            print(
                f"[{i}/{len(files)}] {mark} {row.seconds:5.1f}s {row.peak_rss_mb or 0:7.0f} MB  {row.file}",
                flush=True,
            )
    return rows


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
    ap.add_argument(
        "--redo",
        type=Path,
        metavar="FAILED_FROM.json",
        help="check again only the files this earlier result did not pass (those under --levels, if "
        "given) and write it with their rows replaced",
    )
    args = ap.parse_args(argv)
    command = " ".join(["python", "bench/kernelbench_cpu.py", *(argv if argv is not None else sys.argv[1:])])
    cores = _cores(args.cores)
    limits = Limits(
        virtual_memory_kb=args.mem_kb,
        timeout_s=args.timeout,
        cores=cores,
        facts_cache="warm (reused)" if args.warm else "fresh per run",
    )
    levels = [lv for lv in args.levels.split(",") if lv]
    load_at_start = f"{os.getloadavg()[0]:.2f}"  # other work on the machine slows every row

    if args.redo is not None:
        if args.sample:
            ap.error("--redo checks the earlier result's failed files: --sample does not apply")
        earlier = Report.model_validate_json(args.redo.read_text())
        same = earlier.limits.model_dump(exclude={"cores"}) == limits.model_dump(exclude={"cores"})
        if not same or len(earlier.limits.cores) != len(cores):
            ap.error(
                f"--redo: {args.redo} was checked under other limits ({earlier.limits.model_dump()}); "
                "pass the same --timeout, --mem-kb, --cores and --warm"
            )
        if Path(earlier.folder).resolve() != args.folder.resolve():
            ap.error(f"--redo: {args.redo} checked {earlier.folder}, not {args.folder}")
        names = [n for n in to_redo(earlier) if not levels or Path(n).parts[0] in levels]
        missing = [n for n in names if not (args.folder / n).is_file()]
        if missing:
            ap.error(f"--redo: no longer in {args.folder}: {', '.join(missing)}")
        rows = check_files([args.folder / n for n in names], args.folder, args, cores)
        run = Run(command=command, machine=_machine(load_at_start), checked=len(rows))
        report = merged(earlier, rows, run)
    else:
        roots = [args.folder / lv for lv in levels] or [args.folder]
        files = sorted(p for r in roots for p in r.rglob("*.py") if p.is_file())
        if not files:
            ap.error(f"no .py files under {', '.join(map(str, roots))}")
        sampled = None
        if args.sample and args.sample < len(files):
            sampled = f"{args.sample} of {len(files)} files, random.Random({args.seed}).sample"
            files = sorted(random.Random(args.seed).sample(files, args.sample))
        rows = check_files(files, args.folder, args, cores)
        run = Run(command=command, machine=_machine(load_at_start), checked=len(rows))
        report = build_report(rows, [run], limits, str(args.folder), sampled)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report.model_dump_json(indent=1) + "\n")
    print(f"{report.passed} of {report.files} passed; failures by cause: {report.failed_by_cause or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
