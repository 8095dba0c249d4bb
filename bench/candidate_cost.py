"""What a new candidate costs, end to end through the tools a host calls, with every check on.

    python bench/candidate_cost.py [--tasks softmax,rmsnorm,kb,trimul] [--n 20] [--batch 4] [--out FILE] [--smoke]

Per task and language (Triton; CUDA where the built-in has a CUDA seed): `create_search`, the first benchmark (the
seed on the root, baselines included), then N new candidates benchmarked one at a time as attempts of a claimed
intent (each a variant of the seed whose kernel source differs, so each is compiled anew and runs in a process that
ran no other candidate's code), then `--batch` more in one `benchmark_batch` call against the same number one at a
time. Side by side in the same run: the same kind of candidates with the per-candidate process rule off (the floor:
`fresh_per_candidate=False`), and, for the KernelBench file, KernelBench's own `eval_kernel_against_ref` per
candidate where its package is at .ext/kb (the anchor users know).

Tasks: a built-in name; `kb` (bench/host_flow_tasks/cross_entropy.py, a KernelBench-style problem, with its Triton
ModelNew); `trimul` (GPU MODE's TriMul folder at .ext/reference-kernels with K-Search's published `zeyushen` kernel at
.ext/K-Search). Every figure is a wall time measured here, on this machine; the JSON names the device and says how
spread the readings were (p50, p90, max). `--smoke`: the CPU interpreter, row_sum's Triton seed only, 1 candidate, batch 2
(the CI's check that the script runs; its timings say nothing of a GPU). Writes bench/results/candidate-cost-{machine}.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ksearch.gpu.sandbox.local import LocalSandbox  # noqa: E402
from ksearch.tools.benchmark import BenchmarkIn, benchmark  # noqa: E402
from ksearch.tools.benchmark_batch import BatchItem, BenchmarkBatchIn, benchmark_batch  # noqa: E402
from ksearch.tools.common import CandidateRef  # noqa: E402
from ksearch.tools.create_search import CreateSearchIn, DriverSettings, create_search  # noqa: E402
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents  # noqa: E402
from ksearch.tools.select_action import SelectActionIn, select_action  # noqa: E402
from ksearch.tools.workspace import Workspace  # noqa: E402
from ksearch.worldmodel.models import IntentSpec  # noqa: E402

RESULTS = HERE / "results"
KB_TASK = HERE / "host_flow_tasks" / "cross_entropy.py"
KB_CANDIDATE = HERE / "host_flow_tasks" / "candidates" / "cross_entropy.py"
TRIMUL_TASK = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"
TRIMUL_KERNEL = ROOT / ".ext" / "K-Search" / "results" / "gpumode_trimul" / "zeyushen.py"
KB_SRC = ROOT / ".ext" / "kb" / "src"
# what the issue asks of a new small-task candidate and of TriMul's, per candidate (seconds)
TARGETS = {"small": {"p50": 1.0, "p90": 2.0}, "trimul": {"p50": 5.0}}


# ------------------------------------------------------------------------------------------------- candidates


def variant(source: str, i: int, language: str) -> str:
    """`source` with its kernel's text changed and nothing else: a CUDA source gets a comment line (a new NVRTC/nvcc
    compile), a Triton source an unused constant in its first jitted function (a new Triton compile)."""
    if language in ("cuda", "cpp_ext"):
        m = re.search(r'(r?""")', source)
        if m is None:
            return source + f"\n# variant {i}\n"
        return source[: m.end()] + f"// variant {i}\n" + source[m.end() :]
    jit = source.find("@triton.jit")
    if jit < 0:
        raise SystemExit("a Triton candidate without @triton.jit: cannot vary its kernel")
    header = re.compile(r"def \w+\((?:.|\n)*?\)\s*(?:->\s*[^:\n]+)?:[ \t]*(?:#[^\n]*)?\n").search(source, jit)
    assert header is not None, "no def after @triton.jit"
    body = source[header.end() :]
    indent = re.match(r"([ \t]*)", body.split("\n", 1)[0] if body.strip() else "    ")
    pad = indent.group(1) if indent and indent.group(1) else "    "
    return source[: header.end()] + f"{pad}_ks_variant = {i}\n" + body


