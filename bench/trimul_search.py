"""A TriMul search driven through ksearch's tools, with the seconds of every call -> JSON.

    python bench/trimul_search.py [--task FOLDER] [--candidates DIR] [--out PATH] [--top-k 3] [--budget-s 540]
                                  [--skip-profile] [--export-eval]

On a GPU: create_search on GPU MODE's TriMul folder (its owner's protocol, `gpumode`, by default), the analyse
prompt read at once and again after the background baselines are in, then one round per published kernel (an
intent proposed, selected, the kernel benchmarked on it, the intent finished), profile_ncu of the best on one
workload, and final_evaluation of the best `--top-k`; with --export-eval, before it, the best exported as the
folder's submission.py (`ksearch export --submission`) and run by the folder's own eval.py in benchmark mode.
Every call records its wall seconds, and each evaluation where its seconds went (`seconds_by_step`). The JSON is rewritten after every call.

Defaults: .ext/reference-kernels/problems/bioml/trimul and .ext/K-Search/results/gpumode_trimul/*.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from gpumode_side_by_side import run_gpumode_eval, task_yml  # noqa: E402  (bench/, the script's own folder)

DEFAULT_TASK = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"
DEFAULT_CANDIDATES = ROOT / ".ext" / "K-Search" / "results" / "gpumode_trimul"
DEFAULT_OUT = ROOT / "bench" / "results" / "trimul-search-h200.json"
T = TypeVar("T")


def language_of(source: str) -> str:
    if "load_inline" in source or "cpp_extension" in source:
        return "cpp_ext"
    return "triton"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    ap.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--top-k", type=int, default=3, help="final_evaluation's top_k; 0: no final evaluation")
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--skip-profile", action="store_true", help="no profile_ncu call (it takes ~45 s)")
    ap.add_argument(
        "--export-eval",
        action="store_true",
        help="export the best as submission.py (ksearch export --submission) and run the folder's eval.py on it",
    )
    args = ap.parse_args()

    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.tools.benchmark import BenchmarkIn, benchmark
    from ksearch.tools.common import CandidateRef
    from ksearch.tools.create_search import CreateSearchIn, create_search
    from ksearch.tools.export_kernel import ExportKernelIn, export_kernel
    from ksearch.tools.final_eval import FinalEvalIn, final_evaluation
    from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
    from ksearch.tools.profile_ncu import ProfileIn, profile_ncu
    from ksearch.tools.prompting.contexts import reference_times_text
    from ksearch.tools.prompting.facts_wait import bounded
    from ksearch.tools.prompting.phases import analyse_kernel
    from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
    from ksearch.tools.select_action import SelectActionIn, select_action
    from ksearch.tools.workspace import Workspace
    from ksearch.worldmodel.models import IntentSpec

    t_start = time.perf_counter()
    files = sorted(p for p in args.candidates.glob("*.py"))
    out: dict[str, Any] = {
        "what": "a TriMul search through ksearch's tools: per-call seconds and where each evaluation's went",
        "task": str(args.task),
        "python": platform.python_version(),
        "candidates": [f.name for f in files],
        "calls": [],
    }

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=str))

    async def call(name: str, coro: Awaitable[T], **extra: Any) -> T | None:
        t0 = time.perf_counter()
        entry: dict[str, Any] = {"call": name, **extra}
        try:
            res = await coro
        except Exception as e:
            entry.update(seconds=round(time.perf_counter() - t0, 2), error=f"{type(e).__name__}: {e}"[:2000])
            entry["trace"] = traceback.format_exc()[-1500:]
            out["calls"].append(entry)
            save()
            return None
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        ev = getattr(res, "evaluation", None)
        if ev is not None:
            entry.update(
                status=ev.status,
                seconds_by_step=ev.seconds_by_step,
                protocol=ev.timing_protocol,
                speedup_vs_eager=ev.speedup_vs_eager,
                times_us={t.workload: round(t.time_us, 2) for t in ev.timings},
                flags=[f[:200] for f in ev.flags][:6],
                attempt_id=getattr(res, "attempt_id", None),
            )
        out["calls"].append(entry)
        print(f"{name}: {entry['seconds']} s {entry.get('status', '')}", flush=True)
        save()
        return res

    scratch = Path(tempfile.mkdtemp(prefix="trimul-search-"))
    sb = LocalSandbox(scratch_dir=scratch / "sb", call_timeout_s=300.0)
    ws = await Workspace.open(scratch / "k.db", sandbox=sb)
    try:
        s = await call("create_search", create_search(ws, CreateSearchIn(task=str(args.task), name="trimul")))
        if s is None:
            return
        out["timing_protocol"] = s.config.timing_protocol
        # read as an assistant reads it (MCP: the facts waited for at most facts_wait.PROMPT_WAIT_S)
        with bounded():
            first = await call(
                "analyse_kernel prompt (assistant's reading, at once)", analyse_kernel(ws, s.id)
            )
        out["analyse_prompt_at_once"] = (first or "")[-3000:]
        out["reference_times_at_once"] = await reference_times_text(ws, s)
        best: tuple[float, int, str] | None = None
        for f in files:
            if time.perf_counter() - t_start > args.budget_s - 150:
                out["calls"].append({"call": f"round for {f.name}", "skipped": "time budget"})
                continue
            src = f.read_text()
            nodes = await propose_intents(
                ws,
                ProposeIntentsIn(
                    search=s.id,
                    intents=[
                        IntentSpec(title=f"the published kernel {f.stem}", rationale="a known good kernel")
                    ],
                ),
            )
            await select_action(ws, SelectActionIn(search=s.id, node_id=nodes[0].id))
            got = await call(
                f"benchmark {f.stem}",
                benchmark(
                    ws,
                    BenchmarkIn(
                        search=s.id,
                        node_id=nodes[0].id,
                        candidate=CandidateRef(source=src, language=language_of(src)),  # type: ignore[arg-type]
                    ),
                ),
                candidate=f.stem,
            )
            await finish_intent(ws, FinishIntentIn(search=s.id, node_id=nodes[0].id))
            ev = got.evaluation if got is not None else None
            if ev is not None and ev.status == "ok" and ev.speedup_vs_eager:
                if best is None or ev.speedup_vs_eager > best[0]:
                    best = (ev.speedup_vs_eager, got.attempt_id or 0, got.candidate_id)  # type: ignore[union-attr]
        out["reference_times_later"] = await reference_times_text(ws, s)
        with bounded():
            await call(
                "analyse_kernel prompt (assistant's reading, after the rounds)", analyse_kernel(ws, s.id)
            )
        if best is not None and args.export_eval:
            # the search's best out as the folder's submission.py, run by the folder's own eval.py, unchanged
            exported = await call(
                "export submission.py (best)",
                export_kernel(ws, ExportKernelIn(search=s.id, format="submission", attempt=best[1] or None)),
            )
            if exported is not None:
                names = [f"bench{i}" for i in range(len(task_yml(args.task)["benchmarks"]))]
                t0 = time.perf_counter()
                ran = await asyncio.to_thread(run_gpumode_eval, args.task, exported.text, names, 240.0)
                out["export_eval"] = {
                    "attempt_id": exported.attempt_id,
                    "status_in_file": exported.status,
                    "helpers": exported.helpers,
                    "eval_py": ran,
                    "seconds": round(time.perf_counter() - t0, 2),
                }
                print(f"eval.py on the exported submission.py: check {ran.get('check')}", flush=True)
                save()
        if best is not None and not args.skip_profile:
            await call(
                "profile_ncu (best, first workload)",
                profile_ncu(ws, ProfileIn(search=s.id, candidate=CandidateRef(candidate_id=best[2]))),
            )
        if args.top_k < 1:
            return  # no final evaluation asked for
        t_final = time.perf_counter()
        out["final_progress"] = []

        async def progress(message: str, fraction: float) -> None:
            # where a long final evaluation is, kept as it goes: a run cut short still says where it stood
            out["final_progress"].append(
                [round(time.perf_counter() - t_final, 1), round(fraction, 3), message]
            )
            save()

        fin = await call(
            f"final_evaluation top_k={args.top_k}",
            final_evaluation(ws, FinalEvalIn(search=s.id, top_k=args.top_k), progress),
        )
        if fin is not None:
            out["final"] = [
                {
                    "attempt_id": r.attempt_id,
                    "status": r.status,
                    "speedup_vs_eager": r.speedup_vs_eager,
                    "timing_protocol": r.timing_protocol,
                    "summary_tail": re.sub(r"\s+", " ", r.summary)[-600:],
                    "seconds_by_step": getattr(r, "seconds_by_step", None),
                }
                for r in fin.rows
            ]
    finally:
        out["wall_s"] = round(time.perf_counter() - t_start, 1)
        save()
        await ws.close()


if __name__ == "__main__":
    asyncio.run(main())
