"""The measured figures of the docs, generated from the committed results in bench/results/.

    python bench/figures.py --check   # exit 1, saying where, when the docs and bench/results/ disagree
    python bench/figures.py --write   # rewrite every generated region from the results

The figures live in docs/results.md; the README shows a headline table of them. A generated region is the text
between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->`: inside one line (a table row, a phrase in a
sentence) or around a block (a whole table). `REGIONS` maps each NAME to the function that writes it from the
results, so a figure in a region is whatever the results say; `HOME` says which document holds it (each region
once, in its home: docs/results.md unless named there).

Outside the regions, `--check` also reads the documents of `DOCS` (the README, and the pages its reference
material lives in) for numbers that look measured (a time, a speedup, a percentage, a bandwidth, "N of M",
"N passed"): each must be one of `ALLOWED`, phrases that state a setting, a limit or a test's bound rather than a
measurement, each with why. In those and in `PATHS_ONLY`, every `tests/...` or `bench/...` path named must exist,
so a claim credited to a test points at one, and every relative link must lead to a file (and heading) that is
there.

To put a new result in the docs: commit its JSON under bench/results/, write a function here that renders it
(`Results` reads the files), add it to `REGIONS`, put the two markers where it goes in docs/results.md, and run
`--write`.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results"
RESULTS_DOC = "docs/results.md"  # every measured figure, and the home of every region `HOME` does not name
# The documents checked whole (regions, stray numbers, paths, links), relative to the repository root: the README
# and the pages that hold what it links to for reference.
DOCS = ("README.md", RESULTS_DOC, "docs/cli.md", "docs/mcp.md")
# Documents whose test and bench paths and relative links are checked, not their numbers.
PATHS_ONLY = ("docs/integrity.md",)


class FiguresError(Exception):
    """A results file is missing or does not hold what a region needs."""


@dataclass(frozen=True)
class Results:
    """Read access to a results directory (bench/results/, or a copy in a test)."""

    root: Path

    def json(self, name: str) -> Any:
        path = self.root / name
        if not path.is_file():
            raise FiguresError(f"{path} is missing")
        return json.loads(path.read_text())

    def text(self, name: str) -> str:
        path = self.root / name
        if not path.is_file():
            raise FiguresError(f"{path} is missing")
        return path.read_text()

    def has(self, name: str) -> bool:
        return (self.root / name).is_file()

    def glob(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern), key=_natural)


def _natural(p: Path) -> list[Any]:
    """`...-2.json` before `...-10.json`."""
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p.name)]


# ---------------------------------------------------------------------------------------------- formatting


def _x(v: float) -> str:
    return f"{v:.2f}x"


def _pct(v: float, digits: int = 1) -> str:
    return f"{100 * v:.{digits}f}%"


def _span(values: list[float], fmt: Callable[[float], str]) -> str:
    """`a–b` for the smallest and largest value, one value when they print the same."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _files(paths: list[Path]) -> str:
    """`name-{1,2}.json` for numbered siblings, else the names joined."""
    if len(paths) == 1:
        return paths[0].name
    parts = [re.match(r"(.*-)(\d+)(\.\w+)$", p.name) for p in paths]
    if all(parts) and len({(m.group(1), m.group(3)) for m in parts if m}) == 1:
        m = parts[0]
        assert m is not None
        nums = ",".join(x.group(2) for x in parts if x)
        return f"{m.group(1)}{{{nums}}}{m.group(3)}"
    return ", ".join(p.name for p in paths)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _row(*cells: str) -> str:
    return " | ".join(cells)


# ------------------------------------------------------------------------------------ the H200 sandbox table


def _sandbox(r: Results) -> dict[str, Any]:
    return r.json("sandbox-h200.json")


def h200_env(r: Results) -> str:
    hw = _sandbox(r)["hardware"]
    return f"one {hw['device']}, torch {hw['torch']}, Triton {hw['triton']}"


def row_eval(r: Results) -> str:
    e2e = _sandbox(r)["parts"]["e2e"]
    t, c = e2e["triton"], e2e["cuda"]
    trials = re.search(r"(\d+) correctness trials", e2e["what"])
    if trials is None:
        raise FiguresError("sandbox-h200.json: e2e.what does not say how many correctness trials")
    tn, cn = t["new_kernel_s"]["n"], c["new_kernel_s"]["n"]
    n = f"n={tn} each" if tn == cn else f"n={tn} / {cn}"
    return _row(
        f"evaluate one new candidate (compile + {trials.group(1)} correctness trials + timing, warm worker)",
        f"Triton median {t['new_kernel_s']['median']:.2f} s, NVRTC CUDA {c['new_kernel_s']['median']:.2f} s "
        f"({n}; the same source again {t['repeat_s']['median']:.2f} / {c['repeat_s']['median']:.2f} s)",
        "`bench/sandbox.py` → `sandbox-h200.json`",
    )


def row_repeat(r: Results) -> str:
    rep = _sandbox(r)["parts"]["repeat"]
    return _row(
        f"repeatability: one {rep['median_of_medians_us'] / 1000:.1f} ms kernel benchmarked "
        f"{len(rep['medians_us'])} times",
        f"medians within {_pct(rep['spread_max_minus_min_rel'], 3)} (max−min)",
        "same",
    )


def row_aa(r: Results) -> str:
    aa = _sandbox(r)["parts"]["aa"]
    return _row(
        f"A/A: two identical candidates compared {aa['comparisons']} times",
        f"called faster {aa['called_faster']} times of {aa['comparisons']}",
        "same",
    )


_FAULT_NAMES = {
    "fault_illegal_address": "illegal address",
    "fault_infinite_loop": "infinite loop",
    "fault_segfault": "host segfault",
    "fault_gpu_oom": "GPU OOM",
    "fault_exception": "Python exception",
}


def row_faults(r: Results) -> str:
    f = _sandbox(r)["parts"]["faults"]
    names = [_FAULT_NAMES[k] for k in _FAULT_NAMES if k in f]
    kinds = "each reported as its kind" if f["all_reported_as_kind"] else "NOT each reported as its kind"
    after = (
        "the next candidate evaluated correctly every time"
        if f["pool_recovered_every_time"]
        else "the next candidate NOT always evaluated correctly"
    )
    return _row(f"fault suite: {', '.join(names)}", f"{kinds}; {after}", "same")


def row_ceilings(r: Results) -> str:
    hw = _sandbox(r)["hardware"]
    mm = hw["matmul_tflops"]
    order = [("bfloat16", "bf16"), ("float16", "fp16"), ("tf32", "tf32"), ("float32", "fp32")]
    rates = ", ".join(f"{short} {mm[k]:.3g}" for k, short in order if k in mm)
    return _row(
        "measured ceilings",
        f"copy {hw['copy_bandwidth_gbps'] / 1000:.2f} TB/s, best of copy/read/write "
        f"{hw['bandwidth_gbps'] / 1000:.2f} TB/s; matmul {rates} TFLOP/s",
        "same (`setup`)",
    )


def _ncu(data: dict[str, Any], key: str) -> dict[str, Any]:
    return data["parts"]["ncu"][key]


def _launches(rec: dict[str, Any]) -> int:
    return int((rec.get("profile") or {}).get("launches") or 1)  # files before the field: one launch


def row_ncu(r: Results) -> str:
    paths = r.glob("sandbox-ncu-h200-*.json")
    if not paths:
        raise FiguresError("no bench/results/sandbox-ncu-h200-*.json")
    runs = [json.loads(p.read_text()) for p in paths]
    soft = [_ncu(d, "softmax/triton") for d in runs]
    rows = [_ncu(d, "row_sum/cuda") for d in runs]
    launches = {_launches(x) for x in soft + rows}
    if len(launches) != 1:
        raise FiguresError(f"{_files(paths)}: runs profiled different numbers of launches {sorted(launches)}")

    def gap(xs: list[dict[str, Any]]) -> str:
        return _span([x["relative_difference"] for x in xs], _pct).replace("%", "") + "%"

    return _row(
        f"benchmark median vs Nsight Compute `gpu__time_duration` (median of {launches.pop()} profiled calls), "
        f"{len(runs)} runs",
        f"softmax (Triton) {gap(soft)} apart, row_sum (NVRTC) {gap(rows)}",
        f"`bench/sandbox.py --parts setup,ncu` → `{_files(paths)}`",
    )


