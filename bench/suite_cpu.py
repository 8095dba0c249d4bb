"""Where the test suite's CPU goes, by kind of process: the suite is CPU-bound on a 2-core machine, so its wall time
is its CPU time over the cores, and this says which processes to make cheaper.

    python bench/suite_cpu.py                       # bash scripts/test.sh, sampled
    python bench/suite_cpu.py -- -m "not slow"      # arguments after -- go to scripts/test.sh

Every 0.5 s it reads each process's cumulative CPU time (utime + stime from /proc/PID/stat) and its command line,
keeping the last reading per process (pid and start time); processes that live less than half a second are
missed, so the sum is a lower bound. It also reads the machine's busy and idle time (/proc/stat) over the run.
Writes bench/results/suite-cpu-{machine}.json: per kind of process (sandbox worker, CLI command, task-facts
probe, pytest worker, compiler, browser, ...) the CPU seconds, the process count and the mean per process, and
the run's wall time, busy share and test counts; and per test file, the CPU of the processes its tests started
(a process belongs to the test named in the PYTEST_CURRENT_TEST of its nearest ancestor that has one: a test's
subprocesses inherit it, a sandbox worker's scrubbed environment does not but its parent's does). The pytest
workers' own CPU is not split by test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import provenance  # bench/, the script's own folder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TICK = os.sysconf("SC_CLK_TCK")

# (kind, pattern on the command line), first match wins
KINDS: list[tuple[str, str]] = [
    # a process forked from a zygote keeps the zygote's command line (the zygote itself counts here too)
    ("task-facts probe", r"-m ksearch\.gpu\.jail\.zygote \d+ ksearch\.gpu\.tasks\.rt\.facts\b"),
    ("sandbox worker", r"-m ksearch\.gpu\.(worker|zygote|jail\.zygote)\b"),
    ("jail launcher", r"-m ksearch\.gpu\.jail\b"),
    # the module names since gpu/ was split into rooms (gpu/former_names.py maps the old ones)
    ("task-facts probe", r"-m ksearch\.gpu\.tasks\.rt\.facts\b"),
    ("task check", r"-m ksearch\.gpu\.tasks\.check\b"),
    ("FlashInfer-Bench child", r"-m ksearch\.gpu\.tasks\.flashinfer\.child\b"),
    ("model process", r"-m ksearch\.gpu\.model\b"),
    ("ksearch CLI", r"-m ksearch\.server\.cli\b|/bin/ksearch\b"),
    ("pytest worker", r"exec\(eval\(sys\.stdin|xdist"),
    ("pytest", r"-m pytest\b"),
    ("C++/CUDA compiler", r"\b(cc1plus|g\+\+|c\+\+|ninja|nvcc|cicc|ptxas|ld)\b"),
    ("browser", r"chrom"),
    ("node", r"^\S*node\b"),
    ("ray", r"\bray\b|raylet|gcs_server"),
]


def kind_of(cmd: str) -> str:
    for kind, pat in KINDS:
        if re.search(pat, cmd):
            return kind
    if "python" in cmd:
        return "other python"
    return "other" if cmd.strip() else "unnamed (exited or kernel)"


def _busy_idle() -> tuple[int, int]:
    f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    vals = [int(x) for x in f]
    return sum(vals[:3]) + sum(vals[5:8]), vals[3] + vals[4]


def _current_test(pid: str) -> str | None:
    """The test file named in the process's starting environment (a test's subprocess inherits it)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for e in env:
        if e.startswith(b"PYTEST_CURRENT_TEST="):
            return e.split(b"=", 1)[1].decode(errors="replace").split("::")[0]
    return None


