"""What an NVRTC kernel's launch costs on the host, and how much of it a short kernel's timing carries -> JSON.

    python bench/nvrtc_launch.py [--before PATH] [--out bench/results/nvrtc-launch-h200.json]

One short CUDA kernel (y = 2x over 2^20 floats, a few µs) launched through each launcher: ksearch.gpu.nvrtc
(what a candidate calls), the standalone copy written into exported files, CuPy's own RawKernel call, and, with
--before, an earlier ksearch nvrtc.py loaded from a file. For each: `host_us`, issuing one launch (the mean of
2000 back-to-back launches, median of 5 repeats, no synchronize between them), and `idle_us`, one call between
CUDA events started on an idle GPU (a synchronize before each; median of 300), which is how a call timed alone
reads: the kernel's own time plus the launch's host path. `kernel_us` is the kernel's device time from the
profiler (CUPTI), so `idle_us - kernel_us` is the gap a short kernel's timing carries.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SRC = r"""
extern "C" __global__ void scale2(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
N = 1 << 20


def host_us(call: Callable[[], None], sync: Callable[[], None]) -> float:
    reps = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        for _ in range(2000):
            call()
        reps.append((time.perf_counter() - t0) / 2000 * 1e6)
        sync()
    return round(statistics.median(reps), 2)


def idle_us(call: Callable[[], None]) -> float:
    import torch

    spans = []
    for _ in range(300):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        torch.cuda.synchronize()
        spans.append(a.elapsed_time(b) * 1000)
    return round(statistics.median(spans), 2)


def kernel_us(call: Callable[[], None]) -> float | None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50):
            call()
        torch.cuda.synchronize()
    times = [e.device_time for e in prof.events() if "scale2" in e.name and e.device_time > 0]
    return round(statistics.median(times), 2) if times else None


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="an earlier gpu/nvrtc.py, measured beside the current one")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "nvrtc-launch-h200.json")
    a = ap.parse_args(argv)
    import cupy
    import torch

    from ksearch.gpu import nvrtc
    from ksearch.gpu.export.nvrtc import _ksearch_nvrtc

    x = torch.randn(N, device="cuda")
    y = torch.empty_like(x)
    grid, block = ((N + 255) // 256,), (256,)
    launchers: dict[str, Callable[[], None]] = {}
    k = nvrtc.compile(SRC, "scale2")
    launchers["ksearch.gpu.nvrtc"] = lambda: k.launch(grid, block, [x, y, N])
    ks = _ksearch_nvrtc().compile(SRC, "scale2")
    launchers["standalone (exported files)"] = lambda: ks.launch(grid, block, [x, y, N])
    if a.before and a.before.exists():
        old = load(a.before, "nvrtc_before")
        ko = old.compile(SRC, "scale2")
        launchers["before"] = lambda: ko.launch(grid, block, [x, y, N])
    raw = cupy.RawKernel(SRC, "scale2")
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    n32 = cupy.int32(N)
    launchers["cupy RawKernel call"] = lambda: raw(
        grid, block, (x.data_ptr(), y.data_ptr(), n32), stream=stream
    )
    out: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "launchers": {},
    }
    for name, call in launchers.items():
        for _ in range(100):
            call()
        torch.cuda.synchronize()
        assert torch.equal(y, 2 * x), name
        row = {
            "host_us": host_us(call, torch.cuda.synchronize),
            "idle_us": idle_us(call),
            "kernel_us": kernel_us(call),
        }
        if row["kernel_us"] is not None:
            row["gap_us"] = round(row["idle_us"] - row["kernel_us"], 2)
        out["launchers"][name] = row
        print(name, json.dumps(row), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