def row_nvrtc_launch(r: Results) -> str:
    """An NVRTC kernel's launch: the host's cost per launch and what a short kernel timed alone carries, over the
    runs made (the exported files' copy from the last run only: it changed after the first)."""
    paths = r.glob("nvrtc-launch-h200-*.json")
    if not paths:
        raise FiguresError("no bench/results/nvrtc-launch-h200-*.json")
    runs = [json.loads(p.read_text())["launchers"] for p in paths]
    if any(x.get("ksearch.gpu.nvrtc", {}).get("kernel_us") is None for x in runs):
        raise FiguresError(f"{_files(paths)}: a run without a ksearch.gpu.nvrtc row and kernel time")

    def rng(xs: list[float]) -> str:
        lo, hi = min(xs), max(xs)
        return f"{lo:.1f}" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}–{hi:.1f}"

    def say(name: str, label: str, rows: list[dict[str, Any]]) -> str:
        xs = [x[name] for x in rows if name in x]
        return (
            f"{label} {rng([x['host_us'] for x in xs])} µs per launch, alone "
            f"{rng([x['idle_us'] for x in xs])} µs"
        )

    parts = [say("ksearch.gpu.nvrtc", "ksearch.gpu.nvrtc", runs)]
    parts += [say(n, lab, runs) for n, lab in (("before", "the previous launcher"), ("cupy RawKernel call", "CuPy's own call")) if any(n in x for x in runs)]  # fmt: skip
    if "standalone (exported files)" in runs[-1]:
        parts.append(say("standalone (exported files)", "the exported files' copy (last run)", runs[-1:]))
    kern = [x["ksearch.gpu.nvrtc"]["kernel_us"] for x in runs]
    gap = [x["ksearch.gpu.nvrtc"]["gap_us"] for x in runs]
    return _row(
        f"an NVRTC kernel's launch on the host, and a {rng(kern)} µs kernel timed alone (events around one call on "
        f"an idle GPU), {len(runs)} runs",
        "; ".join(parts)
        + f". A short kernel timed alone carries {rng(gap)} µs beyond its own time: the launch's host path, which "
        "the GPU waits for; the host's pace moved between the runs",
        f"`bench/nvrtc_launch.py` → `{_files(paths)}`",
    )


def ncu_single(r: Results) -> str:
    """The softmax gap of runs that profiled a single launch."""
    found = []
    for name in ("sandbox-ncu-ext-h200.json", "sandbox-h200.json"):
        rec = _ncu(r.json(name), "softmax/triton")
        if _launches(rec) == 1:
            found.append((name, rec["relative_difference"]))
    if not found:
        raise FiguresError("no single-launch ncu run among the sandbox results")
    gaps = _and([_pct(v) for _, v in found])
    return f"the softmax gap was {gaps} in {len(found)} runs ({', '.join(f'`{n}`' for n, _ in found)})"


def row_ext(r: Results) -> str:
    ext = r.json("sandbox-ncu-ext-h200.json")["parts"]["ext"]
    if ext["first"]["status"] != "ok" or ext["again"]["status"] != "ok":
        raise FiguresError("sandbox-ncu-ext-h200.json: the extension build did not succeed")
    return _row(
        "CUDA C++ torch extension",
        f"first build {ext['first']['seconds']:.1f} s, the same source again {ext['again']['seconds']:.2f} s",
        "`--parts ext` → `sandbox-ncu-ext-h200.json`",
    )


def _pytest_log(r: Results, name: str) -> tuple[int, list[str], str]:
    """(passed, the test folders of the passed tests, the log) of a committed pytest log."""
    text = r.text(f"logs/{name}")
    summary = re.findall(r"^=*\s*(.*\bin [\d.]+s.*?)\s*=*$", text, re.M)
    if not summary:
        raise FiguresError(f"logs/{name}: no pytest summary line")
    last = summary[-1]
    if re.search(r"\b\d+ (failed|error)", last):
        raise FiguresError(f"logs/{name}: not every test passed ({last})")
    passed = re.search(r"(\d+) passed", last)
    if passed is None:
        raise FiguresError(f"logs/{name}: no passed count in {last!r}")
    dirs = sorted({m.group(1) for m in re.finditer(r"^PASSED tests/(\w+)/", text, re.M)})
    return int(passed.group(1)), dirs, text


def row_gpu_tests(r: Results) -> str:
    """The latest run of every `gpu`-marked test (earlier logs stay in bench/results/logs/ as history)."""
    n, dirs, text = _pytest_log(r, "pytest-gpu-final-h200.log")
    skips = re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", text, re.M)
    skipped = f", {len(skips)} skipped ({'; '.join(skips)})" if skips else ""
    return _row(
        f"every `gpu`-marked test (passed in {', '.join(dirs)})",
        f"{n} passed{skipped}",
        "`pytest -m gpu tests` → `logs/pytest-gpu-final-h200.log`",
    )


def row_integrity_gpu(r: Results) -> str:
    rows = r.json("integrity-h200.json")
    ran = [x for x in rows if x["status"] != "skipped"]
    caught = [x for x in ran if x["caught"]]
    return _row(
        "adversarial suite on the GPU",
        f"{len(caught)} of {len(ran)} cheats caught, each with its reason",
        "`bench/integrity.py` → `integrity-h200.json`",
    )


def _builtin_tasks() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "gpu" / "tasks" / "builtin").glob("*/task.py"))


def row_compile_baseline(r: Results) -> str:
    """Every compile-baseline-h200-*.json: a task measured in a later file replaces its earlier rows."""
    paths = r.glob("compile-baseline-h200-*.json")
    if not paths:
        raise FiguresError("no bench/results/compile-baseline-h200-*.json")
    tasks: dict[str, Any] = {}
    for p in paths:
        tasks.update(json.loads(p.read_text()).get("tasks", {}))
    rows = [row for t in tasks.values() for row in t.get("rows", [])]
    ratios = [row["ratio"] for row in rows if row.get("ratio")]
    measured = sorted(name for name, t in tasks.items() if t.get("rows"))
    if not ratios:
        raise FiguresError(f"{_files(paths)}: no workload has a ratio")
    on = f"all {len(rows)}" if len(ratios) == len(rows) else f"{len(ratios)} of {len(rows)}"
    rest = [n for n in _builtin_tasks() if n not in measured]
    tail = f"; not yet measured: {', '.join(rest)}" if rest else ""
    # a ratio below 1 means ksearch's baseline was the faster one: never a handicap for the baseline
    outside = [row for row in rows if row.get("ratio") and abs(row["ratio"] - 1.0) > 0.03]
    out_text = "".join(
        f"; outside 3%: {row['task']} {row['workload']} {row['ratio']:.3f}"
        + (" (ksearch's baseline the faster)" if row["ratio"] < 1 else "")
        for row in outside
    )
    within = f"{len(ratios) - len(outside)} of {len(ratios)} within 3%"
    return _row(
        "the torch.compile baseline as ksearch reports it (static, per shape, clean process) vs a fresh "
        "compile for that shape alone, measured the same way",
        f"ratio {_span(ratios, lambda v: f'{v:.3f}')} on {on} workloads of {len(measured)} built-in tasks "
        f"({', '.join(measured)}), {within}{out_text}{tail}",
        f"`bench/compile_baseline.py` → `{_files(paths)}`",
    )


