"""The loop's steps on the command line: a person advances the same loop an MCP host or the driver does.

    ksearch status SEARCH          where the loop stands and what to do next
    ksearch select SEARCH [--node] phase 1: claim the next intent (or the one named)
    ksearch finish SEARCH [--node] [--update FILE]
                                   end the refine phase of the intent being refined, with the tree changes of
                                   FILE; print the reflect prompt (--prompt)
    ksearch final SEARCH           re-measure the best candidates on every workload and end the search
    ksearch baselines SEARCH [--remeasure]
                                   the baselines its speedups divide by; measured anew, every attempt restated

Attempts are submitted with `ksearch submit SEARCH FILE --node N`; the tree is edited with `intent`, `pin`,
`prune`... (server/cli/steer.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ksearch.server.cli.common import DEFAULT_DB, NODE_HELP, DbOption, fail, node_ref, run_async
from ksearch.server.cli.steer import SearchArg, say, tell, workspace
from ksearch.server.cli.words import cli_words

NodeOpt = Annotated[str | None, typer.Option("--node", parser=node_ref, help=NODE_HELP)]
JsonOpt = Annotated[bool, typer.Option("--json", help="The tool's whole result as JSON")]


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("select")(select)
    app.command("finish")(finish)
    app.command("final")(final)
    app.command("baselines")(baselines)


def status(search: SearchArg, as_json: JsonOpt = False, db: DbOption = DEFAULT_DB) -> None:
    """Where the search's loop stands (phase, round, attempts against the cap, budget) and what to do next."""
    from ksearch.tools.loop.protocols import protocol_line
    from ksearch.tools.loop.runs import run_status
    from ksearch.tools.loop.state import LoopState, loop_state
    from ksearch.tools.now_doing import now_doing

    async def go() -> tuple[LoopState, str, str]:
        async with workspace(db) as ws:
            st = await loop_state(ws, search)
            # `interrupted` when the process that was running it is gone
            return st, (await run_status(ws, search)).status, (await now_doing(ws, search)).text

    st, shown, doing = run_async(go())
    if as_json:
        say(st.model_copy(update={"status": shown}).model_dump_json(indent=1))
        return
    b = st.budget
    rounds = f"{b.rounds_used}/{b.rounds}" if b.rounds is not None else str(b.rounds_used)
    if b.rounds is not None and b.rounds_used > b.rounds:  # "round 5/2" read as a bug
        rounds = (
            f"{b.rounds_used} (past its budget of {b.rounds}: a person's submissions claim rounds beyond it)"
        )
    say(f"search {st.search!r}: {shown}, phase {st.phase}, round {rounds}, {b.attempts_used} attempts")
    say(f"now: {doing}")
    say(f"timed: {protocol_line(st.timing_protocol)}")
    if shown == "interrupted":
        say(f"its run was killed; `ksearch run --resume {st.search}` continues it")
    elif shown == "waiting":  # stored `running` by a claim (a person's or a host's), with no run holding it
        claimed = ", ".join(f"#{r.node_id}" for r in st.refining)
        mid = f"intent {claimed} is claimed" if claimed else "its loop waits for the next step"
        say(f"no run holds it: {mid}; `ksearch run --resume {st.search}` lets a model go on")
    if st.best_lost:
        say(st.best_lost)
    for r in st.refining:
        doing = "left active when the search stopped" if shown == "stopped" else "refining"
        say(
            f"{doing}: #{r.node_id} {r.title!r}, {r.attempts} of at most {r.cap} attempts, "
            f"{r.stagnant} in a row without a significant gain (window {r.window})"
        )
    say(f"next: {cli_words(st.next, st.search)}")


def select(
    search: SearchArg, node: NodeOpt = None, as_json: JsonOpt = False, db: DbOption = DEFAULT_DB
) -> None:
    """Phase 1: claim the next open intent by the selection rule (or --node): a new round starts."""
    from ksearch.tools.select_action import SelectActionIn, SelectionOut, select_action

    async def go() -> SelectionOut:
        async with workspace(db) as ws:
            return await select_action(ws, SelectActionIn(search=search, node_id=node))

    out = run_async(go())
    if as_json:
        say(out.model_dump_json(indent=1))
        return
    if out.node is None:
        say(f"nothing selected: {cli_words(out.reason, search)}")
    else:
        base = f"attempt #{out.base_attempt_id}" if out.base_attempt_id else "nothing (write from scratch)"
        say(f"round {out.round}: claimed #{out.node.id} {out.node.title!r} — {out.reason}; builds on {base}")
    say(f"next: {cli_words(out.next, search)}")


