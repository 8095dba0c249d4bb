"""`ksearch run`: the autonomous driver; `ksearch serve`: the MCP server."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import (
    DEFAULT_DB,
    BankOption,
    NewDbOption,
    RayOption,
    TokenOption,
    check_new_db,
    console,
    fail,
    refusals,
    say,
    use_bank,
)
from ksearch.worldmodel.errors import KsearchError, StoreBusy
from ksearch.worldmodel.models import COMPILE_MODES, KERNELBENCH_PRECISIONS, LANGUAGES, TIMING_PROTOCOLS


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("serve")(serve)


def run(
    task: Annotated[str | None, typer.Argument(help="Built-in task name (e.g. softmax) or a path")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this search (id or name)")] = None,
    new: Annotated[
        bool, typer.Option("--new", help="Start a new search even if one on this task is unfinished")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Name of a new search")] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="anthropic | openai | tuner | replay (default: anthropic "
            "when ANTHROPIC_API_KEY is set, else tuner)"
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name for anthropic/openai")] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"),
    ] = None,
    replay: Annotated[Path | None, typer.Option(help="JSONL of recorded responses (policy replay)")] = None,
    record: Annotated[Path | None, typer.Option(help="Record every policy response to this JSONL")] = None,
    language: Annotated[str, typer.Option(help="triton | cuda | cpp_ext")] = "triton",
    rounds: Annotated[int | None, typer.Option(min=1, help="Rounds for this run")] = None,
    attempts: Annotated[
        int | None, typer.Option(min=1, help="Stop when the search has this many attempts")
    ] = None,
    wall: Annotated[float | None, typer.Option(min=1, help="Wall-time budget in seconds")] = None,
    tokens: Annotated[int | None, typer.Option(min=1, help="Token budget")] = None,
    usd: Annotated[float | None, typer.Option(min=0.0, help="Money budget in USD")] = None,
    target: Annotated[float | None, typer.Option(min=0.0, help="Stop at this speedup vs eager")] = None,
    stagnation: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Attempts without a significant gain before an intent's refine phase ends (default 5; a resumed "
            "search keeps its own)",
        ),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option(
            "--max-attempts", min=1, help="Attempt cap per intent (default 8; a resumed search keeps its own)"
        ),
    ] = None,
    branching: Annotated[
        int | None,
        typer.Option(min=1, max=16, help="Implementations written at once per intent (default 1)"),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Input seed of a new search (secret random default)")
    ] = None,
    compile_mode: Annotated[
        str | None,
        typer.Option(
            "--compile-mode",
            help="torch.compile baseline of a new search: default | max-autotune | max-autotune-no-cudagraphs "
            "(always static, compiled per workload; max-autotune is the stronger one, its compile paid once and cached)",
        ),
    ] = None,
    timing_protocol: Annotated[
        str | None,
        typer.Option(
            "--timing-protocol",
            help="How a new search times candidates: ksearch | gpumode | kernelbench | flashinfer (default: the "
            "task's owner's evaluator's; ksearch for built-in and ksearch-native tasks). Fixed once created",
        ),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision",
            help="KernelBench's precision for a new search on a KernelBench problem file: fp32 | fp16 | bf16 "
            "(inputs and weights cast to it, KernelBench's tolerance for it); default: the file's inputs as drawn. "
            "Fixed once created",
        ),
    ] = None,
    no_final: Annotated[bool, typer.Option("--no-final", help="Skip the final evaluation")] = False,
    start: Annotated[
        Path | None,
        typer.Option(
            "--start",
            help="A kernel of your own a new search starts from: submitted on its root before the first round "
            "(as `ksearch submit`), so the rounds build on it; the tuner tunes the TUNABLES it declares",
        ),
    ] = None,
    plain: Annotated[bool, typer.Option("--plain", help="Plain log lines instead of the live panel")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON at the end")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Round lines with the whole selection score")
    ] = False,
    db: NewDbOption = DEFAULT_DB,
    bank: BankOption = None,
    ray: RayOption = None,
) -> None:
    """Run the three-phase search loop (select → refine → update) on a task, then a final evaluation.

    Ctrl-C stops it cleanly (the attempt in flight is abandoned, the search is marked stopped) and says how
    to resume; a second Ctrl-C quits at once.
    """
    from ksearch.server.cli.interrupt import Interrupted, run_stoppable
    from ksearch.server.driver.run_main import RunArgs, run_main

    use_bank(bank)
    from ksearch.worldmodel.models import Search

    if (task is None) == (resume is None):
        raise fail("give a TASK to search on, or --resume SEARCH to continue one (not both)")
    if language not in LANGUAGES:  # checked here: a resumed search would otherwise ignore it silently
        raise fail(f"unknown language {language!r}; accepted: {', '.join(LANGUAGES)}")
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise fail(f"unknown --compile-mode {compile_mode!r}; accepted: {', '.join(COMPILE_MODES)}")
    if timing_protocol is not None and timing_protocol not in TIMING_PROTOCOLS:
        raise fail(f"unknown --timing-protocol {timing_protocol!r}; accepted: {', '.join(TIMING_PROTOCOLS)}")
    if precision is not None and precision not in KERNELBENCH_PRECISIONS:
        raise fail(f"unknown --precision {precision!r}; accepted: {', '.join(KERNELBENCH_PRECISIONS)}")
    args = RunArgs(
        task=task,
        resume=resume,
        new=new,
        name=name,
        policy=policy,
        model=model,
        base_url=base_url,
        replay=replay,
        record=record,
        language=language,
        rounds=rounds,
        attempts=attempts,
        wall=wall,
        tokens=tokens,
        usd=usd,
        target=target,
        stagnation=stagnation,
        max_attempts=max_attempts,
        branching=branching,
        seed=seed,
        compile_mode=compile_mode,
        timing_protocol=timing_protocol,
        precision=precision,
        final=not no_final,
        plain=plain or not sys.stdout.isatty(),
        verbose=verbose,
        db=db,
        db_flag="" if db == DEFAULT_DB else f"--db {shlex.quote(str(db))}",
        ray=ray,
        start=start,
    )
    searched: list[Search] = []

    def resume_hint() -> str:
        return f"resume with `ksearch run --resume {searched[0].name}`" if searched else ""

    try:
        res = run_stoppable(
            run_main(args, on_search=searched.append),
            stopping="stopping: abandoning the attempt in flight and saving the search",
            hint=resume_hint,
        )
    except Interrupted as e:
        if searched:
            say(f"stopped: interrupted ({e}). Search {searched[0].name} is saved; {resume_hint()}")
        else:
            say(f"stopped: interrupted ({e}) before a search was chosen; nothing was changed")
        raise typer.Exit(e.code) from None
    except StoreBusy as e:  # committed work is kept; only the step in flight is lost
        again = f"--resume {resume}" if resume else task
        raise fail(f"{e}. The search stopped here; continue it with `ksearch run {again}`", code=1) from e
    except (KsearchError, ValueError) as e:  # ValueError: an argument pydantic refused
        raise fail(str(e)) from e
    if as_json:
        console.print_json(json.dumps(res.model_dump(mode="json")))
    if res.stop_reason.startswith("policy stopped"):
        raise typer.Exit(3)


def serve(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio")] = False,
    host: Annotated[str, typer.Option(help="HTTP bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port")] = 8765,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            help="Write the host's decisions (intents, code, edits) to this JSONL file: "
            "`ksearch run --policy replay --replay FILE` plays them through the built-in driver",
        ),
    ] = None,
    token: TokenOption = None,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            envvar="KSEARCH_LOG",
            show_envvar=True,
            help="Append the server log (each tool call's start, phases with their seconds, and end; warnings) to "
            "this file instead of stderr",
            show_default=False,
        ),
    ] = None,
    allow_unjailed: Annotated[
        bool,
        typer.Option(
            "--allow-unjailed",
            help="With a non-loopback --host: serve even where candidates cannot be jailed (the refusal "
            "without it says what they could then do)",
        ),
    ] = False,
    db: NewDbOption = DEFAULT_DB,
    bank: BankOption = None,
    ray: RayOption = None,
) -> None:
    """Serve ksearch's tools, resources and prompts over MCP (stdio for IDE hosts, or HTTP)."""
    use_bank(bank)
    check_new_db(db)
    from ksearch.server.access import http_access
    from ksearch.server.mcp.server import serve as _serve

    with refusals():  # exit 2 with the refusal's message
        # the token rule is checked before anything is opened or bound; the jail rule before binding
        access = http_access(host, token, "ksearch serve") if http else None
        _serve(
            db, http=access, port=port, record=record, allow_unjailed=allow_unjailed, ray=ray, log_file=log
        )
