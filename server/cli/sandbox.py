"""`ksearch eval TASK FILE`: evaluate one candidate file on its own, outside any search.

Parses, calls ksearch.tools.files.evaluate and prints what was measured, on what, and how noisy it was;
`--json` prints the full Evaluation. This process never imports torch: the work runs in sandbox worker
processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import console, err_console, refusals, run_async
from ksearch.worldmodel.models import EvalSettings, Evaluation, Language


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_file)


def detect_language(source: str) -> Language:
    """The language `--language auto` runs a source as (imported when used: `ksearch --help` stays quick)."""
    from ksearch.tools.files.candidate import detect_language as detect

    return detect(source)


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
    workloads_file: Annotated[
        Path | None,
        typer.Option(
            "--workloads",
            help="FlashInfer-Bench workloads JSONL for a definition whose workloads are not beside it "
            "(default: the one found beside the definition or in its dataset)",
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
        str | None,
        typer.Option(
            "--timing",
            help="ksearch (L2 flushed, launch covered, rotated inputs, median) | gpumode | kernelbench | "
            "flashinfer (as that owner's evaluator times: its mean); default: the task's owner's",
        ),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision",
            help="KernelBench's precision for a KernelBench problem file: fp32 | fp16 | bf16 (inputs and weights "
            "cast to it, KernelBench's tolerance for it); default: the file's inputs as drawn",
        ),
    ] = None,
) -> None:
    """Evaluate one candidate file: compile, check against the reference, and time it."""
    from ksearch.tools.files.evaluate import EvaluateFileIn, evaluate_file

    with refusals():  # a bad option's message names it and what is accepted
        inp = EvaluateFileIn(
            task=task,
            path=str(file),
            language=language,  # checked by the model, with its message
            workloads=workload or None,
            trials=trials,
            seed=seed,
            timing=not no_timing,
            profile=profile,
            timing_protocol=timing_protocol,  # likewise
            precision=precision,  # likewise
            workloads_file=str(workloads_file) if workloads_file is not None else None,
        )

    async def progress(msg: str, frac: float) -> None:
        if not as_json:
            err_console.print(f"[dim]{frac:4.0%} {msg}[/dim]")

    out = run_async(evaluate_file(inp, progress=progress))
    ev = out.evaluation
    if as_json:
        console.print_json(ev.model_dump_json())
    else:
        if out.note:
            err_console.print(out.note, highlight=False, markup=False)
        how = "inputs and weights cast to it, judged by its tolerance for it"
        at = [f"precision: KernelBench's {precision} ({how})"] if precision else []
        for line in [*_header(ev, out.settings, not no_timing), *at, f"candidate isolation: {out.isolation}"]:
            console.print(line, highlight=False, markup=False)
        console.print(out.summary, highlight=False, markup=False)
        console.print(f"evaluation took {ev.seconds:.1f} s", highlight=False)
    raise typer.Exit(0 if ev.status == "ok" else 1)
