"""`ksearch model MODEL`: a whole model's hot operators as task files, searched as a suite, the winners plugged back.

The tools (ksearch.tools.model: profile_model, plug_back) do the work, in a process of their own that imports torch;
this module parses, runs the suite through the suite runner `ksearch suite run` uses (`--suite NAME`), and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ksearch.server.cli.common import DEFAULT_DB, DbOption, fail, refusals, run_async, say, tell


def register(app: typer.Typer) -> None:
    app.command("model")(model)


def model(
    target: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="A .py file defining class Model(torch.nn.Module), get_inputs() and get_init_inputs() "
            "(KernelBench style), FILE.py:Class, or pkg.module:Class",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the task files and model.json (default: MODEL-ops beside the model file)"
        ),
    ] = None,
    top: Annotated[int, typer.Option(min=1, max=50, help="Task files to write: the hottest N operators")] = 5,
    iters: Annotated[
        int | None, typer.Option(min=1, max=1000, help="Profiled forwards (default 10 on a GPU, 3 on a CPU)")
    ] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    dtype: Annotated[
        str | None,
        typer.Option(help="fp32 | fp16 | bf16: cast the model's weights and inputs (default: as built)"),
    ] = None,
    inputs: Annotated[
        str | None, typer.Option(help="MODULE:FUNCTION returning the forward's inputs (default: get_inputs)")
    ] = None,
    init_inputs: Annotated[
        str | None,
        typer.Option("--init-inputs", help="MODULE:FUNCTION returning the constructor's arguments"),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(help="Run the written tasks as a suite of this name now (as `ksearch suite run` would)"),
    ] = None,
    policy: Annotated[str | None, typer.Option(help="The suite's policy (with --suite)")] = None,
    rounds: Annotated[int | None, typer.Option(min=1, help="Rounds per task (with --suite)")] = None,
    attempts: Annotated[int | None, typer.Option(min=1, help="Attempts per task (with --suite)")] = None,
    plug_back: Annotated[
        str | None,
        typer.Option(
            "--plug-back",
            help="Put the winners back instead: a suite's name (its searches' best kernels) or a folder of "
            "ModelNew files (as `ksearch suite export` writes); needs the task files of an earlier `ksearch model`",
        ),
    ] = None,
    plugged: Annotated[
        Path | None, typer.Option("-o", "--output", help="The plugged model's file (default: OUT/plugged.py)")
    ] = None,
    no_timing: Annotated[
        bool, typer.Option("--no-timing", help="Check the plugged model; time nothing")
    ] = False,
    budget_s: Annotated[
        float | None, typer.Option("--budget-s", min=0.01, max=120, help="Seconds per timed callable")
    ] = None,
    atol: Annotated[
        float | None, typer.Option(min=0, help="Model-level atol (default 10x KernelBench's)")
    ] = None,
    rtol: Annotated[
        float | None, typer.Option(min=0, help="Model-level rtol (default 10x KernelBench's)")
    ] = None,
    no_facts: Annotated[
        bool,
        typer.Option("--no-facts", help="Skip the written tasks' facts (bound, roofline): a subprocess each"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Profile a model, rank its operators (and fusible pairs: a matmul with its activation, a residual add with its
    norm) by their share of the forward's time (CUDA time on a GPU; CPU time without one, and it says so), and write
    the hottest as KernelBench-format task files; `--suite NAME` searches them as a suite at once, and
    `--plug-back SUITE_OR_FOLDER` puts the winning kernels in place of the operators, checks the plugged model
    against the original on fresh inputs and times both (exit 1 when a kernel is refused or the check fails)."""
    from ksearch.tools.model import PlugBackIn, ProfileModelIn

    if plug_back is not None and suite is not None:
        raise fail("--suite runs the search; --plug-back puts its winners back afterwards: give one of them")
    if device not in ("auto", "cpu", "cuda"):
        raise fail(f"--device {device}: accepted: auto, cpu, cuda")
    if dtype is not None and dtype not in ("fp32", "fp16", "bf16"):
        raise fail(f"--dtype {dtype}: accepted: fp32, fp16, bf16")
    if plug_back is not None:
        with refusals():
            inp = PlugBackIn(
                model=target,
                kernels=plug_back,
                out=str(out) if out else None,
                plugged=str(plugged) if plugged else None,
                device=device,
                timing=not no_timing,
                budget_s=budget_s,
                atol=atol,
                rtol=rtol,
            )
        result = run_async(_plug(inp, db))
        say(json.dumps(result.model_dump(mode="json"), indent=1) if as_json else result.text)
        if not result.ok:
            raise typer.Exit(1)
        return
    with refusals():
        pin = ProfileModelIn(
            model=target,
            out=str(out) if out else None,
            top=top,
            iters=iters,
            device=device,
            dtype=dtype,
            inputs=inputs,
            init_inputs=init_inputs,
            suite=suite,
            facts=not no_facts,
        )
    from ksearch.tools.model import profile_model

    tell(f"profiling {target} (its own process; the written tasks' facts after)")
    prof = run_async(profile_model(pin))
    say(json.dumps(prof.model_dump(mode="json"), indent=1) if as_json else prof.text)
    if suite is None or not prof.written:
        return
    _run_suite(suite, prof.tasks_list, db, policy=policy, rounds=rounds, attempts=attempts)
    say(f"then plug the winners back: {prof.plug_back_command}")


def _is_folder(kernels: str) -> bool:
    return Path(kernels).expanduser().exists() or "/" in kernels or kernels.endswith(".py")


async def _plug(inp: Any, db: Path) -> Any:
    from ksearch.tools.model import plug_back

    if _is_folder(inp.kernels):
        return await plug_back(inp)  # a folder (or what was meant as one): no database
    from ksearch.server.cli.steer import workspace

    async with workspace(db) as ws:
        return await plug_back(inp, ws)


def _run_suite(
    name: str, tasks_list: str, db: Path, *, policy: str | None, rounds: int | None, attempts: int | None
) -> None:
    """The written tasks as a suite, run by the suite runner as `ksearch suite run TASKS.txt --name NAME` runs it."""
    from ksearch.server.cli.suite import run_and_report
    from ksearch.server.driver.suite import SuiteRunArgs
    from ksearch.tools.suites.suite import SuiteBudgets, SuiteIn

    with refusals():
        new = SuiteIn(
            name=name,
            sources=[tasks_list],
            budgets=SuiteBudgets(rounds=rounds, attempts=attempts),
            run={"policy": policy} if policy else {},
        )
        args = SuiteRunArgs(db=db, suite=new)
    run_and_report(args, db, name)
