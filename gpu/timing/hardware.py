"""Measure what this GPU can actually do: copy bandwidth and matmul rate per dtype (worker side).

These are the roofline ceilings: measured once per environment and cached by the sandbox. They are
what a well-tuned library reaches here, not datasheet peaks, so a roofline fraction near or above
1.0 means "as fast as cuBLAS / a device copy", and well above 1.0 means something is wrong.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from typing import Any

import torch

from ksearch.gpu.timing.stats import summarize


def environment(device: torch.device) -> dict[str, Any]:
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        facts.update(
            device=p.name,
            cpu_mode=False,
            sm_count=p.multi_processor_count,
            compute_capability=f"{p.major}.{p.minor}",
            memory_gb=round(p.total_memory / 2**30, 1),
            l2_bytes=int(getattr(p, "L2_cache_size", 0)) or None,
            gpu_uuid=gpu_uuid(p),
        )
    else:
        facts.update(device="cpu-interpreter", cpu_mode=True, cuda=None)
    return facts


def gpu_uuid(props: Any) -> str | None:
    """The GPU's UUID as nvidia-smi writes it ("GPU-1a2b…"): which physical GPU measured a number (two H200s of one
    model and driver share an environment key). From torch's device properties where it has them, else from
    nvidia-smi for this process's one visible GPU; None where neither says."""
    got = getattr(props, "uuid", None)
    if got is not None:
        text = str(got)
        return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith(("GPU-", "MIG-")):
        return visible
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                *(["-i", visible] if visible else []),
                "--query-gpu=uuid",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None  # no UUID is no fault: the GPU's name still says which model measured
    return out[0] if len(out) == 1 else None


def _time_ms(fn: Any, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return summarize(times).median


def bandwidths(device: torch.device, nbytes: int = 1 << 30) -> dict[str, float]:
    """Bytes per second the device memory sustains: a copy (read + write counted), a pure read
    (a sum) and a pure write (a fill). A read-only kernel can beat a copy, so the roofline uses the
    best of the three."""
    bufs = [torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0) for _ in range(2)]
    out = torch.empty((), device=device)
    copy_ms = _time_ms(lambda: bufs[1].copy_(bufs[0]), reps=15)
    read_ms = _time_ms(lambda: torch.sum(bufs[0], dim=0, out=out), reps=15)
    write_ms = _time_ms(lambda: bufs[1].fill_(2.0), reps=15)
    bufs.clear()
    return {
        "copy": 2 * nbytes / (copy_ms * 1e-3),
        "read": nbytes / (read_ms * 1e-3),
        "write": nbytes / (write_ms * 1e-3),
    }


def matmul_rates(device: torch.device, n: int = 8192) -> dict[str, float]:
    """FLOP/s of an n^3 matmul per dtype (float32 is true FP32; 'tf32' allows TensorFloat-32)."""
    rates: dict[str, float] = {}
    flops = 2.0 * n**3
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dt in (
            ("float16", torch.float16),
            ("bfloat16", torch.bfloat16),
            ("float32", torch.float32),
            ("tf32", torch.float32),
        ):
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            a = torch.randn(n, n, device=device, dtype=dt)
            b = torch.randn(n, n, device=device, dtype=dt)
            ms = _time_ms(lambda a=a, b=b: torch.mm(a, b), reps=5 if dt == torch.float32 else 10)
            rates[name] = flops / (ms * 1e-3)
            del a, b
        try:
            a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major as required
            one = torch.tensor(1.0, device=device)
            ms = _time_ms(
                lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), reps=10
            )
            rates["float8_e4m3fn"] = flops / (ms * 1e-3)
        except (RuntimeError, AttributeError, TypeError):
            pass  # no FP8 matmul on this GPU / torch: the ceiling is simply not reported
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        torch.cuda.empty_cache()
    return rates


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    t0 = time.perf_counter()
    if device.type != "cuda":
        return {"bandwidth_Bps": None, "copy_bandwidth_Bps": None, "matmul_flops": {}, "seconds": 0.0}
    bw = bandwidths(device)
    rates = matmul_rates(device)
    return {
        "copy_bandwidth_Bps": bw["copy"],
        "read_bandwidth_Bps": bw["read"],
        "write_bandwidth_Bps": bw["write"],
        "bandwidth_Bps": max(bw.values()),
        "matmul_flops": rates,
        "seconds": time.perf_counter() - t0,
    }


def roofline_fraction(
    median_us: float, flops: float, nbytes: float, dtype: str, ceilings: dict[str, Any]
) -> float | None:
    """Attainable time (max of compute and memory time at the measured ceilings) / measured time."""
    bw = ceilings.get("bandwidth_Bps") or ceilings.get("copy_bandwidth_Bps")
    rates: dict[str, float] = ceilings.get("matmul_flops") or {}
    if median_us <= 0:
        return None
    t_mem = nbytes / bw if (bw and nbytes) else 0.0
    rate = rates.get(dtype) or (rates.get("tf32") if dtype == "tfloat32" else None) or rates.get("float32")
    t_comp = flops / rate if (rate and flops) else 0.0
    attainable = max(t_mem, t_comp)
    if attainable <= 0:
        return None
    return attainable / (median_us * 1e-6)
