"""`ksearch export SEARCH`: a search, or one of its kernels, out of the database.

The whole search as JSON or an HTML report (server/cli/export.py builds both), or a kernel in its task owner's
format, for the owner's evaluator to run as it stands: `--solution` (FlashInfer-Bench, ksearch.tools.files.solutions),
`--submission` (a GPU MODE folder's submission.py) and `--kernelbench` (a KernelBench ModelNew file), both by
ksearch.tools.export_kernel. `--attempt N` picks an attempt instead of the best: any attempt's record for JSON and
the report, a correct one for the kernel formats (how a search run on a CPU, whose attempts are never timed and so
never a best, gets its kernels out, marked as such).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import DEFAULT_DB, DbOption, fail, run_async, tell
from ksearch.server.cli.steer import SearchArg, workspace


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    search: SearchArg,
    as_json: Annotated[bool, typer.Option("--json", help="JSON of the whole search (the default)")] = False,
    as_html: Annotated[bool, typer.Option("--html", help="A self-contained HTML report")] = False,
    as_solution: Annotated[
        bool,
        typer.Option(
            "--solution",
            help="The kernel as a FlashInfer-Bench Solution JSON (a search on a FlashInfer-Bench definition)",
        ),
    ] = False,
    as_submission: Annotated[
        bool,
        typer.Option(
            "--submission",
            help="The kernel as a GPU MODE submission.py, which the task folder's eval.py runs as it stands "
            "(a search on a GPU MODE folder)",
        ),
    ] = False,
    as_kernelbench: Annotated[
        bool,
        typer.Option(
            "--kernelbench",
            help="The kernel as a KernelBench ModelNew file, which KernelBench's evaluation runs as it stands "
            "(a search on a KernelBench-format task file)",
        ),
    ] = False,
    attempt_id: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=1,
            help="This attempt instead of the best: its record (JSON, report), or, for the kernel formats, its "
            "kernel (a correct attempt; on a CPU, one correct on the interpreter, marked so)",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="File to write (default: stdout)")
    ] = None,
    no_llm_text: Annotated[
        bool, typer.Option("--no-llm-text", help="JSON: leave out prompts and responses")
    ] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Export a search: JSON (tree, attempts, sources, edits, LLM calls) or an HTML report (tree, score over
    rounds, best path, best kernel and its evaluation, every attempt, spend); or its kernel, in its task owner's
    format: a FlashInfer-Bench Solution JSON, a GPU MODE submission.py or a KernelBench ModelNew file."""
    from ksearch.server.cli.export import export_attempt_json, export_html, export_json
    from ksearch.server.cli.kernels import check_output
    from ksearch.tools.export_kernel import ExportKernelIn, export_kernel
    from ksearch.tools.files.solutions import export_solution
    from ksearch.worldmodel.errors import KsearchError

    if as_json + as_html + as_solution + as_submission + as_kernelbench > 1:
        raise fail("give one of --json, --html, --solution, --submission or --kernelbench")
    kernel = as_solution or as_submission or as_kernelbench
    html = as_html or (
        not as_json and not kernel and output is not None and output.suffix.lower() in (".html", ".htm")
    )
    if output is not None:
        check_output(output)
    notes: list[str] = []

    async def go() -> str:
        async with workspace(db) as ws:
            s = await ws.search(search)
            if not kernel:
                if html:
                    return await export_html(ws, s.id, attempt_id)
                if attempt_id is not None:
                    return await export_attempt_json(ws, s.id, attempt_id)
                return await export_json(ws, s.id, llm_text=not no_llm_text)
            try:
                if as_solution:
                    return (await export_solution(ws, s.id, attempt_id)).solution_json
                fmt = "submission" if as_submission else "kernelbench"
                out = await export_kernel(ws, ExportKernelIn(search=s.id, format=fmt, attempt=attempt_id))
            except KsearchError as e:  # nothing to write out, not in this format, or it needs ksearch itself
                raise fail(str(e), code=1) from None
            notes.append(f"attempt #{out.attempt_id} ({out.language}): {out.status}")
            notes.extend(out.notes)
            return out.text

    text = run_async(go())
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text, encoding="utf-8")
        tell(f"wrote {output} ({len(text):,} characters)")
    for note in notes:  # on stderr: stdout is the file itself when no -o is given
        tell(note)
