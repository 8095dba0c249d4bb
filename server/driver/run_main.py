"""Wire `ksearch run`: open the store, find or create the search, build the policy, run the driver."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ksearch.server.driver.display import Display, LiveDisplay, log_console
from ksearch.server.driver.loop import Driver, DriverOptions, DriverResult
from ksearch.server.driver.policies import PolicyError, default_policy_name, make_policy
from ksearch.tools.common import refuse_without_gpu
from ksearch.tools.create_search import CreateSearchIn, DriverSettings, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.solutions import not_a_candidate
from ksearch.tools.loop.runs import check_run_free, keep_run_options
from ksearch.tools.submit_kernel import SubmitKernelIn, submit_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Search


class RunArgs(BaseModel):
    task: str | None = None
    resume: str | None = None
    new: bool = False
    name: str | None = None
    policy: str | None = None
    model: str | None = None
    base_url: str | None = None
    replay: Path | None = None
    record: Path | None = None
    language: str = "triton"
    rounds: int | None = None
    attempts: int | None = None
    wall: float | None = None
    tokens: int | None = None
    usd: float | None = None
    target: float | None = None
    stagnation: int | None = None  # None: a new search's default (5), a resumed one's own
    max_attempts: int | None = None  # None: 8, or a resumed search's own
    branching: int | None = None  # None: 1, or a resumed search's own
    seed: int | None = None
    compile_mode: str | None = None  # of a new search's torch.compile baseline; None: "default"
    timing_protocol: str | None = None  # of a new search; None: the task's owner's
    precision: str | None = None  # KernelBench's precision of a new search; None: the file's inputs as drawn
    final: bool = True
    plain: bool = True
    verbose: bool = False  # round lines with the whole selection score
    db: Path
    gpus: list[str] | None = None  # the GPUs its sandbox may use (a suite's slot); None: every visible one
    ray: str | None = (
        None  # a Ray cluster (auto | HOST:PORT): candidates run on its actors (gpus: actor indices)
    )
    log: Path | None = None  # the run's plain lines go to this file instead of the terminal (a suite's task)
    start: Path | None = None  # a kernel of one's own a new search starts from (submitted on its root first)
    db_flag: str = ""  # "--db PATH" where the command line named a database: the next-step commands repeat it


async def _find(ws: Workspace, a: RunArgs) -> Search | None:
    """The search to continue: the one named by --resume, or an unfinished one on the same task."""
    if a.resume is not None:
        return await ws.search(int(a.resume) if a.resume.isdecimal() else a.resume)
    assert a.task is not None
    task = ws.task(a.task)
    ref = task.name if task.builtin else str(task.source_path.resolve())
    if not a.new and a.name is None:
        unfinished = [s for s in await ws.records.list_searches() if s.task == ref and s.status != "done"]
        if unfinished:
            return unfinished[-1]  # same task, same db: continue where it stopped
    return None


async def _create(ws: Workspace, a: RunArgs, policy_name: str) -> Search:
    assert a.task is not None
    return await create_search(
        ws,
        CreateSearchIn(
            task=a.task,
            name=a.name,
            language=a.language,
            policy=policy_name,
            model=a.model,
            rounds=a.rounds or 10,
            stagnation=a.stagnation or 5,
            seed=a.seed,
            compile_mode=a.compile_mode or "default",
            timing_protocol=a.timing_protocol,
            precision=a.precision,
        ),
        DriverSettings(
            max_attempts_per_intent=a.max_attempts or 8,
            branching=a.branching or 1,
            base_url=a.base_url,
            replay=_path(a.replay),
            record=_path(a.record),
        ),
    )


def _start_source(
    a: RunArgs, found: Search | None, why_not: Callable[[str], str | None] | None
) -> tuple[str, str] | None:
    """(name, source) of `--start`, read and checked before anything is made (`why_not`: why a text is no
    candidate for the task; a file that is none would leave a search without its start); refused with a resumed
    search (it already has its code: its next round builds on its best)."""
    if a.start is None:
        return None
    if found is not None:
        raise ToolFailure(
            f"--start begins a new search from {a.start.name}, but this run continues search {found.name}; give "
            "--new to start another search from it, or leave --start out to continue"
        )
    try:
        text = a.start.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ToolFailure(
            f"--start {a.start}: cannot read it ({type(e).__name__}: {e}); give a Python file defining the task's "
            "entry point"
        ) from None
    if not text.strip():
        raise ToolFailure(f"--start {a.start} is empty; give a Python file defining the task's entry point")
    why = why_not(text) if why_not is not None else None
    if why is not None:
        raise ToolFailure(f"--start {a.start} is no candidate for this task: {why}; nothing was made")
    return a.start.name, text


async def _submit_start(ws: Workspace, s: Search, start: tuple[str, str], display: Display) -> None:
    """The starting kernel, submitted on the new search's root as a person's kernel (`ksearch submit`), so that
    the first round builds on it (the tuner tunes what it declares)."""
    name, text = start
    root = await ws.records.root(s.id)
    out = await submit_kernel(ws, SubmitKernelIn(search=s.id, source=text, name=name, node_id=root.id))
    said = f"start: {name} submitted on the root as attempt #{out.attempt_id}: {out.summary.splitlines()[0]}"
    if out.evaluation.status != "ok":
        # rounds build on correct code only: say so here, not later as a missing seed
        said += (
            f" — not a correct kernel, so the rounds do not build on it (see `ksearch attempt {s.name} "
            f"{out.attempt_id}`); fix it and start again with --new"
        )
    display.event(said)


def _path(p: Path | None) -> str | None:
    return None if p is None else str(p.resolve())


def remembered(a: RunArgs, found: Search | None) -> tuple[RunArgs, dict[str, Any]]:
    """A resumed run's options: what the command line gives, else what the search kept from its earlier runs
    (policy, model, endpoint, replay and record files, stagnation, attempt cap, branching); and the changes the
    command line makes to the search's configuration (kept for its next resume)."""
    if found is None:
        return a, {}
    c = found.config
    given = {
        "model": a.model,
        "base_url": a.base_url,
        "replay": _path(a.replay),
        "record": _path(a.record),
        "stagnation": a.stagnation,
        "max_attempts_per_intent": a.max_attempts,
        "branching": a.branching,
    }
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None and v != getattr(c, k)}
    same_policy = a.policy is None or a.policy == c.policy
    if not same_policy:
        # another policy: the model, endpoint and replay file were the old one's, not this one's
        changes.update(policy=a.policy, model=a.model, base_url=a.base_url, replay=_path(a.replay))
    merged = a.model_copy(
        update={
            "policy": a.policy or c.policy,
            "model": a.model or (c.model if same_policy else None),
            "base_url": a.base_url or (c.base_url if same_policy else None),
            "replay": a.replay or (Path(c.replay) if c.replay and same_policy else None),
            "record": a.record or (Path(c.record) if c.record else None),
        }
    )
    return merged, changes