def row_gpumode(r: Results) -> str:
    """GPU MODE TriMul: ksearch's `gpumode` protocol against the task's own eval.py, the worst shape each."""
    data = r.json("gpumode-trimul-h200.json")
    cands = data["candidates"]
    within = sorted(n for n, c in cands.items() if c.get("within_5pct"))
    beyond = sorted(
        (n for n, c in cands.items() if c.get("max_deviation") is not None and not c.get("within_5pct")),
        key=lambda n: cands[n]["max_deviation"],
    )

    def dev(n: str) -> str:
        return f"{n} {cands[n]['max_deviation'] * 100:.1f}%"

    shapes = len(data["benchmarks"])
    pairs = [a for c in cands.values() for a in (c.get("agreement") or {}).values()]
    close = sum(abs(a - 1.0) <= 0.05 for a in pairs)
    selves = {
        n: c["evaluator_max_self_deviation"]
        for n, c in cands.items()
        if c.get("evaluator_max_self_deviation")
    }
    itself = (
        "; eval.py against itself in a second process, worst shape: "
        + ", ".join(f"{n} {v * 100:.1f}%" for n, v in sorted(selves.items()))
        if selves
        else ""
    )
    named = ", ".join(n for n in cands if n != "reference")
    return _row(
        "GPU MODE TriMul, the task's own `eval.py` vs ksearch timing as it does (`timing_protocol: gpumode`), "
        f"per benchmark shape ({shapes}), {'the reference and ' if 'reference' in cands else ''}published kernels "
        f"({named})",
        f"{close} of {len(pairs)} candidate-shape pairs within 5%; "
        f"worst shape within 5% for {', '.join(dev(n) for n in within) or 'none'}; beyond for "
        f"{', '.join(dev(n) for n in beyond) or 'none'}{itself} (the small shapes of launch-bound calls, whose time "
        "is the host's and moves between processes: see [docs/tasks.md](tasks.md#gpu-mode))",
        "`bench/gpumode_side_by_side.py` → `gpumode-trimul-h200.json`",
    )


def row_gpumode_processes(r: Results) -> str:
    """GPU MODE: eval.py and ksearch's `gpumode` protocol each in several new processes, medians compared per shape."""
    parts, spreads = [], []
    for fname, label in (
        ("gpumode-trimul-h200-processes.json", "TriMul"),
        ("gpumode-histogram-h200-processes.json", "histogram_py, the search's kernel"),
    ):
        data = r.json(fname)
        for n, c in data["candidates"].items():
            op = c.get("over_processes") or {}
            rows = [v for v in (op.get("per_shape") or {}).values() if "median_ratio" in v]
            if not rows:
                continue
            close = sum(abs(v["median_ratio"] - 1) <= 0.05 for v in rows)
            who = label if n.startswith("export") else f"{label} {n}"
            parts.append(
                f"{who} {close} of {len(rows)} shapes within 5% (worst {op['max_median_deviation'] * 100:.1f}%)"
            )
            for v in rows:
                spreads.append((v["gpumode_eval"]["spread"], v["ksearch_gpumode"]["spread"]))
            k = op["processes"].get("gpumode_eval", 0)
    ev = max(a for a, _ in spreads)
    ks = max(b for _, b in spreads)
    return _row(
        f"GPU MODE, the task's own `eval.py` and ksearch (`timing_protocol: gpumode`) each run in {k} new processes "
        "per candidate, alternating; per shape the medians over the processes compared",
        f"{'; '.join(parts)}; one process's reading against another's of the same harness, worst shape: eval.py "
        f"{(ev - 1) * 100:.1f}%, ksearch {(ks - 1) * 100:.1f}% (launch-bound shapes: the host's pace moves between "
        "processes, see [docs/tasks.md](tasks.md#gpu-mode))",
        "`bench/gpumode_side_by_side.py --processes 4` → `gpumode-{trimul,histogram}-h200-processes.json`",
    )


def row_kernelbench(r: Results) -> str:
    """KernelBench: its own eval_kernel_against_ref vs ksearch's `kernelbench` protocol, per candidate and problem."""
    data = r.json("side-by-side-kernelbench-h200.json")
    pairs = [p for p in data["pairs"] if p.get("rel_diff") is not None]
    close = [p for p in pairs if abs(p["rel_diff"]) <= 0.05]
    beyond = sorted((p for p in pairs if abs(p["rel_diff"]) > 0.05), key=lambda p: -abs(p["rel_diff"]))
    problems = sorted({p["problem"] for p in pairs})
    out = f"{len(close)} of {len(pairs)} pairs within 5%"
    if beyond:
        out += "; beyond: " + ", ".join(
            f"{p['problem']} {p['candidate']} {p['rel_diff'] * 100:+.1f}%" for p in beyond
        )
    again = (
        r.json("side-by-side-kernelbench-gelu-h200.json")["pairs"]
        if r.has("side-by-side-kernelbench-gelu-h200.json")
        else []
    )
    first = {(p["problem"], p["candidate"]): p for p in pairs}
    moved = [
        f"{p['problem']} {p['candidate']}: KernelBench {first[k]['kernelbench_us']:.0f} then {p['kernelbench_us']:.0f} µs, "
        f"ksearch {first[k]['ksearch_us']:.0f} then {p['ksearch_us']:.0f} µs"
        for p in again
        if (k := (p["problem"], p["candidate"])) in first
        and p.get("ksearch_us")
        and not k[1].startswith("baseline")
    ]
    if moved:
        out += "; each side again in new processes (`side-by-side-kernelbench-gelu-h200.json`): " + "; ".join(
            moved
        )
    return _row(
        "KernelBench, its own `eval_kernel_against_ref` (and `measure_ref_program_time` for eager) vs ksearch timing "
        f"as it does (`timing_protocol: kernelbench`), {len(problems)} problems ({', '.join(problems)}), the "
        "reference, our Triton kernel and the eager baseline each",
        out + " ([docs/tasks.md](tasks.md#kernelbench-its-rule-and-its-timing))",
        "`bench/kernelbench_side_by_side.py` → `side-by-side-kernelbench-h200.json`",
    )


def row_search_kernels(r: Results) -> str:
    """Kernels a model wrote in ksearch searches on the H200, exported and run by their owners' evaluators."""
    kb = r.json("side-by-side-kernelbench-h200-search.json")
    gm = r.json("side-by-side-gpumode-h200-search.json")
    parts = []
    for p in kb["pairs"]:
        if p.get("rel_diff") is None:
            continue
        who = "eager" if p["candidate"].startswith("baseline") else "the search's kernel"
        parts.append(
            f"KernelBench {p['problem']}, {who}: KernelBench {p['kernelbench_us']:.1f} µs, ksearch "
            f"{p['ksearch_us']:.1f} µs ({p['rel_diff'] * 100:+.1f}%)"
        )
    task = Path(gm["task"]).name if isinstance(gm.get("task"), str) else "histogram_py"
    for c in gm["candidates"].values():
        agree = c.get("agreement") or {}
        if not agree:
            continue
        close = sum(abs(a - 1.0) <= 0.05 for a in agree.values())
        lo, hi = min(agree.values()), max(agree.values())
        ev = c["gpumode_eval"]["per_shape"]
        shapes = (c.get("ksearch_gpumode") or {}).get("per_shape") or {}
        host = [
            float(m.group(1))
            for v in shapes.values()
            for f in v.get("flags", [])
            if (m := re.search(r"issuing one call takes (\d+) us on the host", f))
        ]
        parts.append(
            f"GPU MODE {task}, the search's kernel: eval.py {min(v['mean_us'] for v in ev.values()):.1f}–"
            f"{max(v['mean_us'] for v in ev.values()):.1f} µs over {len(ev)} shapes; {close} of {len(agree)} "
            f"shapes within 5% (ksearch {100 * (lo - 1):+.0f}% to {100 * (hi - 1):+.0f}%); "
            + (
                f"{len(host)} of {len(shapes)} shapes flagged launch-bound, ksearch's worker issuing a call in "
                f"{min(host):.0f}–{max(host):.0f} µs on the host"
                if host
                else ""
            )
            + " ([docs/live-host.md](live-host.md#on-the-h200-a-gpu-mode-task-and-a-kernelbench-task))"
        )
    return _row(
        "kernels a language model wrote in ksearch searches (as MCP host, on the H200), exported by `export_kernel` "
        "and run by their owners' own evaluators beside ksearch in the task's protocol",
        "; ".join(parts),
        "`bench/run_h200.sh live-round` (`KS_LIVE_OWNERS=1`) → `side-by-side-{kernelbench,gpumode}-h200-search.json`",
    )


