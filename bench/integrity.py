"""Run every adversarial case and record whether the evaluator caught it.

    python bench/integrity.py --out bench/results/integrity-h200.json

Uses the GPU when one is visible, otherwise the Triton CPU interpreter (GPU-only cases are then
listed as skipped, never as caught). Writes a JSON list of {case, caught, status, reason, caught_by}: `status`
is the evaluation's status ("skipped" when the case could not run here), `reason` what the
evaluator said. The cases and the rule for "caught" are those of tests/adversarial.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _save(out: Path, rows: list[dict[str, Any]]) -> None:
    out.write_text(json.dumps(rows, indent=1) + "\n")


async def run_all(out: Path, only: list[str]) -> list[dict[str, Any]]:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "adversarial")]
    gpu = _has_cuda()
    if not gpu:  # before triton is imported anywhere: kernels then run under the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from adversarial_cases import CASES, verdict

    from ksearch.gpu.sandbox.local import LocalSandbox

    unknown = sorted(set(only) - {c.name for c in CASES})
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(c.name for c in CASES)}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ksearch-integrity-") as scratch:
        sb = LocalSandbox(scratch_dir=scratch, call_timeout_s=120.0)
        try:
            for case in CASES:
                if only and case.name not in only:
                    continue
                row: dict[str, Any] = {"case": case.name, "cheat": case.cheat, "task": case.task}
                t0 = time.perf_counter()
                if case.gpu_only and not gpu:
                    row |= {"caught": None, "status": "skipped", "reason": "needs a CUDA GPU"}
                else:
                    ev = await sb.evaluate(
                        case.candidate(), case.load_task(), case.settings(), timing=case.timing
                    )
                    caught, reason = verdict(case, ev)
                    row |= {"caught": caught, "status": ev.status, "reason": reason}
                    # which check of the output's values failed it, where one did (poison, tolerance, ...)
                    row["caught_by"] = next((c.caught_by for c in ev.correctness if not c.passed), None)
                row["device"] = "gpu" if gpu else "cpu-interpreter"
                row["seconds"] = round(time.perf_counter() - t0, 2)
                rows.append(row)
                print(f"{case.name:32s} {row['status']:10s} caught={row['caught']}", flush=True)
                _save(out, rows)  # a crash loses only what remains
        finally:
            await sb.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON list")
    ap.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = asyncio.run(run_all(args.out, args.case))
    missed = [r["case"] for r in rows if r["caught"] is False]
    print(f"{len(rows)} cases, {len(missed)} got through" + (f": {', '.join(missed)}" if missed else ""))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
