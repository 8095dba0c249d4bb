"""Replay the recorded live-host sessions (tests/driver/fixtures/live/*.jsonl: a language model drove
ksearch over MCP on a CPU machine) through the built-in driver on this machine, and write what the final
evaluation measured (every workload, held-out ones included; vs eager and vs torch.compile).

    python bench/live_replay.py --out bench/results/live-replay-h200.json
    python bench/figures.py --write     # the README's table, from that file

On a GPU the loop may take another course than it did on the CPU (timings rank there): the replay serves
each intent the host's own answers in order and declines an intent whose answers run out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "tests" / "driver" / "fixtures" / "live"
TASKS = {
    "l2_normalize": str(ROOT / "bench" / "live_host" / "tasks" / "l2_normalize.py"),
    "rmsnorm": "rmsnorm",
}


def replay(name: str, db: Path, timeout_s: float) -> dict[str, Any]:
    seed = json.loads((LIVE / f"{name}.records.json").read_text())["search"]["seed"]
    cmd = [sys.executable, "-m", "ksearch.server.cli", "run", TASKS[name], "--policy", "replay"]
    cmd += ["--replay", str(LIVE / f"{name}.jsonl"), "--rounds", "2", "--stagnation", "2"]
    cmd += ["--seed", str(seed), "--plain", "--json", "--db", str(db)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT), timeout=timeout_s)
    out: dict[str, Any] = {
        "task": TASKS[name],
        "returncode": p.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    if p.returncode == 0 and "{\n" in p.stdout:
        out["result"] = json.loads(p.stdout[p.stdout.index("{\n") :])
    out["log_tail"] = (p.stdout + p.stderr)[-4000:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", nargs="*", default=sorted(TASKS))
    ap.add_argument("--timeout-s", type=float, default=280)
    a = ap.parse_args()
    if a.out is None:
        ap.error("--out is required to run the replays")
    import torch

    env = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "triton": __import__("triton").__version__,
        "interpreter": os.environ.get("TRITON_INTERPRET", ""),
    }
    runs = {}
    with tempfile.TemporaryDirectory() as d:
        for name in a.only:
            runs[name] = replay(name, Path(d) / f"{name}.db", a.timeout_s)
            print(name, runs[name]["returncode"], runs[name]["wall_s"], flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"env": env, "runs": runs}, indent=1))
    return 0 if all(r["returncode"] == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
