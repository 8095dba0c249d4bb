"""`ksearch suite`: many searches under one command (run, resume, status with KernelBench's fast_p, list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ksearch.server.cli.common import (
    DEFAULT_DB,
    DbOption,
    NewDbOption,
    RayOption,
    fail,
    refusals,
    run_async,
    say,
    tell,
)
from ksearch.server.cli.steer import workspace
from ksearch.tools.suites.suite import (
    SuiteBudgets,
    SuiteIn,
    export_suite,
    list_suites,
    report_text,
    suite_report,
)

if TYPE_CHECKING:
    from ksearch.server.driver.suite import SuiteRunArgs


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Suites: many searches under one command (a KernelBench level folder, a FlashInfer-Trace dataset, "
        "GPU MODE problem folders, a list of tasks or a file naming them), one per slot at a time.",
        no_args_is_help=True,
    )
    app.add_typer(sub, name="suite")

    @sub.command("run")
    def run(
        sources: Annotated[
            list[str] | None,
            typer.Argument(help="Tasks, task folders, level folders, datasets, or .txt files naming them"),
        ] = None,
        name: Annotated[str | None, typer.Option(help="The new suite's name")] = None,
        resume: Annotated[
            str | None, typer.Option("--resume", help="Continue this suite (name or id)")
        ] = None,
        parallel: Annotated[
            int | None,
            typer.Option(min=1, max=64, help="Searches at once (default: one per visible GPU; 1 on a CPU)"),
        ] = None,
        gpus: Annotated[
            str | None,
            typer.Option("--gpus", help="Comma-separated GPU ids to use (default: every visible one)"),
        ] = None,
        ray: RayOption = None,
        policy: Annotated[
            str | None, typer.Option(help="anthropic | openai | tuner (default as `ksearch run`)")
        ] = None,
        model: Annotated[str | None, typer.Option(help="Model name for anthropic/openai")] = None,
        base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint")] = None,
        language: Annotated[str, typer.Option(help="triton | cuda | cpp_ext")] = "triton",
        rounds: Annotated[int | None, typer.Option(min=1, help="Rounds per task")] = None,
        attempts: Annotated[int | None, typer.Option(min=1, help="Attempts per task")] = None,
        wall: Annotated[float | None, typer.Option(min=1, help="Wall seconds per task")] = None,
        tokens: Annotated[int | None, typer.Option(min=1, help="Model tokens per task")] = None,
        usd: Annotated[float | None, typer.Option(min=0.0, help="Model spend per task, USD")] = None,
        suite_wall: Annotated[
            float | None, typer.Option("--suite-wall", min=1, help="Wall seconds, whole suite")
        ] = None,
        suite_tokens: Annotated[
            int | None, typer.Option("--suite-tokens", min=1, help="Tokens, whole suite")
        ] = None,
        suite_usd: Annotated[
            float | None, typer.Option("--suite-usd", min=0.0, help="USD, whole suite")
        ] = None,
        stagnation: Annotated[int | None, typer.Option(min=1, help="As `ksearch run --stagnation`")] = None,
        max_attempts: Annotated[
            int | None, typer.Option("--max-attempts", min=1, help="Attempts per intent")
        ] = None,
        timing_protocol: Annotated[
            str | None, typer.Option("--timing-protocol", help="ksearch | gpumode | kernelbench | flashinfer")
        ] = None,
        no_final: Annotated[
            bool, typer.Option("--no-final", help="Skip each search's final evaluation")
        ] = False,
        starts: Annotated[
            Path | None,
            typer.Option(
                "--starts",
                help="A folder of your own starting kernels, one per task named as its file (19_ReLU.py for "
                "19_ReLU.py): each task's search starts from its kernel (as `ksearch run --start`)",
            ),
        ] = None,
        db: NewDbOption = DEFAULT_DB,
    ) -> None:
        """Run a new suite, or resume one (`--resume NAME`): done tasks are not run again, a task left running
        continues its search, a failed one is tried again. Ctrl-C stops it; nothing committed is lost."""
        from ksearch.server.driver.suite import SuiteRunArgs

        if (resume is None) == (not sources):
            raise fail("give the suite's sources (with --name), or --resume NAME to continue one; not both")
        if starts is not None and not starts.is_dir():
            raise fail(f"--starts {starts}: not a folder; give a folder holding one starting kernel per task")
        if starts is not None and resume is not None:
            raise fail("--starts is set when a suite is made; a resumed suite keeps its own")
        if usd == 0 or suite_usd == 0:
            raise fail("a money budget of 0 runs nothing; give a positive --usd / --suite-usd, or none")
        run_opts: dict[str, Any] = {
            k: v
            for k, v in {
                "policy": policy,
                "model": model,
                "base_url": base_url,
                "language": language,
                "stagnation": stagnation,
                "max_attempts": max_attempts,
                "timing_protocol": timing_protocol,
                "final": False if no_final else None,
                "starts": str(starts.resolve()) if starts is not None else None,
            }.items()
            if v is not None
        }
        with refusals():
            new = None
            if sources:
                if name is None:
                    raise fail("a new suite needs --name")
                budgets = SuiteBudgets(
                    rounds=rounds,
                    attempts=attempts,
                    wall_s=wall,
                    tokens=tokens,
                    usd=usd,
                    suite_wall_s=suite_wall,
                    suite_tokens=suite_tokens,
                    suite_usd=suite_usd,
                )
                chosen = [g.strip() for g in gpus.split(",") if g.strip()] if gpus is not None else None
                new = SuiteIn(
                    name=name,
                    sources=sources,
                    budgets=budgets,
                    parallel=parallel,
                    gpus=chosen,
                    ray=ray,
                    run=run_opts,
                )
            args = SuiteRunArgs(db=db, suite=new, resume=resume, ray=ray)
        run_and_report(args, db, name or resume or "")

    @sub.command("status")
    def status(
        suite: Annotated[str, typer.Argument(help="Suite name or id")],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Per task: its search, status, the best's correctness and speedups vs eager and torch.compile (in its
        protocol); then the suite's fast_p (KernelBench's definition) vs both."""

        async def go() -> str:
            async with workspace(db) as ws:
                r = await suite_report(ws, suite)
                return json.dumps(r.model_dump(mode="json"), indent=1) if as_json else report_text(r)

        say(run_async(go()))

    @sub.command("export")
    def export(
        suite: Annotated[str, typer.Argument(help="Suite name or id")],
        folder: Annotated[Path, typer.Argument(help="Where to write the kernels (created if missing)")],
        db: DbOption = DEFAULT_DB,
    ) -> None:
        """Each task's best kernel in its owner's format: a FlashInfer-Bench Solution JSON, a GPU MODE
        submission.py, a KernelBench ModelNew file; a task without one is listed with the reason."""

        async def go() -> str:
            async with workspace(db) as ws:
                rows = await export_suite(ws, suite, folder)
            wrote = sum(1 for r in rows if r.path)
            lines = [f"wrote {wrote} of {len(rows)} tasks' kernels to {folder}"]
            lines += [
                f"  {r.idx:>3} {Path(r.task).name}: {r.path or 'skipped: ' + ' '.join(r.skipped.split())}"
                for r in rows
            ]
            return "\n".join(lines)

        say(run_async(go()))

    @sub.command("list")
    def list_(db: DbOption = DEFAULT_DB) -> None:
        """The suites in this database, with how far each got."""

        async def go() -> str:
            async with workspace(db) as ws:
                out = []
                for s in await list_suites(ws):
                    n = {
                        st: sum(1 for t in s.tasks if t.status == st)
                        for st in ("done", "running", "failed", "refused")
                    }
                    out.append(
                        f"{s.name}: {len(s.tasks)} tasks ({n['done']} done, {n['running']} running, {n['failed']} failed, "
                        f"{n['refused']} refused)"
                    )
                return "\n".join(out) or "no suite yet (`ksearch suite run --name NAME TASKS...` starts one)"

        say(run_async(go()))


def run_and_report(args: SuiteRunArgs, db: Path, name: str) -> None:
    """Run a suite (new or resumed) until it ends or Ctrl-C stops it, then print its report table. A refusal (an
    unknown suite, a busy database) exits 2 (1) with its reason; an interrupt says how to resume."""
    from ksearch.server.cli.interrupt import Interrupted, run_stoppable
    from ksearch.server.driver.suite import run_suite

    resume = f"resume with `ksearch suite run --resume {name}`"
    with refusals():
        try:
            suite = run_stoppable(
                run_suite(args, tell),
                stopping="stopping: abandoning the attempts in flight and saving the suite",
                # a stop cut short after its grace (attempts on Ray actors slow to cancel) can be resumed too
                hint=lambda: resume,
            )
        except Interrupted as e:
            say(f"stopped: interrupted ({e}); {resume}")
            raise typer.Exit(e.code) from None
    say(run_async(_report_text(db, suite.name)))


async def _report_text(db: Path, name: str) -> str:
    async with workspace(db) as ws:
        return report_text(await suite_report(ws, name))