def _specs(names: list[str], languages: list[str]) -> list[dict[str, Any]]:
    """(task reference, language, seed-or-candidate source, size class) per task and language."""
    from ksearch.gpu.tasks import load_task

    out: list[dict[str, Any]] = []
    for name in names:
        if name == "kb":
            out.append(
                {"task": str(KB_TASK), "label": "kb cross_entropy", "language": "triton",
                 "source": KB_CANDIDATE.read_text(), "size": "small", "anchor": True}
            )  # fmt: skip
        elif name == "trimul":
            if not (TRIMUL_TASK / "task.yml").is_file() or not TRIMUL_KERNEL.is_file():
                out.append(
                    {
                        "task": "trimul",
                        "label": "trimul",
                        "missing": f"needs {TRIMUL_TASK} and {TRIMUL_KERNEL}",
                    }
                )
                continue
            out.append(
                {"task": str(TRIMUL_TASK), "label": "trimul", "language": "triton",
                 "source": TRIMUL_KERNEL.read_text(), "size": "trimul"}
            )  # fmt: skip
        else:
            t = load_task(name)
            for lang in languages:
                if lang in t.seeds:
                    out.append({"task": name, "label": f"{name} {lang}", "language": lang, "source": t.seeds[lang],
                                "size": "small"})  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------------- measuring


def _pcts(xs: list[float]) -> dict[str, float | int]:
    if not xs:
        return {"n": 0}
    s = sorted(xs)

    def at(q: float) -> float:
        return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]

    return {
        "n": len(s),
        "p50": round(statistics.median(s), 3),
        "p90": round(at(0.9), 3),
        "max": round(s[-1], 3),
    }


def _row(wall: float, out: Any) -> dict[str, Any]:
    ev = out.evaluation
    return {
        "wall_s": round(wall, 3),
        "evaluation_s": round(ev.seconds or 0.0, 3),
        "status": ev.status,
        "audited": ev.audited,
        "steps": ev.seconds_by_step,
        "attempt_id": out.attempt_id,
    }


async def _search(ws: Workspace, spec: dict[str, Any], name: str, n: int) -> tuple[dict[str, Any], int]:
    """create_search, the seed's first benchmark on the root, one claimed intent: their walls, and the node."""
    t0 = time.perf_counter()
    s = await create_search(
        ws,
        CreateSearchIn(task=spec["task"], name=name, language=spec["language"], stagnation=100, rounds=2),
        DriverSettings(max_attempts_per_intent=n + 20),
    )
    created = time.perf_counter() - t0
    root = await ws.store.root(s.id)
    seed = CandidateRef(source=spec["source"], language=spec["language"])
    t0 = time.perf_counter()
    first = await benchmark(ws, BenchmarkIn(search=name, node_id=root.id, candidate=seed, author="tuner"))
    first_s = time.perf_counter() - t0
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search=name, intents=[IntentSpec(title="variants")])
    )
    await select_action(ws, SelectActionIn(search=name, node_id=intent.id))
    env = first.evaluation.env
    return {
        "create_search_s": round(created, 3),
        "first_benchmark": _row(first_s, first),
        "environment": env.model_dump() if env is not None else None,
    }, intent.id


async def _one_at_a_time(ws: Workspace, spec: dict[str, Any], name: str, node: int, ids: range) -> list[dict]:
    rows = []
    for i in ids:
        cand = CandidateRef(source=variant(spec["source"], i, spec["language"]), language=spec["language"])
        t0 = time.perf_counter()
        out = await benchmark(ws, BenchmarkIn(search=name, node_id=node, candidate=cand, author="tuner"))
        rows.append(_row(time.perf_counter() - t0, out))
    return rows


async def _measure(spec: dict[str, Any], n: int, batch: int, fresh: bool, work: Path) -> dict[str, Any]:
    """One search on a fresh database and sandbox: its start, N candidates one at a time, a batch against as many
    one at a time. `fresh`: the per-candidate process rule (False: the floor)."""
    db = work / f"k-{'fresh' if fresh else 'floor'}-{spec['label'].replace(' ', '_')}.db"
    sb = LocalSandbox(scratch_dir=work / f"sb-{db.stem}", fresh_per_candidate=None if fresh else False)
    ws = await Workspace.open(db, sandbox=sb)
    offset = 0 if fresh else 10_000  # the floor's kernels are new to the compiler caches too
    try:
        name = "cost"
        start, node = await _search(ws, spec, name, n + 2 * batch)
        singles = await _one_at_a_time(ws, spec, name, node, range(offset + 1, offset + n + 1))
        out: dict[str, Any] = {
            **start,
            "candidates": singles,
            "wall_s": _pcts([r["wall_s"] for r in singles]),
        }
        if batch > 1 and fresh:
            tail = await _one_at_a_time(ws, spec, name, node, range(offset + n + 1, offset + n + batch + 1))
            items = [
                BatchItem(candidate=CandidateRef(source=variant(spec["source"], i, spec["language"]),
                                                 language=spec["language"]), node_id=node)
                for i in range(offset + n + batch + 1, offset + n + 2 * batch + 1)
            ]  # fmt: skip
            t0 = time.perf_counter()
            res = await benchmark_batch(ws, BenchmarkBatchIn(search=name, items=items, author="tuner"))
            batch_s = time.perf_counter() - t0
            one_s = sum(r["wall_s"] for r in tail)
            out["batch"] = {
                "size": batch,
                "batch_s": round(batch_s, 3),
                "one_at_a_time_s": round(one_s, 3),
                "per_minute_batch": round(60 * batch / batch_s, 2),
                "per_minute_one_at_a_time": round(60 * batch / one_s, 2),
                "statuses": [r.result.evaluation.status if r.result else r.refused for r in res.results],
            }
        return out
    finally:
        await ws.close()


