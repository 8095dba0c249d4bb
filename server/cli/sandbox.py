"""`ksearch eval TASK FILE`: evaluate one candidate file on its own, outside any search.

Prints what was measured, on what, and how noisy it was; `--json` prints the full Evaluation.
This process never imports torch: the work runs in sandbox worker processes.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Annotated, cast

import typer

from ksearch.gpu.task import TaskError
from ksearch.server.cli.common import console, err_console, fail, run_async
from ksearch.worldmodel.models import LANGUAGES, Candidate, EvalSettings, Evaluation, Language


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_file)


def detect_language(source: str) -> str:
    """cuda if the file uses ksearch.gpu.nvrtc, cpp_ext if it builds a torch extension, else triton."""
    if re.search(r"\bload_inline\b|\bcpp_ext\b", source):
        return "cpp_ext"
    if re.search(r"\bnvrtc\b", source):
        return "cuda"
    return "triton"


def _header(ev: Evaluation, settings: EvalSettings, timing: bool) -> list[str]:
    env = ev.env
    lines = []
    if env is not None:
        where = "the Triton CPU interpreter (no GPU here)" if env.cpu_mode else env.device
        versions = ", ".join(
            f"{k} {v}"
            for k, v in (
                ("driver", env.driver),
                ("CUDA", env.cuda),
                ("torch", env.torch),
                ("triton", env.triton),
            )
            if v
        )
        lines.append(f"measured on {where}" + (f" ({versions})" if versions else ""))
    lines.append(
        f"correctness: {settings.trials} trial(s) per workload on fresh inputs from seed {settings.seed}; "
        "fresh allocations poisoned with NaN (best effort) so unwritten outputs show; inputs checked for mutation"
    )
    if timing and env is not None and env.cpu_mode:
        lines.append(
            "timing: a few host-clock timings of the Triton interpreter per workload: functional only, "
            "never comparable with GPU timings"
        )
    elif timing and settings.timing_protocol == "gpumode":
        means = ", ".join(f"{t.workload} {t.mean_us:.1f} us" for t in ev.timings if t.mean_us is not None)
        lines.append(
            "timing: as the task's GPU MODE evaluator times (one data set from its seeds, the first call checked, "
            "up to 100 calls on that data between a synchronize and CUDA events); its statistic, the mean: "
            + (means or "none")
        )
    elif timing:
        flush = "L2 flushed before each call, " if settings.flush_l2 else ""
        lines.append(
            f"timing: {flush}{settings.input_sets} rotating input sets, {settings.warmup} warm-up calls excluded, "
            f"{settings.min_reps}-{settings.max_reps} reps until the median's 95% CI is within "
            f"±{settings.target_rel_ci:.0%} or {settings.time_budget_s:g} s pass"
        )
    return lines


def eval_file(
    task: Annotated[str, typer.Argument(help="Built-in task name or a task path")],
    file: Annotated[
        Path,
        typer.Argument(
            help="Candidate source file (a module defining ModelNew), or a FlashInfer-Bench Solution JSON"
        ),
    ],
    workload: Annotated[
        list[str] | None,
        typer.Option(
            "--workload",
            "-w",
            help="Workload name (repeatable); default: the search workloads (the smoke one without a GPU)",
        ),
    ] = None,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="Check correctness only")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full Evaluation as JSON")] = False,
    language: Annotated[
        str, typer.Option("--language", "-l", help="triton | cuda | cpp_ext | auto")
    ] = "auto",
    trials: Annotated[
        int, typer.Option("--trials", min=1, max=20, help="Fresh-input trials per workload")
    ] = 3,
    seed: Annotated[int | None, typer.Option("--seed", help="Input seed (default: random)")] = None,
    profile: Annotated[
        bool, typer.Option("--profile", help="Also run Nsight Compute on the first workload")
    ] = False,
    timing_protocol: Annotated[
        str,
        typer.Option(
            "--timing",
            help="ksearch (L2 flushed, launch covered, rotated inputs, median) | gpumode (as a GPU MODE "
            "task's own eval.py times: reports its mean)",
        ),
    ] = "ksearch",
) -> None:
    """Evaluate one candidate file: compile, check against the reference, and time it."""
    from ksearch.gpu.sandbox import LocalSandbox
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.fib_solution import (
        SolutionError,
        candidate_from_solution_text,
        looks_like_solution,
    )
    from ksearch.tools.common import summarize

    try:
        t = load_task(task)
    except TaskError as exc:
        raise fail(str(exc)) from None
    try:
        source = file.read_text()
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    lang = detect_language(source) if language == "auto" else language
    if lang not in LANGUAGES:
        raise fail(f"unknown language {language!r}; accepted: auto, {', '.join(LANGUAGES)}")
    if looks_like_solution(source):
        # a FlashInfer-Bench Solution: its spec says the language, its entry point what `run` calls
        try:
            converted = candidate_from_solution_text(source, t, str(file))
        except SolutionError as exc:
            raise fail(str(exc)) from None
        source, lang = converted.source, converted.language
        if not as_json:
            err_console.print(converted.how, highlight=False, markup=False)
    if timing_protocol not in ("ksearch", "gpumode"):
        raise fail(f"unknown timing protocol {timing_protocol!r}; accepted: ksearch, gpumode")
    names = [w.name for w in t.workloads]
    if workload:
        unknown = [w for w in workload if w not in names]
        if unknown:
            raise fail(f"unknown workload(s) {unknown} for task {t.name!r}; it has: {', '.join(names)}")

    async def go() -> tuple[Evaluation, EvalSettings, str]:
        sb = LocalSandbox()
        try:
            chosen = list(workload or [])
            if not chosen:
                chosen = [t.smoke().name] if sb.cpu_mode else [w.name for w in t.by_split("search")]
            settings = EvalSettings(
                seed=seed if seed is not None else secrets.randbits(31),
                trials=trials,
                workloads=chosen,
                timing_protocol=timing_protocol,
            )

            async def progress(msg: str, frac: float) -> None:
                if not as_json:
                    err_console.print(f"[dim]{frac:4.0%} {msg}[/dim]")

            ev = await sb.evaluate(
                Candidate.of(source, cast(Language, lang)),  # checked against LANGUAGES above
                t,
                settings,
                timing=not no_timing,
                profile_workload=chosen[0] if profile else None,
                progress=progress,
            )
            return ev, settings, sb.isolation
        finally:
            await sb.close()

    ev, settings, isolation = run_async(go())
    if as_json:
        console.print_json(ev.model_dump_json())
    else:
        for line in [*_header(ev, settings, not no_timing), f"candidate isolation: {isolation}"]:
            console.print(line, highlight=False, markup=False)
        console.print(summarize(ev), highlight=False, markup=False)
        console.print(f"evaluation took {ev.seconds:.1f} s", highlight=False)
    raise typer.Exit(0 if ev.status == "ok" else 1)