async def run_main(a: RunArgs, on_search: Callable[[Search], None] | None = None) -> DriverResult:
    """Run the driver. Raises a KsearchError (nothing written) when the arguments cannot start a run.

    `on_search` is told the search as soon as it is found or created (so an interrupted run can say
    how to resume it)."""
    a.db.parent.mkdir(parents=True, exist_ok=True)
    ws = await Workspace.open(a.db, gpus=a.gpus, ray=a.ray)
    try:
        if a.ray is not None:
            await (
                ws.sandbox()
            )  # joins the cluster first: an unreachable one is refused before a search is made
        found = await _find(ws, a)
        task = ws.task(a.task) if a.start is not None and a.task is not None else None
        start = _start_source(a, found, None if task is None else lambda text: not_a_candidate(text, task))
        if found is not None and a.compile_mode and a.compile_mode != found.config.compile_mode:
            raise ToolFailure(
                f"search {found.name} measures its torch.compile baseline in mode "
                f"{found.config.compile_mode!r}, fixed when it was created; --compile-mode {a.compile_mode} "
                "needs a new search (--new)"
            )
        if found is not None and a.timing_protocol and a.timing_protocol != found.config.timing_protocol:
            raise ToolFailure(
                f"search {found.name} is timed by the {found.config.timing_protocol!r} protocol, fixed when it was "
                f"created (its figures compare only within one protocol); --timing-protocol {a.timing_protocol} "
                "needs a new search (--new)"
            )
        if found is not None and a.precision and a.precision != found.config.precision:
            kept = found.config.precision
            how = (
                f"at KernelBench precision {kept}"
                if kept
                else "its task's inputs as drawn (no KernelBench precision)"
            )
            raise ToolFailure(
                f"search {found.name} runs {how}, fixed when it was created; --precision {a.precision} needs a new "
                "search (--new)"
            )
        # a task that needs a GPU, on a machine without one: no attempt could pass, so no search is started
        if found is not None:
            await refuse_without_gpu(ws, ws.search_task(found))
        elif a.task is not None:
            await refuse_without_gpu(ws, ws.task(a.task))
        prev = found if a.resume is not None else None
        name = a.policy or (prev.config.policy if prev else None) or default_policy_name()
        a, changes = remembered(a, found)
        # The policy is built before a search is created: a bad name, model or key changes nothing.
        try:
            policy = make_policy(name, model=a.model, base_url=a.base_url, replay=a.replay, record=a.record)
        except ValueError as e:  # make_policy's refusal of a name, model or file
            raise PolicyError(str(e)) from e
        logged = log_console(a.log) if a.log is not None else None
        try:
            s = found or await _create(ws, a, name)
            if found is not None:
                await check_run_free(ws, found)  # before saying it resumes: it may not
                # this run's options are the search's from now on (its next resume keeps them)
                s = await keep_run_options(ws, s.id, changes)
            if on_search is not None:
                on_search(s)
            display: Display = Display(verbose=a.verbose) if a.plain else LiveDisplay(verbose=a.verbose)
            display.db_flag = a.db_flag
            display.start_flag = f"--start {shlex.quote(str(a.start))}" if a.start is not None else ""
            if logged is not None:
                display = Display(logged, verbose=a.verbose)
            if found is not None:
                display.resuming(found, explicit=a.resume is not None)
            elif start is not None:
                await _submit_start(ws, s, start, display)
            opts = DriverOptions(
                rounds=a.rounds,
                attempts=a.attempts,
                wall_s=a.wall,
                tokens=a.tokens,
                usd=a.usd,
                target_speedup=a.target,
                final_eval=a.final,
            )
            return await Driver(ws, policy, display, opts).run(s.id)
        finally:
            await policy.aclose()
            if logged is not None:
                logged.file.close()
    finally:
        await ws.close()
