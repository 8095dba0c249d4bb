"""Steering a search from the command line: add intents, pin, veto, prune, submit a kernel, look at the best.

Every change goes through tools/ (propose_intents, edit_tree, benchmark) with author "human", so it is
validated exactly like an edit from the driver's model or an MCP client, and lands in the edit log.
Refusals print what was wrong and what is accepted, and exit with code 2.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from ksearch.server.cli.common import DEFAULT_DB, NODE_HELP, DbOption, fail, node_ref, run_async, say, tell
from ksearch.server.cli.words import cli_words
from ksearch.tools.errors import ToolFailure, describe_validation
from ksearch.worldmodel.errors import NotFound, SchemaError
from ksearch.worldmodel.models import EditSpec, IntentSpec, Node, Search

_EXPECTED = IntentSpec.model_fields["expected_speedup"].description  # the one definition

if TYPE_CHECKING:  # tools are imported when a command runs, so `ksearch --help` stays fast
    from ksearch.tools.workspace import Workspace

# the tools' limit on a submitted source (ksearch.tools.submit_kernel.MAX_SOURCE_BYTES), checked while reading
MAX_FILE_BYTES = 200_000

intent_app = typer.Typer(help="Add or change intents of a search's tree.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(intent_app, name="intent")
    app.command("pin")(pin)
    app.command("unpin")(unpin)
    app.command("veto")(veto)
    app.command("unveto")(unveto)
    app.command("prune")(prune)
    app.command("reopen")(reopen)
    app.command("submit")(submit)


# --------------------------------------------------------------------------- shared plumbing


def existing_db(db: Path) -> Path:
    """Refuse a database path that does not exist (rather than silently create an empty one): only
    `ksearch run` (and `serve`, for an MCP host's create_search) creates a database."""
    if not db.exists():
        tried = str(db) if db.is_absolute() else f"{db} ({db.absolute()})"
        raise fail(
            f"no database at {tried}; pass --db with an existing ksearch database (or set KSEARCH_DB), "
            "or start a search with `ksearch run TASK`, which creates it"
        )
    if db.is_dir():
        raise fail(f"{db} is a directory; pass --db with the database file, e.g. {db / 'ksearch.db'}")
    return db


async def open_workspace(db: Path) -> Workspace:
    """A tools.Workspace on an existing database, or a clear refusal; the caller closes it."""
    from ksearch.tools.workspace import Workspace

    existing_db(db)
    try:
        return await Workspace.open(db)
    except (SchemaError, sqlite3.DatabaseError) as e:
        raise fail(f"{db} cannot be opened as a ksearch database: {e}") from e


@contextlib.asynccontextmanager
async def workspace(db: Path) -> AsyncIterator[Workspace]:
    """An open tools.Workspace on an existing database (its refusals become CLI errors in `run_async`)."""
    ws = await open_workspace(db)
    try:
        yield ws
    finally:
        await ws.close()


async def node_of(ws: Workspace, s: Search, ref: int | str) -> Node:
    """The node `ref` (an id, #id or handle) names, checked to belong to the search (ids are global, so a typo can
    hit another search)."""
    # the tools are imported on first use: `ksearch --help` stays quick
    from ksearch.tools.common import node_id_of

    try:
        node_id = await node_id_of(ws, s, ref)
    except ToolFailure as e:
        raise fail(f"{cli_words(str(e))}; `ksearch tree {s.name}` lists its nodes") from e
    try:
        n = await ws.records.get_node(node_id)
    except NotFound as e:
        raise fail(f"no node #{node_id} in search {s.name!r}; `ksearch tree {s.name}` lists its nodes") from e
    if n.search_id != s.id:
        # Node ids are global: name the search it is in, so a person can tell which one they meant.
        other = await ws.search(n.search_id)
        raise fail(
            f"node #{node_id} belongs to another search, {other.name!r}, not {s.name!r}; "
            f"`ksearch tree {s.name}` lists the nodes of {s.name!r}"
        )
    return n


def describe(n: Node) -> str:
    flags = [f for f, on in (("pinned", n.pinned), ("vetoed", n.vetoed)) if on]
    what = "root" if n.kind == "root" else repr(n.title)
    extra = f", priority {n.priority:.2f}, difficulty {n.difficulty}" if n.kind == "intent" else ""
    return f"#{n.id} {what}: {n.status.value}{extra}" + (f" [{', '.join(flags)}]" if flags else "")


SearchArg = Annotated[str, typer.Argument(help="Search id or name")]
NodeArg = Annotated[str, typer.Argument(parser=node_ref, help=NODE_HELP)]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why; kept in the edit log")]


# --------------------------------------------------------------------------- intents and edits


@intent_app.command("add")
def intent_add(
    search: SearchArg,
    title: Annotated[str, typer.Argument(help="Short imperative idea, e.g. 'keep the row in registers'")],
    parent: Annotated[
        str | None,
        typer.Option("--parent", parser=node_ref, help=f"Node to put it under (default: root): {NODE_HELP}"),
    ] = None,
    handle: Annotated[
        str | None,
        typer.Option(
            "--handle",
            help="A name for the intent, unique in the search, that commands and MCP calls take in place of its id",
        ),
    ] = None,
    why: Annotated[str, typer.Option("--why", help="Rationale: why it should help")] = "",
    priority: Annotated[float, typer.Option(help="0 (least) to 1 (most promising)")] = 0.7,
    difficulty: Annotated[int, typer.Option(help="1 (a parameter change) to 5 (a rewrite)")] = 3,
    expected: Annotated[float | None, typer.Option("--expected", help=_EXPECTED)] = None,
    notes: Annotated[str, typer.Option(help="Beliefs to re-read later")] = "",
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="A concrete setting KEY=VALUE (repeatable), e.g. --param BLOCK_N=512: the tuner implements an "
            "intent that names the task's tunables",
        ),
    ] = None,
    reason: ReasonOpt = "",
    db: DbOption = DEFAULT_DB,
) -> None:
    """Add an open intent under a node; the driver considers it at its next selection."""
    from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents

    async def go() -> tuple[list[Node], list[str]]:
        async with workspace(db) as ws:
            s = await ws.search(search)
            parent_id = (await node_of(ws, s, parent)).id if parent is not None else None
            try:
                spec = IntentSpec(
                    title=title,
                    rationale=why,
                    priority=priority,
                    difficulty=difficulty,
                    expected_speedup=expected,
                    notes=notes,
                    parent_id=parent_id,
                    params=parse_params(param or []),
                    handle=handle,
                )
            except ValidationError as e:
                raise fail(str(describe_validation(e, "intent"))) from e
            added = await propose_intents(
                ws, ProposeIntentsIn(search=s.id, intents=[spec], author="human", reason=reason)
            )
            return added, await _untunable(ws, added[0]) if spec.params else []

    added, param_notes = run_async(go())
    for n in added:
        say(f"added {describe(n)} under #{n.parent_id}")
    for line in param_notes:
        tell(line)