def _anchor(spec: dict[str, Any], n: int) -> dict[str, Any]:
    """KernelBench's own evaluation of the same kind of candidate, per candidate (its package at .ext/kb)."""
    if not spec.get("anchor"):
        return {"not_run": "only for the KernelBench file"}
    try:
        import torch

        if not torch.cuda.is_available():
            return {"not_run": "KernelBench's evaluation needs a CUDA GPU"}
        sys.path.insert(0, str(KB_SRC))
        from kernelbench.eval import eval_kernel_against_ref  # type: ignore[import-not-found]
    except ImportError as e:
        return {"not_run": f"KernelBench is not importable from {KB_SRC}: {e}"}
    import inspect

    ref = Path(spec["task"]).read_text()
    accepted = inspect.signature(eval_kernel_against_ref).parameters
    kw: dict[str, Any] = {"num_correct_trials": 3, "num_perf_trials": 100, "measure_performance": True,
                          "verbose": False, "backend": spec["language"]}  # fmt: skip
    kw = {k: v for k, v in kw.items() if k in accepted}
    walls, results = [], []
    build = Path(tempfile.mkdtemp(prefix="kb-build-"))
    for i in range(1, n + 1):
        src = variant(spec["source"], 20_000 + i, spec["language"])
        t0 = time.perf_counter()
        if "build_dir" in accepted:
            kw["build_dir"] = str(build / str(i))
        r = eval_kernel_against_ref(ref, src, **kw)
        walls.append(time.perf_counter() - t0)
        results.append(
            {"compiled": getattr(r, "compiled", None), "correctness": getattr(r, "correctness", None)}
        )
    return {"wall_s": _pcts(walls), "walls": [round(w, 3) for w in walls], "results": results[:3]}


def _verdict(rows: dict[str, Any], size: str) -> dict[str, Any]:
    target = TARGETS[size]
    got = rows.get("wall_s", {})
    return {
        k: {"target_s": v, "got_s": got.get(k), "met": got.get(k) is not None and got[k] <= v}
        for k, v in target.items()
    }


async def main_async(a: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="ksearch-candidate-cost-"))
    report: dict[str, Any] = {
        "what": "seconds per new candidate through the tools (benchmark on a claimed intent, every check on)",
        "machine": platform.node(),
        "smoke": a.smoke,
        "n": a.n,
        "batch": a.batch,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tasks": [],
    }
    try:
        for spec in _specs(a.tasks.split(","), a.languages.split(",")):
            row: dict[str, Any] = {"task": spec["label"]}
            if "missing" in spec:
                row["not_run"] = spec["missing"]
            else:
                row["fresh"] = await _measure(spec, a.n, a.batch, True, work)
                row["targets"] = _verdict(row["fresh"], spec["size"])
                if a.floor:
                    row["floor"] = await _measure(spec, a.n, 0, False, work)
                row["anchor"] = _anchor(spec, a.n) if a.anchor else {"not_run": "--no-anchor"}
            report["tasks"].append(row)
            print(json.dumps({k: row.get(k) for k in ("task", "targets", "not_run")}), flush=True)
            _write(
                a.out, report
            )  # each task as it ends: a run cut short by its device call keeps what it measured
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="softmax,rmsnorm,kb,trimul")
    ap.add_argument("--n", type=int, default=20, help="new candidates one at a time, per task and language")
    ap.add_argument("--batch", type=int, default=4, help="candidates in the benchmark_batch call (0: none)")
    ap.add_argument(
        "--no-floor", dest="floor", action="store_false", help="skip the per-candidate-process-off run"
    )
    ap.add_argument("--no-anchor", dest="anchor", action="store_false", help="skip KernelBench's evaluation")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--languages", default="triton,cuda", help="of a built-in's seeds, the languages measured"
    )
    ap.add_argument(
        "--smoke", action="store_true", help="CPU interpreter, row_sum in Triton, 1 candidate, batch 2"
    )
    a = ap.parse_args()
    if a.smoke:
        os.environ.setdefault("KSEARCH_CPU_MODE", "1")
        a.tasks, a.n, a.batch, a.anchor, a.languages = "row_sum", 1, 2, False, "triton"
    a.out = a.out or RESULTS / f"candidate-cost-{platform.node()}.json"
    report = asyncio.run(main_async(a))
    _write(a.out, report)
    print(f"wrote {a.out}")


def _write(out: Path, report: dict[str, Any]) -> None:
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
