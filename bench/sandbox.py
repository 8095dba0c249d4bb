"""Sandbox figures on one GPU -> bench/results/sandbox-h200.json.

    python bench/sandbox.py [--out PATH] [--budget-s 330] [--parts e2e,repeat,aa,ncu,faults,ext]

Measures, on three built-in tasks (softmax, row_sum, swiglu):
  e2e     seconds per candidate (compile + correctness + benchmark, one workload, warm worker) for
          Triton and NVRTC CUDA, each a new kernel source (cold kernel compile) and a repeated one;
  repeat  one >=100 us kernel benchmarked 10 times: spread of the medians;
  aa      two candidates differing only in a comment, compared 50 times with compare();
  ncu     the benchmark's median vs Nsight Compute's gpu__time_duration for the same kernel;
  faults  illegal address, infinite loop, host segfault, GPU OOM, Python exception: each reported as
          its kind, and the next candidate evaluates correctly;
  ext     a CUDA C++ torch extension: first build, then the same source again.
The JSON is rewritten after every part, so a failure or the time budget loses only what remains.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.gpu.sandbox.local import LocalSandbox  # noqa: E402
from ksearch.gpu.task import Task  # noqa: E402
from ksearch.gpu.tasks import load_task  # noqa: E402
from ksearch.gpu.timing.compare import compare  # noqa: E402
from ksearch.worldmodel.models import Candidate, EvalSettings, Evaluation  # noqa: E402

CANDS = Path(__file__).parent / "sandbox_candidates"
DEFAULT_OUT = Path(__file__).parent / "results" / "sandbox-h200.json"
# One search workload per task: all >= 100 us on an H200.
WORKLOADS = {"softmax": "32768x4096", "row_sum": "16384x16384", "swiglu": "32768x4096"}
NVRTC = {"softmax": "softmax_nvrtc", "row_sum": "row_sum_nvrtc", "swiglu": "swiglu_nvrtc"}


def source(name: str) -> str:
    return (CANDS / f"{name}.py").read_text()


def triton_variant(src: str, k: int) -> str:
    """The same Triton module with a comment inside the first kernel body: a new kernel source."""
    lines = src.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("@triton.jit"):
            j = next(j for j in range(i, len(lines)) if lines[j].startswith("def "))
            while not lines[j].rstrip().endswith(":"):  # a signature over several lines
                j += 1
            return "\n".join([*lines[: j + 1], f"    # variant {k}", *lines[j + 1 :]]) + "\n"
    raise ValueError("no @triton.jit kernel in the source")


def cuda_variant(src: str, k: int) -> str:
    """The same NVRTC module with a comment in the CUDA source: NVRTC compiles it anew."""
    return src.replace('SRC = r"""\n', f'SRC = r"""\n// variant {k}\n', 1)


def summary(ev: Evaluation) -> dict[str, Any]:
    t = ev.timings[0] if ev.timings else None
    return {
        "status": ev.status,
        "seconds": round(ev.seconds, 3),
        "median_us": round(t.median_us, 2) if t else None,
        "ci_us": [round(t.ci_low_us, 2), round(t.ci_high_us, 2)] if t else None,
        "n": t.n if t else None,
        "speedup_vs_eager": round(t.speedup_vs_eager, 3) if t and t.speedup_vs_eager else None,
        "speedup_vs_compile": round(t.speedup_vs_compile, 3) if t and t.speedup_vs_compile else None,
        "roofline_fraction": round(t.roofline_fraction, 3) if t and t.roofline_fraction else None,
        "error": (ev.error or "")[:400] or None,
        "flags": [f[:200] for f in ev.flags if not f.startswith("note: timings")],
    }


def stats(xs: list[float]) -> dict[str, float | int | None]:
    if not xs:
        return {"n": 0, "median": None}
    return {
        "n": len(xs),
        "median": round(statistics.median(xs), 3),
        "min": round(min(xs), 3),
        "max": round(max(xs), 3),
    }


class Bench:
    def __init__(
        self, out: Path, budget_s: float, tasks: list[str] | None = None, smoke: bool = False
    ) -> None:
        self.out = out
        self.smoke = smoke  # plumbing check on the CPU: smoke workloads, few rounds
        self.aa_rounds = 50
        self.t0 = time.monotonic()
        self.deadline = self.t0 + budget_s
        self.report: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "parts": {},
            "python": platform.python_version(),
        }
        self.tasks: dict[str, Task] = {n: load_task(n) for n in (tasks or list(WORKLOADS))}
        self.workloads = {n: "smoke" if smoke else WORKLOADS[n] for n in WORKLOADS}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        self.report["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report, indent=1))

    async def timed(self, sb: LocalSandbox, cand: Candidate, task: Task, st: EvalSettings) -> dict[str, Any]:
        """evaluate() with the seconds spent in each phase (from its progress reports)."""
        marks: list[tuple[str, float]] = []

        async def progress(msg: str, frac: float) -> None:
            marks.append((msg.split(":")[0], time.monotonic()))

        ev = await sb.evaluate(cand, task, st, progress=progress)
        end = time.monotonic()
        phases: dict[str, float] = {}
        for (name, t), (_, t_next) in zip(marks, [*marks[1:], ("end", end)], strict=True):
            phases[name] = round(phases.get(name, 0.0) + t_next - t, 3)
        return {**summary(ev), "phases_s": phases}

    def settings(self, task: str, *, seed: int = 11, trials: int = 3) -> EvalSettings:
        return EvalSettings(seed=seed, trials=trials, workloads=[self.workloads[task]])

    async def run(self, sb: LocalSandbox, parts: list[str]) -> None:
        for part in parts:
            if self.left() < 20:
                self.report["parts"][part] = {"skipped": "out of the time budget"}
                self.save()
                continue
            t = time.monotonic()
            try:
                self.report["parts"][part] = await getattr(self, f"part_{part}")(sb)
            except Exception:  # a broken part is recorded; the others still run
                self.report["parts"][part] = {"error": traceback.format_exc()[-3000:]}
            self.report["parts"][part]["part_seconds"] = round(time.monotonic() - t, 1)
            self.save()

    # -------------------------------------------------------------------------------- parts
    async def part_setup(self, sb: LocalSandbox) -> dict[str, Any]:
        t = time.monotonic()
        await sb.start()
        started = time.monotonic() - t
        t = time.monotonic()
        hw = await sb.hardware()
        self.report["hardware"] = hw.model_dump()
        ceil = time.monotonic() - t
        # baselines (eager, torch.compile) are measured once per task/workload/environment and cached;
        # paying for them here keeps them out of the per-candidate figures
        base = {}
        for name, task in self.tasks.items():
            t = time.monotonic()
            ev = await sb.evaluate(Candidate.of(task.seeds["triton"], "triton"), task, self.settings(name))
            base[name] = {"seconds_incl_baselines": round(time.monotonic() - t, 1), **summary(ev)}
        return {"worker_start_s": round(started, 1), "ceilings_s": round(ceil, 1), "seed_candidates": base}

    async def part_e2e(self, sb: LocalSandbox) -> dict[str, Any]:
        out: dict[str, Any] = {
            "what": "seconds of sandbox.evaluate(), warm worker, one workload, 3 correctness "
            "trials, default timing settings; 'new' = a new kernel source each time "
            "(cold Triton/NVRTC compile), 'repeat' = the same source again"
        }
        for lang in ("triton", "cuda"):
            new, rep, rows = [], [], []
            for name, task in self.tasks.items():
                base = task.seeds["triton"] if lang == "triton" else source(NVRTC[name])
                for k in range(3):
                    src = triton_variant(base, k + 100) if lang == "triton" else cuda_variant(base, k + 100)
                    row = await self.timed(
                        sb, Candidate.of(src, lang), task, self.settings(name, seed=20 + k)
                    )
                    new.append(row["seconds"])
                    rows.append({"task": name, "kind": "new", **row})
                again = Candidate.of(src + "\n# same kernels, new module\n", lang)
                row = await self.timed(sb, again, task, self.settings(name, seed=30))
                rep.append(row["seconds"])
                rows.append({"task": name, "kind": "repeat", **row})
            ok = all(r["status"] == "ok" for r in rows)
            out[lang] = {
                "new_kernel_s": stats(new),
                "repeat_s": stats(rep),
                "all_ok": ok,
                "target_median_s": 1.5,
                "meets_target": ok and statistics.median(new) <= 1.5,
                "rows": rows,
            }
        return out

    async def part_repeat(self, sb: LocalSandbox) -> dict[str, Any]:
        name = "softmax" if "softmax" in self.tasks else next(iter(self.tasks))
        task = self.tasks[name]
        wl = "smoke" if self.smoke else ("8192x32768" if name == "softmax" else WORKLOADS[name])
        cand = Candidate.of(task.seeds["triton"], "triton")
        meds, ns = [], []
        for i in range(10):
            ev = await sb.evaluate(cand, task, EvalSettings(seed=40 + i, trials=1, workloads=[wl]))
            if ev.status != "ok":
                return {"error": f"evaluation {i} was {ev.status}: {ev.error}"}
            meds.append(ev.timings[0].median_us)
            ns.append(ev.timings[0].n)
        m = statistics.median(meds)
        spread = (max(meds) - min(meds)) / m
        return {
            "kernel": f"{name} Triton seed on {wl}",
            "medians_us": [round(x, 2) for x in meds],
            "n": ns,
            "median_of_medians_us": round(m, 2),
            "spread_max_minus_min_rel": round(spread, 5),
            "stdev_rel": round(statistics.stdev(meds) / m, 5),
            "target_spread": 0.01,
            "meets_target": spread <= 0.01,
        }

    async def part_aa(self, sb: LocalSandbox) -> dict[str, Any]:
        task = self.tasks["row_sum"]
        seed_src = task.seeds["triton"]
        a = Candidate.of(seed_src + "\n# copy A\n", "triton")
        b = Candidate.of(seed_src + "\n# copy B\n", "triton")
        rounds = 6 if self.smoke else self.aa_rounds
        called_faster, ratios = 0, []
        for i in range(rounds):
            if self.left() < 15:
                break
            st = EvalSettings(seed=60 + i, trials=1, workloads=[self.workloads["row_sum"]])
            first, second = (a, b) if i % 2 == 0 else (b, a)
            e1 = await sb.evaluate(first, task, st)
            e2 = await sb.evaluate(second, task, st)
            ea, eb = (e1, e2) if first is a else (e2, e1)
            if ea.status != "ok" or eb.status != "ok":
                return {"error": f"round {i}: {ea.status}/{eb.status}: {ea.error or eb.error}"}
            v_ab, v_ba = compare(ea, eb), compare(eb, ea)
            called_faster += int(v_ab.faster or v_ba.faster)
            ratios.append(v_ab.ratio)
        done = len(ratios)
        rate = called_faster / done if done else None
        return {
            "comparisons": done,
            "called_faster": called_faster,
            "rate": rate,
            "target_rate": 0.02,
            "meets_target": rate is not None and rate <= 0.02 and done == rounds,
            "rounds_planned": rounds,
            "ratio_a_over_b": stats([r for r in ratios if r]),
            "workload": f"row_sum {self.workloads['row_sum']}",
        }

    async def part_ncu(self, sb: LocalSandbox) -> dict[str, Any]:
        out: dict[str, Any] = {}
        pairs = [(n, "triton", self.tasks[n].seeds["triton"]) for n in ("softmax",) if n in self.tasks]
        pairs.append(("row_sum", "cuda", source(NVRTC["row_sum"])))
        for name, lang, src in pairs:
            task, wl = self.tasks[name], self.workloads[name]
            cand = Candidate.of(src, lang)
            ev = await sb.evaluate(cand, task, EvalSettings(seed=80, trials=1, workloads=[wl]))
            prof = await sb.profile(cand, task, wl)
            med = ev.timings[0].median_us if ev.timings else None
            rel = (med - prof.duration_us) / prof.duration_us if med and prof.duration_us else None
            out[f"{name}/{lang}"] = {
                "benchmark_median_us": med,
                "ncu_gpu_time_duration_us": prof.duration_us,
                "kernel": prof.kernel,
                "relative_difference": round(rel, 4) if rel is not None else None,
                "meets_target_5pct": rel is not None and abs(rel) <= 0.05,
                "profile": prof.model_dump(exclude={"metrics"}),
            }
        return out

    async def part_faults(self, sb: LocalSandbox) -> dict[str, Any]:
        task = self.tasks["row_sum"]
        st = EvalSettings(seed=90, trials=1, workloads=["smoke"])
        good = Candidate.of(task.seeds["triton"], "triton")
        expect = {
            "fault_illegal_address": ("crash", r"illegal memory access|illegal address"),
            "fault_infinite_loop": ("timeout", r"no answer within"),
            "fault_segfault": ("crash", r"SIGSEGV"),
            "fault_gpu_oom": ("error", r"out of memory"),
            "fault_exception": ("error", r"ValueError: block size must divide"),
        }
        out: dict[str, Any] = {}
        for name, (status, pattern) in expect.items():
            ev = await sb.evaluate(Candidate.of(source(name), "triton"), task, st, timing=False)
            after = await sb.evaluate(good, task, st)
            kind_ok = ev.status == status and re.search(pattern, ev.error or "", re.I) is not None
            out[name] = {
                "status": ev.status,
                "expected_status": status,
                "reported_as_its_kind": kind_ok,
                "seconds": round(ev.seconds, 2),
                "error": (ev.error or "")[:500],
                "next_candidate_status": after.status,
                "next_candidate_ok": after.status == "ok",
            }
        ev = await sb.evaluate(
            Candidate.of(source("cheat_side_stream"), "triton"),
            task,
            EvalSettings(seed=91, trials=1, workloads=[self.workloads["row_sum"]]),
        )
        out["cheat_side_stream"] = {
            "status": ev.status,
            "flagged": ev.status == "flagged",
            "flags": [f[:300] for f in ev.flags],
        }
        out["all_reported_as_kind"] = all(
            v["reported_as_its_kind"] for k, v in out.items() if k.startswith("fault")
        )
        out["pool_recovered_every_time"] = all(
            v["next_candidate_ok"] for k, v in out.items() if k.startswith("fault")
        )
        return out

    async def part_ext(self, sb: LocalSandbox) -> dict[str, Any]:
        task = self.tasks["row_sum"]
        src = source("row_sum_ext")
        first = await sb.evaluate(Candidate.of(src, "cpp_ext"), task, self.settings("row_sum", seed=100))
        again = await sb.evaluate(
            Candidate.of(src + "\n# same extension, new module\n", "cpp_ext"),
            task,
            self.settings("row_sum", seed=101),
        )
        return {
            "what": "torch extension via load_inline: first build (cold cache) then the same sources again",
            "first": summary(first),
            "again": summary(again),
        }


async def amain(args: argparse.Namespace) -> None:
    bench = Bench(Path(args.out), args.budget_s, smoke=args.smoke)
    parts = ["setup", *[p for p in args.parts.split(",") if p]]
    sb = LocalSandbox(n_workers=1, call_timeout_s=args.call_timeout_s)
    bench.report["settings"] = {
        "call_timeout_s": args.call_timeout_s,
        "budget_s": args.budget_s,
        "parts": parts,
    }
    try:
        await bench.run(sb, parts)
    finally:
        await sb.close()
        bench.save()
    print(json.dumps(bench.report, indent=1)[:20000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument(
        "--budget-s", type=float, default=330.0, help="stop starting parts after this many seconds"
    )
    ap.add_argument("--parts", default="e2e,repeat,aa,ncu,faults,ext")
    ap.add_argument(
        "--call-timeout-s", type=float, default=20.0, help="per-call timeout (the hang test waits this)"
    )
    ap.add_argument(
        "--smoke", action="store_true", help="smoke workloads only: checks the script itself, on a CPU"
    )
    asyncio.run(amain(ap.parse_args()))


if __name__ == "__main__":
    main()