async def _untunable(ws: Workspace, node: Node) -> list[str]:
    """Notes on the intent's params that the code it starts from does not declare as TUNABLES (or with other
    values): the tuner declines such an intent; a language-model policy reads them as settings."""
    from ksearch.tools.prompting.contexts import tunables_of
    from ksearch.tools.select_action import base_attempt

    base = await base_attempt(ws, node)
    if base is None:
        return [
            f"note: #{node.id} has params but no code to start from yet: the tuner tunes only a kernel that declares "
            "TUNABLES; a language-model policy reads the params as settings"
        ]
    space = tunables_of((await ws.records.get_candidate(base.candidate_id)).source)
    where = f"the code #{node.id} starts from (attempt #{base.id})"
    if not space:
        return [
            f"note: {where} declares no TUNABLES: the tuner declines an intent with params "
            f"({', '.join(node.params)}); a language-model policy reads them as settings"
        ]
    declared = ", ".join(sorted(space))
    notes: list[str] = []
    for key, value in node.params.items():
        if key not in space:
            notes.append(
                f"note: {key} is not among the TUNABLES of {where} ({declared}): the tuner declines it"
            )
        elif value not in space[key]:
            allowed = ", ".join(map(str, space[key]))
            notes.append(
                f"note: {key}={value} is not among {key}'s values in {where} ({allowed}): the tuner declines it"
            )
    return notes


