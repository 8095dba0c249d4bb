"""How long a newcomer waits: the README's two commands on a fresh clone of this repository.

    python bench/fresh_clone.py --part tests        # bash scripts/test.sh in a fresh clone
    python bench/fresh_clone.py --part quick        # bash scripts/test.sh -m "not slow" (the quick lane)
    python bench/fresh_clone.py --part quickstart   # bash scripts/quickstart.sh in a fresh clone
    python bench/fresh_clone.py --part tests --venv .venv   # reuse a set-up environment (setup then only checks it)

Each part clones HEAD (`git clone`, so only committed files), runs the command as a user would, and writes
bench/results/fresh-clone-{part}-{machine}.json: the wall time of each stage the command prints or that this
script can separate (setup, mypy, pytest; setup, the search run, what follows it), the test counts pytest
reports, the machine (cores, memory, GPU or none) and whether the environment was built from nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _machine() -> dict[str, Any]:
    gpu = (
        shutil.which("nvidia-smi") is not None
        and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    )
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        m = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        cpu = m.group(1).strip() if m else ""
    return {"cores": os.cpu_count(), "memory_gib": round(mem, 1), "cpu": cpu, "gpu": gpu,
            "python": platform.python_version()}  # fmt: skip


def _clone(dest: Path) -> str:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True, text=True
    ).stdout.strip()


def _stamped(
    cmd: list[str], cwd: Path, env: dict[str, str], log: Path
) -> tuple[int, list[tuple[float, str]]]:
    """Run `cmd`, keeping every output line with the seconds since the start at which it arrived."""
    t0 = time.monotonic()
    lines: list[tuple[float, str]] = []
    with (
        subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as p,
        open(log, "w") as out,
    ):
        assert p.stdout is not None
        for line in p.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
            out.write(line)
    return p.returncode, lines


def _first(lines: list[tuple[float, str]], pattern: str) -> float | None:
    rx = re.compile(pattern)
    return next((t for t, ln in lines if rx.search(ln)), None)


COMMANDS = {
    "tests": ["bash", "scripts/test.sh"],
    "quick": ["bash", "scripts/test.sh", "-m", "not slow"],
    "quickstart": ["bash", "scripts/quickstart.sh"],
}


def tests_part(clone: Path, env: dict[str, str], log: Path, cmd: list[str]) -> dict[str, Any]:
    rc, lines = _stamped(cmd, clone, env, log)
    mypy_done = _first(lines, r"^Success: no issues found|^Found \d+ errors?")
    summary = next((ln for _, ln in reversed(lines) if re.search(r"\d+ passed", ln)), "")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    m = re.search(r"in ([\d.]+)s", summary)
    total = lines[-1][0] if lines else 0.0
    return {
        "rc": rc,
        "total_s": round(total, 1),
        # pytest's own figure is exact whatever the buffering; what came before it is the rest
        "setup_and_mypy_s": round(total - float(m.group(1)), 1) if m else None,
        "mypy_done_at_s": round(mypy_done, 1) if mypy_done is not None else None,
        "pytest_s": float(m.group(1)) if m else None,
        "counts": counts,
        "summary": summary.strip("= "),
        "slowest": [ln.strip() for _, ln in lines if re.match(r"^\s*[\d.]+s (call|setup|teardown)\s", ln)][
            :25
        ],
    }


def quickstart_part(clone: Path, env: dict[str, str], log: Path, cmd: list[str]) -> dict[str, Any]:
    rc, lines = _stamped(cmd, clone, env, log)
    run_start = _first(lines, r"^search \d+ ")  # the driver's first line: the search it runs
    run_end = _first(lines, r"^stopped: ")  # its last: why it stopped, with what it found
    total = lines[-1][0] if lines else 0.0
    return {
        "rc": rc,
        "total_s": round(total, 1),
        "setup_s": round(run_start, 1) if run_start is not None else None,
        "run_s": round(run_end - run_start, 1) if run_start is not None and run_end is not None else None,
        "after_run_s": round(total - run_end, 1) if run_end is not None else None,
        "stopped_line": next((ln for _, ln in lines if ln.startswith("stopped: ")), None),
        "tail": [ln for _, ln in lines[-40:]],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=list(COMMANDS), required=True)
    ap.add_argument(
        "--venv", type=Path, help="reuse this virtual environment (default: the clone builds its own)"
    )
    ap.add_argument("--machine", default="cpu2", help="the machine's name in the results file")
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ksearch-fresh-"))
    clone = work / "ksearch"
    commit = _clone(clone)
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # each line arrives when printed, so its time is right
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KSEARCH_DB", "PYTHONPATH"):
        env.pop(key, None)
    if a.venv is not None:
        env["KSEARCH_VENV"] = str(a.venv.resolve())
    log = RESULTS / "logs" / f"fresh-clone-{a.part}-{a.machine}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    part = quickstart_part if a.part == "quickstart" else tests_part
    res = part(clone, env, log, COMMANDS[a.part])
    out = {
        "part": a.part,
        "command": " ".join(c if " " not in c else repr(c) for c in COMMANDS[a.part]),
        "commit": commit,
        "fresh_venv": a.venv is None,
        "machine": _machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **res,
    }
    path = RESULTS / f"fresh-clone-{a.part}-{a.machine}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("tail", "slowest")}, indent=1))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    if a.venv is not None:
        # setup installed the clone into the reused environment (pip install -e): point it back at this checkout
        py = str(a.venv.resolve() / "bin" / "python")
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)], check=True)
    return 0 if res["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