def _fib_pairs(data: dict[str, Any]) -> list[tuple[str, str, str, float]]:
    """(timer, solution, workload, ksearch / FlashInfer-Bench - 1) for every measured pair."""
    out = []
    for name, cand in data["candidates"].items():
        for timer, e in (cand.get("timers") or {}).items():
            ks = (e.get("ksearch") or {}).get("per_workload") or {}
            for wl, f in (e.get("fib") or {}).items():
                k = (ks.get(wl[:8]) or {}).get("mean_us")
                if k and f.get("latency_ms"):
                    out.append((timer, name, wl[:8], k / (f["latency_ms"] * 1000.0) - 1.0))
    return out


def row_flashinfer(r: Results) -> str:
    """FlashInfer-Bench: its own Benchmark runner vs ksearch's `flashinfer` protocol, per timer."""
    data = r.json("side-by-side-flashinfer-h200.json")
    pairs = _fib_pairs(data)
    if not pairs:
        raise FiguresError("side-by-side-flashinfer-h200.json: no measured pair")
    parts = []
    for timer in sorted({p[0] for p in pairs}):
        mine = [p for p in pairs if p[0] == timer]
        close = sum(abs(p[3]) <= 0.05 for p in mine)
        worst = max(mine, key=lambda p: abs(p[3]))
        parts.append(
            f"{timer} timer: {close} of {len(mine)} pairs within 5% (worst {worst[1]} {worst[2]} {worst[3] * 100:+.0f}%)"
        )
    return _row(
        "FlashInfer-Bench, its own benchmark runner vs ksearch timing as it does (`timing_protocol: flashinfer`), "
        f"{len(data['definitions'])} definitions × 3 workloads, the reference and our Triton kernel each",
        "; ".join(parts)
        + ". Every pair beyond 5% is a small workload, whose reading is the host's: with CUPTI (FlashInfer-Bench's "
        "timer where cupti-python is installed, ksearch's default) calls of several kernels, whose span is mostly "
        "the host's launch gaps; with events, a call of a few µs once the host issues it slower than the GPU "
        "flushes. The same 5 µs call read by both timers in one process agrees within 4% and moves by 30% between "
        "runs (`host-pace-h200-{1,2}.json`) "
        "([docs/tasks.md](tasks.md#flashinfer-bench))",
        "`bench/flashinfer_side_by_side.py` → `side-by-side-flashinfer-h200.json`",
    )


def row_trimul_search(r: Results) -> str:
    """A TriMul search through the tools: what each call took."""
    data = r.json("trimul-search-h200.json")
    calls = {c["call"]: c for c in data["calls"] if "seconds" in c and "error" not in c}
    bench = [c for n, c in calls.items() if n.startswith("benchmark ")]
    if not bench:
        raise FiguresError("trimul-search-h200.json: no benchmark call")
    readings = [(n, c) for n, c in calls.items() if n.startswith("analyse_kernel prompt")]
    secs = ", ".join(
        f"{c['candidate']} {c['seconds']:.0f} s ("
        + (
            f"{c['seconds_by_step']['wait_for_baselines']:.0f} s waiting for the baselines, "
            if c["seconds_by_step"].get("wait_for_baselines")
            else ""
        )
        + f"{c['seconds_by_step'].get('inputs', 0):.0f} s drawing inputs, "
        f"{c['seconds_by_step'].get('correctness', 0):.0f} s checking correctness"
        + (
            f" ({c['seconds_by_step']['reference']:.0f} s of it running the reference"
            + (
                f", {c['seconds_by_step']['build']:.0f} s building its own torch extension"
                if c["seconds_by_step"].get("build", 0) >= 1
                else ""
            )
            + "), "
            if "reference" in c["seconds_by_step"]
            else ", "
        )
        + f"{c['seconds_by_step'].get('timing', 0):.0f} s timing"
        + (
            f", {c['seconds_by_step']['audit']:.0f} s the kernel audit"
            if c["seconds_by_step"].get("audit", 0) >= 1
            else ""
        )
        + ")"
        for c in bench
    )
    final = [n for n in calls if n.startswith("final_evaluation")]
    ended = ""
    if final:
        per = _per_candidate(data)
        ended = f"; {final[0]}: {calls[final[0]]['seconds']:.0f} s" + (f" ({per})" if per else "")
    said = "; ".join(
        f"{n.removeprefix('analyse_kernel prompt ').strip('()')}: analyse_kernel {c['seconds']:.2f} s"
        for n, c in readings
    )
    return _row(
        f"a TriMul search through the tools (`timing_protocol: {data.get('timing_protocol')}`), per call",
        (f"{said}; " if said else "")
        + f"benchmark of a new candidate, in order: {secs}"
        + (ended if final else "; final_evaluation did not finish within the call's budget" + _stood(data)),
        "`bench/trimul_search.py` → `trimul-search-h200.json`",
    )


def _per_candidate(data: dict[str, Any]) -> str:
    """A finished final evaluation's seconds per candidate, from its progress messages, with its input draws."""
    by_cand: dict[str, list[list[Any]]] = {}
    for p in data.get("final_progress") or []:
        by_cand.setdefault(p[2].split(": ", 1)[0], []).append(p)
    cands = {f["attempt_id"]: f for f in data.get("final") or []}
    out = []
    for cand, ps in by_cand.items():
        if not ps[-1][2].endswith(": done"):
            continue
        aid = int(cand.split("#")[1].rstrip(")")) if "#" in cand else None
        steps = (cands.get(aid) or {}).get("seconds_by_step") or {}
        inputs = f", {steps['inputs']:.0f} s of it drawing inputs" if "inputs" in steps else ""
        out.append(f"attempt #{aid} {ps[-1][0] - ps[0][0]:.0f} s{inputs}")
    return "; ".join(out)


def _stood(data: dict[str, Any]) -> str:
    """Where an unfinished final evaluation stood, from its progress messages ([seconds, fraction, message]): each
    candidate it finished, with its two slowest timed workloads, and where it was when the call ended."""
    prog = data.get("final_progress") or []
    if not prog:
        return ""
    by_cand: dict[str, list[list[Any]]] = {}
    for p in prog:
        by_cand.setdefault(p[2].split(": ", 1)[0], []).append(p)
    done = []
    for cand, ps in by_cand.items():
        if not ps[-1][2].endswith(": done"):
            continue
        timed = [
            (ps[k + 1][0] - ps[k][0], ps[k][2].rsplit(": ", 1)[-1])
            for k in range(len(ps) - 1)
            if ": timing: " in ps[k][2]
        ]
        slow = ", ".join(f"{w} {t:.0f} s" for t, w in sorted(timed, reverse=True)[:2])
        loading = next((p[0] for p in ps if p[2].endswith(": loading")), ps[0][0])
        done.append(
            f"{cand.split(' (')[0]} in {ps[-1][0] - ps[0][0]:.0f} s (inputs drawn ahead {loading - ps[0][0]:.0f} s; "
            f"timing {slow})"
        )
    last = prog[-1]
    return " (" + "; ".join([*done, f"at {last[0]:.0f} s: {last[2]}"]) + ")"


def row_suite_scaling(r: Results) -> str:
    """A suite of KernelBench problems on the H200's one GPU, locally and through a one-node Ray cluster."""
    parts = []
    for name in ("suite-scaling-h200.json", "suite-scaling-h200-ray.json"):
        data = r.json(name)
        for row in data["rows"]:
            where = f"{row['slots']} GPU {'through Ray' if data['backend'] == 'ray' else 'locally'}"
            if not row["attempts"]:
                parts.append(f"{where}: no candidate recorded in its {row['wall_s']:.0f} s")
                continue
            warm = data.get("warm_up")
            if warm:
                where += f", after an uncounted {warm['wall_s']:.0f} s warm-up ({warm['attempts']} candidates in it)"
            after = row.get("per_min_after_first")
            parts.append(
                f"{where}: {row['attempts']} candidates in {row['wall_s']:.0f} s ({row['per_min']:.1f} a minute; the "
                f"first at {row['first_attempt_s']:.0f} s"
                + (f", {after:.1f} a minute from it on" if after else "")
                + ")"
            )
    tasks = r.json("suite-scaling-h200.json")["tasks"]
    return _row(
        f"a suite of {len(tasks)} KernelBench level-1 problems (tuner policy, stopped at its budget), the runs in "
        "this order on one machine",
        "; ".join(parts) + "; a machine of 2 or 4 GPUs was not available",
        "`bench/run_h200.sh ray` → `suite-scaling-h200{,-ray}.json`",
    )


