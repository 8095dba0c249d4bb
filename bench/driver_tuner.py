"""The offline tuner driving real searches: speedup over the plain seed, over eager, over torch.compile.

Usage (on a GPU machine):  python bench/driver_tuner.py --tasks softmax rmsnorm gemm_fp32 --wall 150 \
                               --db /tmp/tuner.db --out bench/results/driver-tuner-h200.json

Each task runs `ksearch run TASK --policy tuner` in a subprocess (the real CLI, worker pool and store)
with a wall-time budget, then reads the result the driver stored: the seed's measured speedup, the
best attempt's, and the final evaluation (every workload, held-out included, fresh inputs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.worldmodel.store import Store  # noqa: E402


async def _summary(db: Path, search_id: int) -> dict[str, Any]:
    store = await Store.open(db)
    try:
        s = await store.get_search(search_id)
        attempts = await store.list_attempts(s.id)
        root = await store.root(s.id)
        seed = next((a for a in attempts if a.node_id == root.id and a.author == "seed"), None)
        best = await store.best_attempt(s.id)
        result = await store.cache_get(f"driver-result:{s.id}") or {}
        final = (result.get("final") or [None])[0]
        seed_sp = seed.speedup if seed else None
        best_sp = best.speedup if best else None
        timings = best.evaluation.timings if best and best.evaluation else []
        return {
            "task": s.task,
            "search_id": s.id,
            "attempts": len(attempts),
            "ok_attempts": sum(1 for a in attempts if a.evaluation and a.evaluation.status == "ok"),
            "rounds": result.get("rounds_run"),
            "stop_reason": result.get("stop_reason"),
            "seed_speedup_vs_eager": seed_sp,
            "best_speedup_vs_eager": best_sp,
            "best_speedup_over_seed": (best_sp / seed_sp) if best_sp and seed_sp else None,
            "best_speedup_vs_compile": best.evaluation.speedup_vs_compile
            if best and best.evaluation
            else None,
            "best_timings": [t.model_dump() for t in timings],
            "best_source_params": _params(await store.get_candidate(best.candidate_id)) if best else None,
            "final": final,
            "device": timings[0].device if timings else None,
        }
    finally:
        await store.close()


def _params(cand: Any) -> dict[str, Any]:
    from ksearch.gpu.tasks.tunables import read_tunables

    return {k: t.current for k, t in read_tunables(cand.source).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", nargs="+", default=["softmax", "rmsnorm", "gemm_fp32"])
    ap.add_argument("--wall", type=float, default=150.0, help="wall-time budget per task, seconds")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--db", type=Path, default=Path("/tmp/ksearch-tuner.db"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "driver-tuner-h200.json")
    a = ap.parse_args()
    a.db.unlink(missing_ok=True)  # search ids below are 1, 2, 3 in task order
    rows = []
    for i, task in enumerate(a.tasks, start=1):
        t0 = time.monotonic()
        cmd = [
            sys.executable,
            "-m",
            "ksearch.server.cli",
            "run",
            task,
            "--policy",
            "tuner",
            "--new",
            "--rounds",
            str(a.rounds),
            "--wall",
            str(a.wall),
            "--stagnation",
            "3",
            "--max-attempts",
            "4",
            "--plain",
            "--db",
            str(a.db),
        ]
        p = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True)
        wall = time.monotonic() - t0
        print(p.stdout[-3000:], p.stderr[-2000:], flush=True)
        row: dict[str, Any] = {"task": task, "exit_code": p.returncode, "wall_s": round(wall, 1)}
        if p.returncode == 0:
            row |= asyncio.run(_summary(a.db, i))
        else:
            row["error"] = (p.stderr or p.stdout)[-2000:]
        rows.append(row)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps(
                {
                    "what": "tuner policy from each task's plain seed; speedups are medians of CUDA-event timings "
                    "(see each timing's IQR/CI); final = re-evaluation on all workloads incl. held-out",
                    "command": " ".join([sys.executable, *sys.argv]),
                    "host": platform.node(),
                    "python": platform.python_version(),
                    "rows": rows,
                },
                indent=2,
                default=str,
            )
        )
    print(f"{'task':<16}{'attempts':>9}{'seed x':>9}{'best x':>9}{'/seed':>8}{'vs compile':>11}{'wall s':>8}")
    for r in rows:

        def f(x: Any) -> str:
            return f"{x:.3f}" if isinstance(x, float) else str(x)

        print(
            f"{r['task']:<16}{f(r.get('attempts')):>9}{f(r.get('seed_speedup_vs_eager')):>9}"
            f"{f(r.get('best_speedup_vs_eager')):>9}{f(r.get('best_speedup_over_seed')):>8}"
            f"{f(r.get('best_speedup_vs_compile')):>11}{r['wall_s']:>8}"
        )


if __name__ == "__main__":
    main()
