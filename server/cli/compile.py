"""`ksearch compile TASK FILE`: compile one candidate file without running it, outside any search.

Parses, calls ksearch.tools.files.compile (compile_kernel's work without a store) and prints its report:
diagnostics on the candidate's lines, each kernel's registers, spills, shared memory and occupancy. Exits 0
when it compiles, 1 when it does not, 2 when the input is refused (unknown task, unreadable file, a source
that does not parse).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import console, refusals, run_async, say, tell
from ksearch.worldmodel.models import CompileReport, KernelResources
from ksearch.worldmodel.render import kernel_resources

LOG_LINES = 40  # the raw compiler output shown when a failure has no diagnostics


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_file)


def _kernel_line(k: KernelResources) -> str:
    parts = [f"kernel {k.name}: {kernel_resources(k)}"]
    launch = [
        f"{v} {what}"
        for v, what in (
            (k.num_warps, "warps"),
            (k.num_stages, "stages"),
            (k.threads_per_block, "threads/block"),
        )
        if v is not None
    ]
    if launch:
        parts.append(", ".join(launch))
    if (o := k.occupancy) is not None:
        parts.append(
            f"occupancy {o.occupancy:.0%} on {o.arch} ({o.blocks_per_sm} blocks, {o.warps_per_sm} warps "
            f"per SM; limited by {o.limiter})"
        )
    if k.config:
        parts.append(k.config)
    return "; ".join(parts)


def describe(report: CompileReport) -> list[str]:
    """The report in lines a person can act on: the verdict, each diagnostic, each kernel."""
    how = report.mode or report.language
    lines = [
        f"compile: {report.verdict()} in {report.seconds:.2f}s ({how})"
        + (" [cached]" if report.cached else "")
    ]
    for d in report.diagnostics:
        where = ", ".join(
            x for x in (f"line {d.line}" if d.line else "", f"column {d.column}" if d.column else "") if x
        )
        about = f" [{d.kernel}]" if d.kernel else ""
        lines.append(f"  {d.severity}: {where + ': ' if where else ''}{d.message}{about}")
    lines.extend(f"  {_kernel_line(k)}" for k in report.kernels)
    if not report.ok and not report.diagnostics and report.log.strip():
        lines.append("compiler output:")
        lines.extend(f"  {ln}" for ln in report.log.strip().splitlines()[-LOG_LINES:])
    if report.ok and not report.kernels:
        lines.append("  no kernel resources reported (nothing was compiled to machine code here)")
    return lines


def compile_file(
    task: Annotated[str, typer.Argument(help="Built-in task name or a task path")],
    file: Annotated[
        Path,
        typer.Argument(
            help="Candidate source file (a module defining ModelNew), or a FlashInfer-Bench Solution JSON"
        ),
    ],
    language: Annotated[
        str, typer.Option("--language", "-l", help="triton | cuda | cpp_ext | auto")
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the full compile report as JSON")] = False,
) -> None:
    """Compile one candidate file without running it: diagnostics, registers, spills, shared memory."""
    from ksearch.tools.files.compile import CompileFileIn, compile_file

    with refusals():  # a bad option's message names it and what is accepted
        inp = CompileFileIn(
            task=task,
            path=str(file),
            language=language,  # checked by the model, with its message
        )
    out = run_async(compile_file(inp))
    if as_json:
        console.print_json(out.report.model_dump_json())
    else:
        if out.note:
            tell(out.note)
        for line in describe(out.report):
            say(line)
    raise typer.Exit(0 if out.report.ok else 1)
