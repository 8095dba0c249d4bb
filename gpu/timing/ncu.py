"""Nsight Compute: build the command, parse its CSV "details" page into a ProfileSummary.

The profiled program is `python -m ksearch.gpu.worker.profile_driver SPEC`, which runs one workload of a candidate
with the profiler range opened around a single call (after warm-up), so only the candidate's own
launches are measured. GPU clocks are left alone (`--clock-control none`), like in timing.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import statistics
from collections.abc import Iterable
from pathlib import Path

from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import ProfileSummary

SECTIONS = [
    "SpeedOfLight",
    "Occupancy",
    "LaunchStats",
    "MemoryWorkloadAnalysis",
    "WarpStateStats",
    "SourceCounters",
]
# Named explicitly (it exists on every GPU ncu supports); stall metrics are read from the raw page by
# pattern instead, so a name missing on some architecture cannot make ncu refuse the whole run.
EXTRA_METRICS = ["gpu__time_duration.sum"]
_STALL_RATIO = re.compile(r"^smsp__average_warps?_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio$")
_STALL_SAMPLES = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(?P<reason>\w+)$")


class ProfileError(RuntimeError, KsearchError):
    """Profiling could not run or produced nothing; the message says why and what to do."""


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    candidates = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "ncu"]
    candidates += sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"), reverse=True)
    candidates += sorted(Path("/usr/local/cuda").glob("nsight-compute*/ncu"), reverse=True)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def ncu_command(ncu: str, target: list[str], report: str, kernel_regex: str | None = None) -> list[str]:
    """Profile `target`, writing the report file `report` (read back with `import_command`)."""
    cmd = [
        ncu,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--force-overwrite",
        "--export",
        report,
    ]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += ["--metrics", ",".join(EXTRA_METRICS)]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]  # case-sensitive, like all ncu regex filters
    return cmd + target


def import_command(ncu: str, report: str, page: str) -> list[str]:
    """Read a report back as CSV: page "details" (sections, rules) or "raw" (every metric collected)."""
    return [ncu, "--import", report, "--csv", "--page", page, "--print-units", "base"]


_TIME_UNITS = {
    "ns": 1e-3,
    "nsecond": 1e-3,
    "us": 1.0,
    "usecond": 1.0,
    "ms": 1e3,
    "msecond": 1e3,
    "s": 1e6,
    "second": 1e6,
}
_BYTE_UNITS = {
    "byte": 1,
    "b": 1,
    "kbyte": 1e3,
    "kb": 1e3,
    "kib": 1024,
    "mbyte": 1e6,
    "mb": 1e6,
    "mib": 2**20,
    "gbyte": 1e9,
    "gb": 1e9,
}


def _num(text: str) -> float | None:
    t = (text or "").strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _to_us(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    return value * _TIME_UNITS.get(unit.strip().lower(), 1.0)


def _to_bytes(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    u = unit.strip().lower().split("/")[0]
    return value * _BYTE_UNITS.get(u, 1.0)


def _csv_rows(text: str) -> list[dict[str, str]]:
    """Rows of the CSV table inside ncu's stdout (which also carries ==PROF== lines and program output)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    return list(csv.DictReader(io.StringIO("\n".join(body))))


def parse_raw_stalls(text: str) -> dict[str, dict[str, float]]:
    """Per kernel ID: stall reason -> cycles per issued instruction (or % of samples), from the raw page."""
    rows = _csv_rows(text)
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        kid = r.get("ID", "")
        if not kid.strip().isdigit():  # the units row
            continue
        ratios, samples = {}, {}
        for col, val in r.items():
            v = _num(val or "")
            if v is None or col is None:
                continue
            m = _STALL_RATIO.match(col)
            if m:
                ratios[m.group("reason")] = v
                continue
            m = _STALL_SAMPLES.match(col)
            if m and not m.group("reason").endswith("not_issued"):
                samples[m.group("reason")] = v
        if ratios:
            out[kid] = ratios
        elif samples and sum(samples.values()) > 0:
            total = sum(samples.values())
            out[kid] = {k: 100.0 * v / total for k, v in samples.items()}
    return out