def finish(
    search: SearchArg,
    node: NodeOpt = None,
    as_json: JsonOpt = False,
    prompt: Annotated[
        bool, typer.Option("--prompt", help="Also print the reflect prompt a model would get (stdout)")
    ] = False,
    update: Annotated[
        Path | None,
        typer.Option(
            "--update",
            help='A JSON file (- for stdin) of changes to apply with the finish, all or nothing: {"edits": [...], '
            '"new_intents": [...], "reason": "..."}, as the MCP tools edit_tree and propose_intents take them',
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """End the refine phase of the intent being refined (closed with a correct attempt, else failed); with
    --update, apply tree changes in the same step; with --prompt, print the reflect prompt a model would get."""
    from ksearch.tools.finish_intent import FinishIntentIn, FinishOut, finish_intent

    changes = _update_file(update) if update is not None else {}

    async def go() -> FinishOut:
        async with workspace(db) as ws:
            inp = FinishIntentIn(search=search, node_id=node, with_prompt=True if prompt else None, **changes)
            return await finish_intent(ws, inp)

    out = run_async(go())  # the file's changes are checked as the tool's arguments, refused as they would be
    if as_json:
        say(out.model_dump_json(indent=1))
        return
    tell(f"#{out.node.id} {out.node.title!r} is now {out.node.status.value} ({out.refine.attempts} attempts)")
    if prompt:
        say(out.reflect_prompt)
    tell(f"next: {cli_words(out.next, search)}")


UPDATE_KEYS = ("edits", "new_intents", "reason")
MAX_UPDATE_BYTES = 1_000_000


def _update_file(path: Path) -> dict[str, Any]:
    """The changes of `finish --update`: a JSON object with some of UPDATE_KEYS, or a clear refusal."""
    where = "stdin" if str(path) == "-" else str(path)
    try:
        if str(path) == "-":
            text = sys.stdin.read(MAX_UPDATE_BYTES + 1)
        else:
            with path.open(encoding="utf-8") as fh:
                text = fh.read(MAX_UPDATE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"--update {where} cannot be read: {e}") from e
    if len(text) > MAX_UPDATE_BYTES:
        raise fail(f"--update {where} is over {MAX_UPDATE_BYTES} bytes")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise fail(f"--update {where} is not JSON ({e}); accepted: {_UPDATE_SHAPE}") from e
    if not isinstance(data, dict):
        raise fail(f"--update {where} holds a JSON {type(data).__name__}; accepted: {_UPDATE_SHAPE}")
    unknown = sorted(set(data) - set(UPDATE_KEYS))
    if unknown or not data:
        got = f"the unknown key(s) {', '.join(map(repr, unknown))}" if unknown else "no key"
        raise fail(f"--update {where} has {got}; accepted: {_UPDATE_SHAPE}")
    return data


_UPDATE_SHAPE = (
    'a JSON object with "edits" (a list of edits), "new_intents" (a list of intents) and/or "reason"'
)


def final(search: SearchArg, as_json: JsonOpt = False, db: DbOption = DEFAULT_DB) -> None:
    """Re-measure the search's best candidates on every workload (held-out ones too) and end the search."""
    from ksearch.tools.final_eval import FinalEvalIn, FinalOut, final_evaluation

    async def go() -> FinalOut:
        async with workspace(db) as ws:
            return await final_evaluation(ws, FinalEvalIn(search=search))

    out = run_async(go())
    if as_json:
        say(json.dumps(out.model_dump(mode="json"), indent=1))
        return
    for r in out.rows:
        vs = f"{r.speedup_vs_eager:.3f}x vs eager" if r.speedup_vs_eager is not None else "no speedup"
        comp = (
            f", {r.speedup_vs_compile:.3f}x vs {r.compile_baseline}"
            if r.speedup_vs_compile is not None
            else ""
        )
        timed = f", timed: {r.timing_protocol}" if r.timing_protocol else ""
        say(
            f"attempt #{r.attempt_id}: {r.status}, {vs}{comp} on {', '.join(r.workloads)} [{r.device}]{timed}"
        )
    if out.best_lost:
        say(out.best_lost)
    say(f"next: {cli_words(out.next, search)}")


def baselines(
    search: SearchArg,
    remeasure: Annotated[
        bool,
        typer.Option(
            "--remeasure",
            help="Measure them anew on this machine's GPU, pin them to the search and restate every attempt's speedups",
        ),
    ] = False,
    as_json: JsonOpt = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """The eager and torch.compile baselines the search's speedups divide by: when and on which GPU measured."""
    from ksearch.tools.baselines import BaselinesIn, BaselinesOut, remeasure_baselines

    async def go() -> BaselinesOut:
        async with workspace(db) as ws:
            return await remeasure_baselines(ws, BaselinesIn(search=search, remeasure=remeasure))

    out = run_async(go())
    if as_json:
        say(json.dumps(out.model_dump(mode="json"), indent=1))
        return
    say(out.text)