class Sampler:
    def __init__(self) -> None:
        self.seen: dict[str, list[Any]] = {}  # "pid:start" -> [cmd, cpu seconds, parent pid, test or None]
        self.last_key: dict[str, str] = {}  # pid -> "pid:start" of the latest process seen with it
        self.stop = threading.Event()

    def once(self) -> None:
        mine = str(os.getpid())
        for p in os.listdir("/proc"):
            if not p.isdigit() or p == mine:
                continue
            try:
                rest = Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1].split()
                cpu = (int(rest[11]) + int(rest[12])) / TICK
                key = f"{p}:{rest[19]}"
                rec = self.seen.get(key)
                if rec is None:
                    raw = Path(f"/proc/{p}/cmdline").read_bytes()
                    self.seen[key] = [
                        raw.replace(b"\0", b" ").decode(errors="replace")[:300],
                        cpu,
                        rest[1],
                        _current_test(p),
                    ]
                    self.last_key[p] = key
                else:
                    rec[1] = cpu
            except (OSError, IndexError, ValueError):
                continue  # it exited between the listing and the read

    def test_of(self, key: str) -> str | None:
        """The test file of the process or of its nearest ancestor that names one."""
        for _ in range(32):
            rec = self.seen.get(key)
            if rec is None:
                return None
            if rec[3]:
                return str(rec[3])
            parent = self.last_key.get(rec[2])
            if parent is None or parent == key:
                return None
            key = parent
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            self.once()
            self.stop.wait(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("rest", nargs="*", help="arguments for scripts/test.sh (after --)")
    args = ap.parse_args()
    sampler = Sampler()
    sampler.once()
    before = {
        k: v[1] for k, v in sampler.seen.items()
    }  # what processes running already had used is not the suite's
    th = threading.Thread(target=sampler.run, daemon=True)
    th.start()
    b0, i0 = _busy_idle()
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "scripts/test.sh", *args.rest], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    b1, i1 = _busy_idle()
    sampler.stop.set()
    th.join()
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_test: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, (cmd, cpu, _ppid, _test) in sampler.seen.items():
        used = cpu - before.get(key, 0.0)
        if used <= 0:
            continue
        kind = kind_of(cmd)
        b = by[kind]
        b[0] += used
        b[1] += 1
        test = sampler.test_of(key)
        if test is not None and kind not in ("pytest worker", "pytest"):
            by_test[test][kind] += used
    tail = proc.stdout[-3000:]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}
    machine = f"cpu{os.cpu_count()}"
    out = args.out or RESULTS / f"suite-cpu-{machine}.json"
    busy = (b1 - b0) / max(1, (b1 - b0) + (i1 - i0))
    result = {
        "command": " ".join(["bash", "scripts/test.sh", *args.rest]),
        "commit": provenance.commit(),
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "cores": os.cpu_count(),
        "machine_busy_share": round(busy, 3),
        "machine_cpu_s": round((b1 - b0) / TICK, 1),
        "sampled_cpu_s": round(sum(v[0] for v in by.values()), 1),
        "tests": counts,
        "by_kind": {
            k: {"cpu_s": round(v[0], 1), "processes": int(v[1]), "mean_s": round(v[0] / v[1], 2)}
            for k, v in sorted(by.items(), key=lambda kv: -kv[1][0])
        },
        "by_test_file": {
            t: {
                "cpu_s": round(sum(k.values()), 1),
                **{n: round(v, 1) for n, v in sorted(k.items(), key=lambda kv: -kv[1])},
            }
            for t, k in sorted(by_test.items(), key=lambda kv: -sum(kv[1].values()))
        },
        "top_processes": [
            {
                "cpu_s": round(cpu - before.get(key, 0.0), 1),
                "kind": kind_of(cmd),
                "test": sampler.test_of(key),
                "cmd": cmd[:160],
            }
            for key, (cmd, cpu, _p, _t) in sorted(
                sampler.seen.items(), key=lambda kv: -(kv[1][1] - before.get(kv[0], 0.0))
            )[:60]
        ],
        "method": "cumulative utime+stime per process from /proc, sampled every 0.5 s (short-lived processes "
        "missed: a lower bound); machine CPU from /proc/stat over the run",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    for k, v in result["by_kind"].items():
        print(f"{v['cpu_s']:8.1f} s  {v['processes']:5d} processes  {v['mean_s']:6.2f} s each  {k}")
    for t, v in list(result["by_test_file"].items())[:30]:
        print(f"{v['cpu_s']:8.1f} s  {t}")
    print(f"wall {wall:.0f} s, machine busy {100 * busy:.0f}%, {result['machine_cpu_s']:.0f} CPU-s; {counts}")
    print(f"wrote {out}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