def parse_details(
    text: str, workload: str, kernel_regex: str | None = None, raw_text: str | None = None
) -> ProfileSummary:
    """A ProfileSummary for the main kernel (the longest, or the first matching `kernel_regex`): its
    median duration over the profiled launches, the other figures from its median launch.

    `text` is the details page (sections and rules); `raw_text`, if given, the raw page, where the
    warp-stall breakdown lives."""
    rows = _csv_rows(text)
    if not rows:
        raise ProfileError("ncu produced no kernel data" + explain(text))
    kernels: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        kernels.setdefault(r.get("ID", "0"), []).append(r)

    def duration(rs: Iterable[dict[str, str]]) -> float:
        best = None
        for r in rs:
            name = r.get("Metric Name", "")
            if name in ("gpu__time_duration.sum", "Duration"):
                v = _to_us(_num(r.get("Metric Value", "")), r.get("Metric Unit", ""))
                if v is not None and (best is None or name == "gpu__time_duration.sum"):
                    best = v
        return best or 0.0

    ids = list(kernels)
    if kernel_regex:
        pat = re.compile(kernel_regex)
        matching = [i for i in ids if pat.search(kernels[i][0].get("Kernel Name", ""))]
        ids = matching or ids
    # Several calls are profiled: each kernel name has one launch per call. The main kernel is the
    # name with the longest median launch; its figures are those of its median launch.
    launches: dict[str, list[str]] = {}
    for i in ids:
        launches.setdefault(kernels[i][0].get("Kernel Name", "?"), []).append(i)
    for group in launches.values():
        group.sort(key=lambda i: duration(kernels[i]))
    main_name = max(launches, key=lambda n: statistics.median(duration(kernels[i]) for i in launches[n]))
    group = launches[main_name]
    main_id = group[(len(group) - 1) // 2]
    durations = [duration(kernels[i]) for i in group]
    rs = kernels[main_id]
    name = rs[0].get("Kernel Name", "?")
    metrics: dict[str, str] = {}
    values: dict[str, tuple[float | None, str]] = {}
    advice: list[tuple[float, str]] = []
    for r in rs:
        mname, unit, val = r.get("Metric Name", ""), r.get("Metric Unit", ""), r.get("Metric Value", "")
        if mname:
            values.setdefault(mname, (_num(val), unit))
            if len(metrics) < 80:
                metrics[f"{r.get('Section Name', '')}: {mname}"] = f"{val} {unit}".strip()
        rule, desc = r.get("Rule Name", ""), r.get("Rule Description", "")
        if rule and desc and r.get("Rule Type", "") in ("OPT", "WRN", "ERR", "Warning", "Optimization"):
            est = _num(r.get("Estimated Speedup", "")) or 0.0
            text_ = re.sub(r"\s+", " ", desc).strip()
            tag = f" (est. speedup {est:.0f}%)" if est else ""
            advice.append((est, f"{rule}: {text_}{tag}"))

    def pct(*names: str) -> float | None:
        for n in names:
            if n in values and values[n][0] is not None:
                return values[n][0]
        return None

    stall_map = parse_raw_stalls(raw_text).get(main_id, {}) if raw_text else {}
    for mname, (v, _unit) in values.items():  # stall metrics asked for on the command line, if any
        m = _STALL_RATIO.match(mname)
        if m and v is not None:
            stall_map.setdefault(m.group("reason"), v)
    stalls = sorted(((k, round(v, 3)) for k, v in stall_map.items() if v), key=lambda kv: kv[1], reverse=True)
    smem = 0.0
    have_smem = False
    for n in ("Static Shared Memory Per Block", "Dynamic Shared Memory Per Block"):
        if n in values and values[n][0] is not None:
            smem += _to_bytes(values[n][0], values[n][1]) or 0.0
            have_smem = True
    regs = pct("Registers Per Thread")
    other_names: dict[str, list[float]] = {}
    for i in kernels:
        name_i = kernels[i][0].get("Kernel Name", "?")
        if name_i != main_name:
            other_names.setdefault(name_i, []).append(duration(kernels[i]))
    others = [f"{n[:60]}: {statistics.median(d):.2f} us (median of {len(d)})" for n, d in other_names.items()]
    if others:
        metrics["other kernels in the call"] = "; ".join(others[:10])
    return ProfileSummary(
        workload=workload,
        kernel=name,
        duration_us=statistics.median(durations) or None,
        launches=len(durations),
        duration_range_us=(durations[0], durations[-1]) if len(durations) > 1 else None,
        dram_throughput_pct=pct("DRAM Throughput"),
        sm_throughput_pct=pct("Compute (SM) Throughput", "SM Throughput", "Compute (SM) [%]"),
        achieved_occupancy_pct=pct("Achieved Occupancy"),
        registers_per_thread=int(regs) if regs is not None else None,
        shared_bytes_per_block=int(smem) if have_smem else None,
        l1_hit_rate_pct=pct("L1/TEX Hit Rate"),
        l2_hit_rate_pct=pct("L2 Hit Rate"),
        top_stalls=stalls[:5],
        advice=[a for _, a in sorted(advice, key=lambda x: -x[0])][:8],
        metrics=metrics,
    )


def explain(text: str) -> str:
    if "ERR_NVGPUCTRPERM" in text:
        return (
            ": the GPU performance counters are restricted to administrators on this machine "
            "(ERR_NVGPUCTRPERM); run as root or set NVreg_RestrictProfilingToAdminUsers=0"
        )
    if "No kernels were profiled" in text:
        return (
            ": no kernel ran inside the profiled call (or the kernel-name filter matched none; "
            "ncu regex filters are case-sensitive)"
        )
    tail = "\n".join(ln for ln in text.splitlines()[-15:] if ln.strip())
    return f"; ncu said:\n{tail}" if tail else ""
