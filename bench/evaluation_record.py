"""One ksearch evaluation as the side-by-side scripts record it (bench/*_side_by_side.py): the verdict, each
workload's timing in the protocol's statistic and its noise, the checks, and the seconds it took."""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def evaluate_record(
    sb: Any,
    task: Any,
    candidate: Any,
    settings: Any,
    timeout_s: float,
    *,
    per_key: str = "per_shape",
    **extra: Any,
) -> dict[str, Any]:
    """Evaluate `candidate` in the sandbox `sb` and return its record (`extra` fields added at the top);
    {"error": ...} when it outlasts `timeout_s`."""
    t0 = time.perf_counter()
    try:
        ev = await asyncio.wait_for(sb.evaluate(candidate, task, settings), timeout_s)
    except TimeoutError:
        return {"error": f"timed out after {timeout_s:.0f} s", "seconds": time.perf_counter() - t0}
    per = {
        t.workload: {
            "mean_us": t.mean_us,
            "median_us": t.median_us,
            "statistic": t.statistic,
            "protocol": t.protocol,
            "ci_us": [t.ci_low_us, t.ci_high_us],
            "n": t.n,
            "host_median_us": t.host_median_us,
            "eager_us": t.eager_us,
            "eager_median_us": t.eager_us,  # the name gpumode-trimul-h200.json has always used
            "flags": t.flags,
        }
        for t in ev.timings
    }
    return {
        "status": ev.status,
        "error": ev.error,
        "flags": ev.flags,
        "pure_pytorch": ev.pure_pytorch,
        **extra,
        "correctness": [
            {
                "workload": c.workload,
                "passed": c.passed,
                "kind": c.kind,
                "max_abs_err": c.max_abs_err,
                "message": (c.message or "")[:300],
            }
            for c in ev.correctness
        ],
        per_key: per,
        "seconds_by_step": ev.seconds_by_step,
        "env": ev.env.model_dump() if ev.env else None,
        "seconds": time.perf_counter() - t0,
    }
