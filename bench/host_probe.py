"""The host's cost of issuing GPU work in this process, printed as one JSON line (bench/host_overhead.py runs it in
several kinds of process: plain, in Linux namespaces, in ksearch's jail).

Measures, each after a warm-up, with no synchronize inside the timed loops:
- torch_op_issue_us: host microseconds to issue one `x.add_(1)` on a one-element CUDA tensor (2000 of them);
- triton_issue_us: the same for one launch of a one-program Triton kernel;
- event_record_us: one CUDA event record;
- fib_events_us: the median of FlashInfer-Bench's events loop without CUPTI (per call: `buffer.zero_()` of twice
  the L2, a start event, the side by side's one-launch rmsnorm (bench/side_by_side/flashinfer/kernels/) on 8 x 4096 bf16 rows, an end event; one synchronize after 50),
  which reads the kernel's own time only while the host issues faster than the GPU flushes;
- the same four again after one `torch.profiler` session in the process (`after_profiler`), since ksearch's
  worker profiles every candidate once (its kernel audit) before timing it.
Standalone on purpose (torch and Triton only): it must run where ksearch is not importable.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

# the one-launch rmsnorm of the FlashInfer-Bench side by side, loaded from its file (no ksearch import needed)
RMSNORM = (
    Path(__file__).resolve().parent / "side_by_side" / "flashinfer" / "kernels" / "rmsnorm_h4096_rows.py"
)


def _rmsnorm_run():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("rmsnorm_h4096_rows", RMSNORM)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.run


@triton.jit
def _bump(p):
    tl.store(p, tl.load(p) + 1)


def issue_us(fn, n: int = 2000) -> float:  # type: ignore[no-untyped-def]
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / n * 1e6


def fib_events_us(iters: int = 50) -> float:
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    buf = torch.empty(((2 * l2) // (1 << 20)) << 20, dtype=torch.int8, device="cuda")
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)

    rmsnorm = _rmsnorm_run()

    def run() -> torch.Tensor:
        return rmsnorm(x, w)  # type: ignore[no-any-return]

    for _ in range(10):
        buf.zero_()
        run()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        buf.zero_()
        starts[i].record()
        run()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000 for s, e in zip(starts, ends, strict=True))


def measure() -> dict[str, float]:
    t = torch.zeros(1, device="cuda")
    ev = torch.cuda.Event(enable_timing=True)
    return {
        "torch_op_issue_us": round(issue_us(lambda: t.add_(1)), 2),
        "triton_issue_us": round(issue_us(lambda: _bump[(1,)](t)), 2),
        "event_record_us": round(issue_us(ev.record), 2),
        "fib_events_us": round(fib_events_us(), 2),
    }


def main() -> None:
    out: dict[str, object] = {
        "pid": os.getpid(),
        "uid": os.getuid(),
        "affinity": len(os.sched_getaffinity(0)),
    }
    if "--mem-fraction" in sys.argv:
        torch.cuda.set_per_process_memory_fraction(0.9)
        out["mem_fraction"] = 0.9
    out["plain"] = measure()
    if "--no-profiler" in sys.argv:  # bench/host_pinning.py: the same measurement again instead
        out["again"] = measure()
        print(json.dumps(out), flush=True)
        return
    from torch.profiler import ProfilerActivity, profile

    t = torch.zeros(1, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]):
        t.add_(1)
        torch.cuda.synchronize()
    out["after_profiler"] = measure()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