def row_jail_gpu(r: Results) -> str:
    data = r.json("jail-gpu-h200.json")
    parts = data.get("parts") or {}
    ran = [n for n, p in parts.items() if isinstance(p, dict) and not p.get("skipped")]
    ok = [n for n in ran if parts[n].get("ok")]
    hostile = parts.get("hostile") or {}
    caught = [n for n, v in hostile.items() if isinstance(v, dict) and v.get("ok")]
    return _row(
        "the jail on the GPU: Triton, NVRTC, a CUDA C++ extension and ncu inside it; hostile candidates",
        f"{len(ok)} of {len(ran)} parts ok ({', '.join(ok)}); {len(caught)} hostile candidates caught, each followed "
        "by a correct one",
        "`bench/jail_gpu.py` → `jail-gpu-h200.json`",
    )


def row_tuner(r: Results) -> str:
    data = r.json("driver-tuner-h200.json")
    wall = re.search(r"--wall (\d+)", data["command"])
    rows = data["rows"]
    if wall is None or not rows:
        raise FiguresError("driver-tuner-h200.json: no --wall in its command, or no rows")
    final = []
    baselines: set[str] = set()  # what the torch.compile figures are against, named once
    for row in rows:
        f = row.get("final") or {}
        if f.get("status") != "ok" or f.get("speedup_vs_eager") is None:
            final.append(f"{row['task']} no correct final result")
        else:
            # a final row that names its torch.compile baseline was measured against the per-shape compile
            vc = f.get("speedup_vs_compile") if f.get("compile_baseline") else None
            comp = f" / {_x(vc)}" if vc is not None else " / -"
            final.append(f"{row['task']} {_x(f['speedup_vs_eager'])}{comp} (attempt #{f['attempt_id']})")
            baselines.add(f.get("compile_baseline") or "no torch.compile figure")
    search = _and([_x(row["best_speedup_vs_eager"]) for row in rows])
    seed = _and([_x(row["best_speedup_over_seed"]) for row in rows])
    return _row(
        f"tuner driver, {wall.group(1)} s budget per task, from the plain seeds",
        f"final evaluation on every workload, held-out included, vs eager / vs {' or '.join(sorted(baselines))}: "
        f"{', '.join(final)}; in the search phase, on the search workloads, vs eager: {search} ({seed} over "
        "the seed)",
        "`bench/driver_tuner.py` → `driver-tuner-h200.json`",
    )


# ------------------------------------------------------------------------------------------- the live host


_TIMING = re.compile(
    r"^(?P<wl>\S+) on (?P<dev>[^:\n]+): median (?P<med>[\d.]+) us .*?; (?P<ve>[\d.]+)x vs eager \((?P<eu>[\d.]+) us\)"
    # the torch.compile figure names its baseline before its time: "(static, per shape; 251.8 us)"
    r"(?:; (?P<vc>[\d.]+)x vs torch\.compile \((?:[^;()]*; )?(?P<cu>[\d.]+) us\))?",
    re.M,
)

# where each replayed task's workloads (and their splits) are defined, as bench/live_replay.py runs them
_LIVE_TASKS = {
    "l2_normalize": ROOT / "bench" / "live_host" / "tasks" / "l2_normalize.py",
    "rmsnorm": ROOT / "gpu" / "tasks" / "builtin" / "rmsnorm" / "task.py",
}


def _splits(task_file: Path) -> dict[str, str]:
    """workload name → split, read from the task file's WORKLOADS literal (no import, no torch)."""
    for node in ast.parse(task_file.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "WORKLOADS" for t in node.targets
        ):
            return {w["name"]: w.get("split", "search") for w in ast.literal_eval(node.value)}
    raise FiguresError(f"{task_file}: no WORKLOADS list")


def _live_final(r: Results) -> dict[str, list[dict[str, Any]]]:
    runs = r.json("live-replay-h200.json")["runs"]
    out = {}
    for name, run in runs.items():
        final = [f for f in run["result"].get("final", []) if f["status"] == "ok"]
        if not final:
            raise FiguresError(f"live-replay-h200.json: {name} has no correct final row")
        out[name] = final
    return out