def parse_params(items: list[str]) -> dict[str, Any]:
    """`--param KEY=VALUE` items as an intent's params: a VALUE that reads as JSON (512, 0.5, true, "x") is that
    value, any other is the text itself."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise fail(f"--param takes KEY=VALUE (e.g. --param BLOCK_N=512); got {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


@intent_app.command("edit")
def intent_edit(
    search: SearchArg,
    node: NodeArg,
    priority: Annotated[float | None, typer.Option(help="0 to 1")] = None,
    difficulty: Annotated[int | None, typer.Option(help="1 to 5")] = None,
    title: Annotated[str | None, typer.Option(help="New title")] = None,
    why: Annotated[str | None, typer.Option("--why", help="New rationale")] = None,
    notes: Annotated[str | None, typer.Option(help="New notes")] = None,
    expected: Annotated[float | None, typer.Option("--expected", help=_EXPECTED)] = None,
    reason: ReasonOpt = "",
    db: DbOption = DEFAULT_DB,
) -> None:
    """Change an intent's priority, difficulty, title, rationale, notes or predicted speedup."""
    fields = {
        "priority": priority,
        "difficulty": difficulty,
        "title": title,
        "rationale": why,
        "notes": notes,
        "expected_speedup": expected,
    }
    given: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if not given:
        raise fail(
            "nothing to change; give at least one of --priority --difficulty --title --why --notes --expected"
        )
    _edit(db, search, node, "update", reason, "updated", **given)


def _edit(
    db: Path,
    search: str,
    node: str,
    op: str,
    reason: str,
    done: str,
    *,
    check: Callable[[Node], str | None] | None = None,
    **fields: object,
) -> None:
    """One edit through ksearch.tools.edit_tree; `check(node)` returns why the command refuses that node, if it does."""
    from ksearch.tools.edit_tree import EditTreeIn, edit_tree

    async def go() -> list[Node]:
        async with workspace(db) as ws:
            s = await ws.search(search)
            n = await node_of(ws, s, node)
            refusal = check(n) if check is not None else None
            if refusal:
                raise fail(refusal)
            try:
                spec = EditSpec(op=op, node_id=n.id, reason=reason, **fields)
            except ValidationError as e:
                raise fail(str(describe_validation(e, "edit"))) from e
            return await edit_tree(ws, EditTreeIn(search=s.id, edits=[spec], author="human"))

    for n in run_async(go()):
        say(f"{done}: {describe(n)}")


def _pinnable(n: Node) -> str | None:
    if n.kind == "root":
        return "the root is not an intent and is never selected; pin an open intent"
    if n.status.value != "open":
        undo = "; `ksearch reopen` it first to try it again" if n.status.value != "active" else ""
        return (
            f"node #{n.id} is {n.status.value}: a pin makes an open intent the next one selected, and "
            f"#{n.id} is not waiting to be selected{undo}"
        )
    return None