def live_replay(r: Results) -> str:
    lines = [
        "| task | attempt | workload | split | median | vs eager | vs torch.compile |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, final in _live_final(r).items():
        best = final[0]  # the final evaluation's rows are best first
        splits = _splits(_LIVE_TASKS[name])
        for m in _TIMING.finditer(best["summary"]):
            comp = f"{float(m['vc']):.2f}x ({m['cu']} us)" if m["vc"] else "-"
            lines.append(
                f"| {name} | #{best['attempt_id']} | {m['wl']} | {splits.get(m['wl'], '?')} | {m['med']} us | "
                f"{float(m['ve']):.2f}x ({m['eu']} us) | {comp} |"
            )
    return "\n".join(lines)


def live_replay_rows_loop(r: Results) -> str:
    """The rmsnorm replay's rows-loop kernel (the one the CPU interpreter rejected), found by its kernel's name."""
    final = _live_final(r)["rmsnorm"]
    at = [i for i, f in enumerate(final) if "_rmsnorm_rows_loop" in f["summary"]]
    if not at:
        raise FiguresError("live-replay-h200.json: no correct rmsnorm final row runs _rmsnorm_rows_loop")
    row = final[at[0]]
    place = "the best" if at[0] == 0 else f"number {at[0] + 1} of {len(final)}"
    return (
        f"attempt #{row['attempt_id']} ({_x(row['speedup_vs_eager'])} vs eager, geomean; {place} final row)"
    )


# ------------------------------------------------------------------------------------------ CPU machines


def kernelbench_cpu(r: Results) -> str:
    data = r.json("kernelbench-cpu.json")
    rows = data["rows"]
    ok = [x for x in rows if x["ok"]]
    failed = [x for x in rows if not x["ok"]]
    causes = sorted({x.get("cause") or "error" for x in failed})
    peak = max(x["peak_rss_mb"] or 0.0 for x in rows) / 1024  # ru_maxrss in MiB
    text = (
        f"{len(ok)} of {len(rows)} pass (median {statistics.median(x['seconds'] for x in ok):.1f} s each), "
        f"largest peak RSS {peak:.1f} GiB"
    )
    if failed:
        text += f"; {len(failed)} fail ({', '.join(causes)}): " + ", ".join(f"`{x['file']}`" for x in failed)
    return text


def _mcp(r: Results) -> dict[str, Any]:
    return r.json("mcp-cpu.json")


def mcp_ready(r: Results) -> str:
    d = _mcp(r)
    ready = d["ready_s"]
    return (
        f"ready in a median {ready['median']:.2f} s (at most {ready['max']:.2f} s, n={ready['n']}) from spawn to "
        f"its first answer, on a {d['machine']['cpus']}-CPU machine without a GPU (`bench/mcp.py` → "
        "`bench/results/mcp-cpu.json`)"
    )


def mcp_text_bytes(r: Results) -> str:
    b = _mcp(r)["benchmark_text_bytes"]
    under = "under" if b["max_total"] < b["target"] else "NOT under"
    return f"at most {b['max_total']} bytes in the measured results, {under} the {b['target']}-byte target"


def mcp_after_cancel(r: Results) -> str:
    a = _mcp(r)["after_cancel"]
    first = _span(a["first_after_cancel_s"], lambda v: f"{v:.1f}")
    return (
        f"it took {first} s where the same call takes {a['ordinary_s']['median']:.1f} s (a fresh server's "
        f"first call: {a['first_call_of_a_fresh_server_s']:.1f} s"
    )


def guard_check(r: Results) -> str:
    g = r.json("guard-cpu.json")
    m = g["machine"]
    n = g["functions_watched"]
    return (
        f"identities of {n:,} functions (torch, `Tensor`, `nn.functional`, …, the task's reference module; "
        f"{g['ms']['median']:.1f} ms per check with torch {m['torch']} on a {m['cpus']}-CPU machine, not yet "
        "measured on a GPU machine: `bench/guard.py` → `guard-cpu.json`)"
    )


def _fresh(r: Results, part: str) -> dict[str, Any]:
    d = r.json(f"fresh-clone-{part}-cpu2.json")
    if d["rc"] != 0:
        raise FiguresError(f"fresh-clone-{part}-cpu2.json records a failed run (rc {d['rc']})")
    return d


def _machine_text(d: dict[str, Any]) -> str:
    m = d["machine"]
    return f"{m['cores']}-core machine{' with a GPU' if m['gpu'] else ' without a GPU'}"


def _mmss(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s" if seconds >= 60 else f"{seconds:.0f} s"


def _when(d: dict[str, Any]) -> str:
    """Which code was measured, and when: such a figure holds for that commit, not for every later one."""
    return f"of {d['commit'][:7]} ({d['when'][:10]})"


def quickstart_time(r: Results) -> str:
    d = _fresh(r, "quickstart")
    return (
        f"From a fresh clone {_when(d)} on a {_machine_text(d)}: {_mmss(d['total_s'])} in all, the run itself "
        f"{d['run_s']:.0f} s, setting up a new environment {d['setup_s']:.0f} s "
        "(`bench/fresh_clone.py --part quickstart` → `fresh-clone-quickstart-cpu2.json`)"
    )


def suite_time(r: Results) -> str:
    d, q = _fresh(r, "tests"), _fresh(r, "quick")
    c, qc = d["counts"], q["counts"]
    venv = lambda x: "with a new environment" if x["fresh_venv"] else "in a set-up environment"  # noqa: E731
    return (
        f"From a fresh clone {_when(d)} on a {_machine_text(d)}, {venv(d)}: {_mmss(d['total_s'])} in all "
        f"({c.get('passed', 0)} passed, {c.get('skipped', 0)} skipped; pytest {_mmss(d['pytest_s'])}); the quick "
        f'lane `-m "not slow"` {_when(q)}, {venv(q)}: {_mmss(q["total_s"])} ({qc.get("passed", 0)} passed) '
        "(`bench/fresh_clone.py --part tests|quick` → `fresh-clone-{tests,quick}-cpu2.json`)"
    )


def worker_start(r: Results) -> str:
    d = r.json("worker-start-cpu2.json")
    rows = {(x["fork"], x["jailed"]): x for x in d["rows"]}
    forked = [rows[k] for k in ((True, False), (True, True)) if k in rows]
    started = [rows[k] for k in ((False, False), (False, True)) if k in rows]
    ms = lambda xs: _span([x["wall_ms_median"] for x in xs], lambda v: f"{v:.0f}")  # noqa: E731
    cpu = lambda xs: _span([x["machine_cpu_s_mean"] for x in xs], lambda v: f"{v:.2f}")  # noqa: E731
    return (
        f"On a {d['machine']['cores']}-core machine a worker starts in {ms(forked)} ms and {cpu(forked)} CPU-s "
        f"instead of {ms(started)} ms and {cpu(started)} CPU-s (unjailed–jailed, medians of "
        f"{forked[0]['starts']} starts; `python bench/worker_start.py` → `bench/results/worker-start-cpu2.json`)"
    )


def _host_flow_call(data: dict[str, Any], flow: str, step: str) -> float | None:
    for f in data["flows"]:
        if f["name"] == flow:
            for c in f["calls"]:
                if c.get("step") == step and c.get("outcome") == "ok":
                    return float(c["seconds"])
    return None


def row_host_flow(r: Results) -> str:
    """An IDE host's flows against `ksearch serve` on the H200, every call under a watchdog (bench/host_flow.py)."""
    paths = r.glob("host-flow-h200-[0-9].json")
    if not paths:
        raise FiguresError("no host-flow-h200-N.json")
    runs = [r.json(p.name) for p in paths]
    calls = sum(d["calls"] for d in runs)
    notes = sum(d["progress_notifications"] for d in runs)
    hangs = sum(d["hangs"] for d in runs)
    firsts = [v for d in runs if (v := _host_flow_call(d, "trimul", "benchmark zeyushen")) is not None]
    finals = [v for d in runs if (v := _host_flow_call(d, "trimul", "final_evaluation")) is not None]
    names = sorted({f["name"] for d in runs for f in d["flows"]})
    # A run whose budget ran out before a flow started says so; count per flow, not the union over runs.
    done = [
        f"{n} in {sum(any(f['name'] == n and f.get('outcome') == 'completed' for f in d['flows']) for d in runs)}"
        for n in names
    ]
    trimul = (
        f". TriMul's first benchmark, baselines included: {', then '.join(f'{v:.1f} s' for v in firsts)}; its final "
        f"evaluation of the best 3: {', then '.join(f'{v:.1f} s' for v in finals)}"
        if firsts and finals
        else ""
    )
    return _row(
        "an IDE host's flows against `ksearch serve` over stdio, every call under a watchdog: TriMul (create, the "
        "`analyse_kernel` prompt read at once, benchmarks of published kernels, final evaluation, export, GPU MODE's "
        "eval.py), three KernelBench-format searches in one database, the quickstart",
        f"{hangs} calls past their bound in {len(runs)} runs ({calls} calls, {notes} progress notifications; runs "
        f"that completed each flow: {_and(done)}; one H200, a fresh server and database for each flow){trimul}",
        f"`bench/host_flow.py` → `{_files(paths)}`",
    )


def row_baseline_repeat(r: Results) -> str:
    """Eager and torch.compile baselines read in fresh processes (bench/baseline_repeat.py): their spread."""
    paths = r.glob("baseline-repeat-h200-[0-9].json")
    if not paths:
        raise FiguresError("no baseline-repeat-h200-N.json")
    names: list[str] = []
    worst: list[tuple[float, str, str, str, dict[str, Any]]] = []
    fewer: list[str] = []
    for p in paths:
        for t in r.json(p.name)["tasks"]:
            path = Path(t["task"])
            name = f"{path.name} (a KernelBench-format file)" if path.suffix == ".py" else t["task"]
            names.append(name)
            n = min(len(t["processes"]), *(k["n"] for wl in t["spread"].values() for k in wl.values()))
            if n < 3:
                fewer.append(f"{name} in {n}")
            for wl, kinds in t["spread"].items():
                for kind, sp in kinds.items():
                    worst.append((float(sp["spread"]), name, wl, kind, sp))
    within = [w for w in worst if w[0] <= 0.03]
    beyond = [w for w in worst if w[0] > 0.03]
    said = f"spread (max−min)/median ≤ {_pct(max(w[0] for w in within), 2)} for {len(within)} of {len(worst)} readings"
    for sp, name, wl, kind, d in beyond:
        said += (
            f"; {name} {wl} {kind}: {d['min_us']:.1f}–{d['max_us']:.1f} µs ({_pct(sp)}, beyond 3%; the cause is "
            "not determined)"
        )
    if fewer:
        said += f"; read in fewer than 3 processes (the device call's budget): {_and(fewer)}"
    return _row(
        f"eager and torch.compile baselines, each task read in fresh processes with empty caches ({_and(names)})",
        said,
        f"`bench/baseline_repeat.py` → `{_files(paths)}`",
    )


def worker_start_gpu(r: Results) -> str:
    d = r.json("worker-start-h200.json")
    rows = {(x["fork"], x["jailed"]): x for x in d["rows"]}
    forked = [rows[k] for k in ((True, False), (True, True)) if k in rows]
    started = [rows[k] for k in ((False, False), (False, True)) if k in rows]
    ms = lambda xs, k: _span([x[k] for x in xs], lambda v: f"{v:.0f}")  # noqa: E731
    return (
        f"On an H200 a fresh worker process (each new candidate gets one) starts in {ms(forked, 'wall_ms_median')} ms "
        f"instead of {ms(started, 'wall_ms_median')} ms, its CUDA context {ms(forked, 'context_ms_median')} ms of it "
        f"(unjailed–jailed, medians of {forked[0]['starts']} starts; `python bench/worker_start.py --gpu` → "
        "`bench/results/worker-start-h200.json`)"
    )


# ------------------------------------------------------------------------------------- the README's headline


def _span_x(values: list[float]) -> str:
    return _span(values, lambda v: f"{v:.2f}") + "x"


def headline(r: Results) -> str:
    """The README's short table: a few figures from the rows of docs/results.md, each read from the same files."""
    e2e = _sandbox(r)["parts"]["e2e"]
    trials = re.search(r"(\d+) correctness trials", e2e["what"])
    aa = _sandbox(r)["parts"]["aa"]
    cheats = r.json("integrity-h200.json")
    ran = [x for x in cheats if x["status"] != "skipped"]
    tasks: dict[str, Any] = {}
    for path in r.glob("compile-baseline-h200-*.json"):
        tasks.update(json.loads(path.read_text()).get("tasks", {}))
    ratios = [row["ratio"] for t in tasks.values() for row in t.get("rows", []) if row.get("ratio")]
    measured = [n for n, t in tasks.items() if t.get("rows")]
    if trials is None or not ratios:
        raise FiguresError("sandbox-h200.json or compile-baseline-h200-*.json: not what the headline reads")
    live = []
    for name, final in _live_final(r).items():
        timings = list(_TIMING.finditer(final[0]["summary"]))
        eager = _span_x([float(m["ve"]) for m in timings])
        comp = [float(m["vc"]) for m in timings if m["vc"]]
        live.append(f"{name} {eager} vs eager" + (f", {_span_x(comp)} vs torch.compile" if comp else ""))
    kb = [p for p in r.json("side-by-side-kernelbench-h200.json")["pairs"] if p.get("rel_diff") is not None]
    gm = []
    for fname in ("gpumode-trimul-h200-processes.json", "gpumode-histogram-h200-processes.json"):
        for c in r.json(fname)["candidates"].values():
            per = ((c.get("over_processes") or {}).get("per_shape") or {}).values()
            gm += [v["median_ratio"] for v in per if "median_ratio" in v]
    fib = [p for p in _fib_pairs(r.json("side-by-side-flashinfer-h200.json")) if p[0] == "cupti"]
    within = lambda xs: sum(abs(x) <= 0.05 for x in xs)  # noqa: E731
    rows = [
        (
            f"evaluate a new candidate: compile, {trials.group(1)} correctness trials, timing (a warm worker)",
            f"Triton {e2e['triton']['new_kernel_s']['median']:.2f} s, NVRTC CUDA "
            f"{e2e['cuda']['new_kernel_s']['median']:.2f} s (medians)",
            "#measured-on-an-h200",
        ),
        (
            "two identical candidates compared (A/A)",
            f"called faster {aa['called_faster']} times of {aa['comparisons']}",
            "#measured-on-an-h200",
        ),
        (
            "candidates written to cheat the evaluator",
            f"{sum(x['caught'] for x in ran)} of {len(ran)} caught, each with its reason",
            "#measured-on-an-h200",
        ),
        (
            "the torch.compile baseline ksearch divides by, against a fresh compile of each shape",
            f"ratio {_span(ratios, lambda v: f'{v:.3f}')} over {len(ratios)} workloads of {len(measured)} "
            "built-in tasks",
            "#measured-on-an-h200",
        ),
        (
            "a language model's kernels (as MCP host), final evaluation on every workload, held-out included",
            "; ".join(live),
            "#a-language-models-kernels-replayed-on-the-h200",
        ),
        (
            "ksearch timing a kernel as the task owner's own evaluator does, both read",
            f"within 5%: KernelBench {within([p['rel_diff'] for p in kb])} of {len(kb)} pairs; GPU MODE "
            f"{within([x - 1 for x in gm])} of {len(gm)} shapes (medians over new processes); FlashInfer-Bench "
            f"{within([p[3] for p in fib])} of {len(fib)} pairs (CUPTI timer; on small workloads the host's launch "
            "pace decides)",
            "#measured-on-an-h200",
        ),
    ]
    lines = ["| on one H200 | measured | every row |", "| --- | --- | --- |"]
    lines += [f"| {what} | {said} | [results]({RESULTS_DOC}{anchor}) |" for what, said, anchor in rows]
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- the registry


def row_bank_pairs(r: Results) -> str:
    """Model-driven searches of a task with the kernel bank (holding a related task's search) and without."""
    data = r.json("bank-pairs-h200.json")

    def arm(a: dict[str, Any]) -> str:
        f = a["first_within_5pct"]
        reach = f"candidate {f['n']} of {len(a['candidates'])}" if f else "never"
        best = f"{_x(a['best_speedup'])} vs eager" if a["best_speedup"] else "no GPU-timed best"
        return f"best {best}, within 5% of it at {reach}"

    parts = [
        f"{p['first']} then {p['second']}: with the bank {arm(p['arms']['with'])}; without {arm(p['arms']['without'])}"
        for p in data["pairs"]
    ]
    if not parts:
        raise FiguresError("bank-pairs-h200.json: no pair")
    return _row(
        "a model as MCP host on a task, with a kernel bank holding a related task's search and without",
        "; ".join(parts),
        "`bench/bank_pairs.py` → `bank-pairs-h200.json`; account in `docs/kernel-bank-trial.md`",
    )


REGIONS: dict[str, Callable[[Results], str]] = {
    "headline": headline,
    "quickstart-time": quickstart_time,
    "suite-time": suite_time,
    "worker-start": worker_start,
    "worker-start-gpu": worker_start_gpu,
    "row-host-flow": row_host_flow,
    "row-baseline-repeat": row_baseline_repeat,
    "h200-env": h200_env,
    "row-eval": row_eval,
    "row-repeat": row_repeat,
    "row-aa": row_aa,
    "row-faults": row_faults,
    "row-ceilings": row_ceilings,
    "row-ncu": row_ncu,
    "row-nvrtc-launch": row_nvrtc_launch,
    "row-ext": row_ext,
    "row-gpu-tests": row_gpu_tests,
    "row-integrity-gpu": row_integrity_gpu,
    "row-compile-baseline": row_compile_baseline,
    "row-tuner": row_tuner,
    "row-gpumode": row_gpumode,
    "row-gpumode-processes": row_gpumode_processes,
    "ncu-single": ncu_single,
    "live-replay": live_replay,
    "live-replay-rows-loop": live_replay_rows_loop,
    "kernelbench-cpu": kernelbench_cpu,
    "mcp-ready": mcp_ready,
    "mcp-text-bytes": mcp_text_bytes,
    "mcp-after-cancel": mcp_after_cancel,
    "guard-check": guard_check,
    "row-kernelbench": row_kernelbench,
    "row-search-kernels": row_search_kernels,
    "row-flashinfer": row_flashinfer,
    "row-trimul-search": row_trimul_search,
    "row-suite-scaling": row_suite_scaling,
    "row-jail-gpu": row_jail_gpu,
    "row-bank-pairs": row_bank_pairs,
}

# The document that holds each region, where it is not docs/results.md.
HOME: dict[str, str] = {"headline": "README.md"}

# Numbers outside the regions that are not measurements: each phrase, and why it may stand as written.
ALLOWED: dict[str, str] = {
    "127.0.0.1": "an address",
    "writes 1.25x the input price": "Anthropic's published prompt-cache write multiplier, a price rule",
    "reads 0.1x": "Anthropic's published prompt-cache read multiplier, a price rule",
    "at least every 1.5 s": "the MCP server's heartbeat interval for progress notifications, a setting",
    "waits at most 0.8 s": "how long an MCP prompt reading waits for the task's facts (PROMPT_WAIT_S), a setting",
    "planned from, at most 15 s": "how long the analyse prompt waits for its facts (ANALYSE_WAIT_S), a setting",
    "on 2 cores with 30 s per file": "bench/kernelbench_cpu.py's limits, set by its command line",
    "more than 4 s": "the interrupt handler's cleanup limit, a setting",
    "answered within 30 s": "the bound tests/mcp/test_ts_client.py asserts",
    "256 MiB L2 clear": "the size of KernelBench's own L2-clearing buffer, a setting of its timing code",
    "95% for MoE": "FlashInfer-Bench's matched-ratio rule for MoE definitions, a tolerance setting",
    "at most 32 GiB": "the draws store's default budget, a setting",
    "the 95% confidence interval": "the gain rule's confidence level (CONFIDENCE), a setting",
    "at least 1.02x": "the gain rule's minimum gain (MIN_GAIN), a setting",
}

_MARKER = re.compile(r"<!-- figures:(?P<name>[\w-]+) -->(?P<body>.*?)<!-- /figures:(?P=name) -->", re.S)
_UNIT = r"(?:x|×|%|ms|µs|us|s|seconds?|minutes?|GB|MB|KB|TB/s|GB/s|TFLOP/s|bytes|B|MiB|GiB)(?!\w)"
_NUM = r"\d[\d,]*(?:\.\d+)?"
_MEASURED = re.compile(
    rf"~?{_NUM}(?:\s?[–-]\s?{_NUM})?\s?{_UNIT}"  # 0.52 s, 2.3–2.9%, 11.96x, 4.20 TB/s
    rf"|\b\d+\.\d+\b"  # a bare decimal: 0.995
    rf"|\b\d+ of (?:the )?\d+\b"  # 20 of 20
    rf"|\b\d+ pass(?:ed)?\b"  # 33 passed
    rf"|~\d[\d,]*"  # ~3,300
)
_PATH = re.compile(r"\b((?:tests|bench)/[\w./{},*-]*[\w/}*])")


def _regions(text: str) -> list[re.Match[str]]:
    return list(_MARKER.finditer(text))


def render(name: str, results: Results, old_body: str) -> str:
    """A region's new body: block regions keep their surrounding newlines."""
    content = REGIONS[name](results)
    return f"\n{content}\n" if old_body.startswith("\n") else content


def write(text: str, results: Results) -> str:
    return _MARKER.sub(
        lambda m: (
            f"<!-- figures:{m['name']} -->{render(m['name'], results, m['body'])}<!-- /figures:{m['name']} -->"
            if m["name"] in REGIONS
            else m.group(0)
        ),
        text,
    )


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _expand(path: str) -> list[str]:
    m = re.search(r"\{([^}]*)\}", path)
    if m is None:
        return [path]
    return [x for alt in m.group(1).split(",") for x in _expand(path[: m.start()] + alt + path[m.end() :])]


def read_docs(root: Path = ROOT) -> dict[str, str]:
    """The checked documents' text by their path under `root` (the repository, or a copy in a test)."""
    return {name: (root / name).read_text() for name in (*DOCS, *PATHS_ONLY) if (root / name).is_file()}


def check(docs: dict[str, str], results: Results) -> list[str]:
    """Every disagreement between the documents and the results, as lines to print (none: they agree).

    `docs` maps each document's path (as in `DOCS` and `PATHS_ONLY`) to its text."""
    problems = [f"{name} is missing" for name in (*DOCS, *PATHS_ONLY) if name not in docs]
    where: dict[str, list[str]] = {}
    for doc, text in docs.items():
        if doc in PATHS_ONLY:
            problems += [f"{doc} {p}" for p in _missing_paths(text) + _broken_links(doc, text, docs)]
            continue
        for m in _regions(text):
            name = m["name"]
            at = f"{doc} line {_line(text, m.start())}"
            if name not in REGIONS:
                problems.append(f"{at}: unknown region {name!r}; known: {', '.join(REGIONS)}")
                continue
            where.setdefault(name, []).append(doc)
            home = HOME.get(name, RESULTS_DOC)
            if doc != home:
                problems.append(f"{at}: region {name} belongs in {home}")
                continue
            try:
                want = render(name, results, m["body"])
            except (FiguresError, KeyError, ValueError) as e:
                problems.append(f"region {name}: cannot be generated: {type(e).__name__}: {e}")
                continue
            if m["body"] != want:
                # the first line that differs (a block region is a table: show the row)
                lines = zip_longest(m["body"].strip().splitlines(), want.strip().splitlines(), fillvalue="")
                said, wanted = next(((x, y) for x, y in lines if x != y), (m["body"], want))
                problems.append(
                    f"{at}: region {name} differs from the results\n"
                    f"    {doc}:  {said.strip()[:400]}\n    results: {wanted.strip()[:400]}"
                )
        problems += [f"{doc} {p}" for p in _stray_numbers(text) + _missing_paths(text)]
        problems += [f"{doc} {p}" for p in _broken_links(doc, text, docs)]
    for name in REGIONS:
        home = HOME.get(name, RESULTS_DOC)
        n = where.get(name, []).count(home)
        if home in docs and n == 0:
            problems.append(f"region {name} is not in {home} (add its markers where the figure belongs)")
        elif n > 1:
            problems.append(f"region {name} appears {n} times in {home}")
    checked = " ".join(text for doc, text in docs.items() if doc not in PATHS_ONLY)
    problems += [
        f"ALLOWED phrase {p!r} is in none of {', '.join(DOCS)} any more: drop it"
        for p in ALLOWED
        if p not in checked
    ]
    return problems


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the spans replaced by spaces (newlines kept, so line numbers hold)."""
    chars = list(text)
    for a, b in spans:
        for i in range(a, b):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def _stray_numbers(text: str) -> list[str]:
    spans = [(m.start(), m.end()) for m in _regions(text)]
    spans += [(m.start(), m.end()) for m in re.finditer(r"```.*?```", text, re.S)]  # code blocks
    spans += [(m.start(), m.end()) for m in re.finditer(r"`[^`\n]*`", text)]  # inline code: commands, names
    for phrase in ALLOWED:
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
    rest = _blank(text, spans)
    return [
        f"line {_line(rest, m.start())}: {m.group(0)!r} reads as a measurement outside any generated region "
        f"(generate it from bench/results/, or add the phrase to ALLOWED with why it is not a measurement): "
        f"…{text[max(0, m.start() - 50) : m.end() + 30].strip()}…"
        for m in _MEASURED.finditer(rest)
    ]


def _missing_paths(text: str) -> list[str]:
    out = []
    for m in _PATH.finditer(text):
        for p in _expand(m.group(1)):
            if "*" in p:
                if not list(ROOT.glob(p)):
                    out.append(f"line {_line(text, m.start())}: nothing matches {p}")
            elif not (ROOT / p).exists():
                out.append(f"line {_line(text, m.start())}: {p} does not exist")
    return out


_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated heading numbered."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", re.sub(r"```.*?```", "", text, flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _broken_links(doc: str, text: str, docs: dict[str, str]) -> list[str]:
    """Relative links that lead nowhere: to a file that is not there, or to a heading its file lacks."""
    out = []
    blanked = _blank(text, [(m.start(), m.end()) for m in re.finditer(r"```.*?```", text, re.S)])
    for m in _LINK.finditer(blanked):
        target = m["target"]
        if re.match(r"[a-z][a-z+]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        name = os.path.normpath(Path(doc).parent / path) if path else doc
        file = ROOT / name
        if path and not file.exists():
            out.append(f"line {_line(text, m.start())}: the link to {target} leads to no file ({name})")
        elif anchor and name.endswith(".md"):
            body = docs.get(name) or (file.read_text() if file.is_file() else "")
            if anchor not in _anchors(body):
                out.append(
                    f"line {_line(text, m.start())}: the link to {target} leads to no heading of {name}"
                )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when the docs and the results disagree")
    mode.add_argument("--write", action="store_true", help="rewrite the generated regions from the results")
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="where the documents are (a copy of the repository's)"
    )
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    results = Results(args.results)
    if args.write:
        for name, text in read_docs(args.root).items():
            new = write(text, results)
            if new != text:
                (args.root / name).write_text(new)
            print(f"{name}: {'rewritten' if new != text else 'already up to date'}")
    problems = check(read_docs(args.root), results)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(
            f"{len(problems)} problem(s); `python bench/figures.py --write` regenerates the regions",
            file=sys.stderr,
        )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