def pin(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Pin an open intent: it is selected before every unpinned one."""
    _edit(db, search, node, "pin", reason, "pinned", check=_pinnable)


def unpin(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Remove a pin."""
    _edit(db, search, node, "unpin", reason, "unpinned")


def veto(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Veto a node: it is never selected and nothing grows under it (until unvetoed)."""
    _edit(db, search, node, "veto", reason, "vetoed")


def unveto(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Lift a veto."""
    _edit(db, search, node, "unveto", reason, "unvetoed")


def prune(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Prune a node and its whole subtree (their attempts stay recorded; `reopen` undoes it)."""
    _edit(db, search, node, "prune", reason, "pruned")


def reopen(search: SearchArg, node: NodeArg, reason: ReasonOpt = "", db: DbOption = DEFAULT_DB) -> None:
    """Reopen a closed, failed or pruned node so it can be selected again."""
    _edit(db, search, node, "reopen", reason, "reopened")


# --------------------------------------------------------------------------- a human's kernel


def read_source(path: Path) -> str:
    """A candidate file's text, or a clear refusal."""
    if not path.exists():
        raise fail(
            f"file {path} not found; give the path of a Python file that defines the task's entry point"
        )
    if path.is_dir():
        raise fail(
            f"{path} is a directory; give the path of a Python file that defines the task's entry point"
        )
    if not path.is_file():  # a device or a pipe: /dev/zero would never end
        raise fail(
            f"{path} is not a regular file; give the path of a Python file that defines the task's entry point"
        )
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)  # bounded, even if the file grows while it is read
    except OSError as e:
        raise fail(f"{path} cannot be read: {e.strerror or e}") from e
    if len(data) > MAX_FILE_BYTES:
        raise fail(
            f"{path} is over {MAX_FILE_BYTES} bytes; a candidate may be at most {MAX_FILE_BYTES} bytes"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(
            f"{path} is not UTF-8 text ({e.reason} at byte {e.start}); accepted: a UTF-8 Python file"
        ) from e
    if not text.strip():
        raise fail(f"{path} is empty; accepted: a Python module that defines the task's entry point")
    return text


def submit(
    search: SearchArg,
    file: Annotated[
        Path,
        typer.Argument(
            help="Python file defining the task's entry point (ModelNew; custom_kernel for GPU MODE; run for "
            "FlashInfer-Bench) in Triton, or CUDA via ksearch.gpu.nvrtc; or a FlashInfer-Bench "
            "Solution JSON (on a FlashInfer-Bench definition; its spec gives the language)"
        ),
    ],
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            parser=node_ref,
            help="The root, or the intent it implements (its id, #id or handle) (recorded there; an open intent is claimed); "
            "without it the attempt belongs to the search but to no node",
        ),
    ] = None,
    language: Annotated[
        str | None,
        typer.Option(
            "--language",
            help="triton | cuda | cpp_ext | auto (detected from the source) (default: the search's language)",
        ),
    ] = None,
    base: Annotated[
        int | None,
        typer.Option(
            "--base",
            min=1,
            help="Attempt this code was edited from (for the diff; default: the node's best, else the code the "
            "intent starts from, else the search's best)",
        ),
    ] = None,
    trials: Annotated[int, typer.Option(min=1, max=20, help="Correctness trials per workload")] = 3,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Evaluate your own kernel and record it as an attempt (author "human"), like any other.

    Exit code 0 when it ran correctly and was timed, 1 when it was recorded but failed (compile error,
    wrong values, crash...), 2 when the input was refused.
    """
    from ksearch.tools.submit_kernel import SubmitKernelIn, SubmitKernelOut, submit_kernel

    source = read_source(file)
    try:
        inp = SubmitKernelIn(
            search=search,
            source=source,
            name=str(file),
            node_id=node,
            language=language,  # checked by the model, which names what is accepted
            base_attempt_id=base,
            trials=trials,
        )
    except ValidationError as e:
        raise fail(str(describe_validation(e, "submission"))) from e

    async def progress(message: str, fraction: float) -> None:
        tell(f"{100 * fraction:3.0f}% {message}")

    async def note(text: str) -> None:
        tell(cli_words(text, search))

    async def go() -> SubmitKernelOut:
        async with workspace(db) as ws:
            return await submit_kernel(ws, inp, progress, note)

    out = run_async(go())
    say(out.summary)
    where = f"node #{out.node_id}" if out.node_id is not None else "the search (no node)"
    note_base = (
        f"base: attempt #{out.base_attempt_id} ({out.base_why})"
        if out.base_attempt_id is not None
        else "base: none"
    )
    say(
        f"recorded as attempt #{out.attempt_id} on {where}; {note_base}"
        + ("; it is now the search's best" if out.is_best else "")
    )
    if out.evaluation.status != "ok":
        raise typer.Exit(1)
