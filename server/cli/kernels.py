"""Reading kernels out of a search: `ksearch best` (the search's best) and `ksearch attempt` (any one attempt),
each with its numbers, to the terminal, a file (-o) or JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ksearch.server.cli.common import DEFAULT_DB, DbOption, console, fail, run_async, say, tell
from ksearch.server.cli.steer import SearchArg, workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Attempt, Candidate, Node, Search
from ksearch.worldmodel.render import no_best

if TYPE_CHECKING:
    from ksearch.tools.workspace import Workspace

OutputOpt = Annotated[Path | None, typer.Option("-o", "--output", help="Write the source to this file")]
SourceOnlyOpt = Annotated[bool, typer.Option("--source-only", help="Print only the source")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Attempt, node and source as JSON")]


def register(app: typer.Typer) -> None:
    app.command("best")(best)
    app.command("attempt")(attempt)


def check_output(path: Path) -> None:
    if path.is_dir():
        raise fail(f"{path} is a directory; give a file path for -o")
    if not path.parent.exists():
        raise fail(f"directory {path.parent} does not exist; create it or give another -o path")


def _show(
    s: Search,
    a: Attempt,
    cand: Candidate,
    n: Node | None,
    what: str,
    *,
    output: Path | None,
    source_only: bool,
    as_json: bool,
) -> None:
    """One attempt's code and numbers: written to `output`, as JSON, the source alone, or a header, its
    evaluation's summary and the source."""
    from ksearch.tools.common import summarize

    if output is not None:
        output.write_text(cand.source)
        tell(f"wrote {output}")
    if as_json:
        doc = {
            "search": s.name,
            "attempt": a.model_dump(mode="json"),
            "node": n.model_dump(mode="json") if n else None,
            "language": cand.language,
            "source": cand.source,
        }
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return
    if source_only:
        sys.stdout.write(cand.source)
        return
    where = (
        f"node #{n.id} {n.title!r}"
        if n is not None and n.kind == "intent"
        else ("the root" if n else "no node")
    )
    say(
        f"{what}: attempt #{a.id} on {where}, round {a.round}, by {a.author}, {cand.language} candidate {cand.id}"
    )
    say(
        summarize(a.evaluation)
        if a.evaluation is not None
        else "not evaluated (its evaluation was abandoned)"
    )
    if output is None:
        console.rule("source")
        sys.stdout.flush()
        sys.stdout.write(cand.source if cand.source.endswith("\n") else cand.source + "\n")


def _read(
    db: Path, search: str, pick: Callable[[Workspace, Search], Awaitable[Attempt]]
) -> tuple[Search, Attempt, Candidate, Node | None]:
    """The search, the attempt `pick` chooses in it (or refuses), that attempt's candidate and node."""

    async def go() -> tuple[Search, Attempt, Candidate, Node | None]:
        async with workspace(db) as ws:
            s = await ws.search(search)
            a = await pick(ws, s)
            cand = await ws.records.get_candidate(a.candidate_id)
            n = await ws.records.get_node(a.node_id) if a.node_id is not None else None
            return s, a, cand, n

    return run_async(go())


def _format(ws: Workspace, s: Search) -> str:
    """The export option that writes a kernel of the search in its task owner's format."""
    style = ws.search_task(s).style
    return {"gpumode": "--submission", "kernelbench": "--kernelbench", "flashinfer": "--solution"}[style]


def best(
    search: SearchArg,
    output: OutputOpt = None,
    source_only: SourceOnlyOpt = False,
    as_json: JsonOpt = False,
    attempt_id: Annotated[
        int | None,
        typer.Option("--attempt", min=1, help="Show this attempt instead (as `ksearch attempt SEARCH N`)"),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """The search's best kernel: its source and its numbers (per workload, vs eager and torch.compile)."""
    if attempt_id is not None:
        attempt(search, attempt_id, output=output, source_only=source_only, as_json=as_json, db=db)
        return
    if output is not None:
        check_output(output)

    async def pick(ws: Workspace, s: Search) -> Attempt:
        from ksearch.tools.export_kernel import some_ids

        a = await ws.records.best_attempt(s.id)
        if a is None:
            pure = [
                x.id
                for x in await ws.records.list_attempts(s.id)
                if x.evaluation is not None and x.evaluation.status == "ok" and x.evaluation.pure_pytorch
            ]
            cpu_ids = sorted((await ws.records.attempt_speedups(s.id)).cpu_interpreted)
            cpu = len(cpu_ids)
            raise fail(
                f"search {s.name!r} has no best kernel yet: attempt(s) {', '.join(f'#{i}' for i in pure)} "
                "are correct but pure PyTorch (no kernel of their own ran), and that is never a best kernel"
                if pure
                else f"search {s.name!r} has no best kernel yet: {no_best(cpu)} (CPU-interpreter timings "
                f"never rank candidates); `--attempt N` shows one of them, correct on the CPU interpreter: "
                f"{some_ids(cpu_ids)} (`ksearch export {s.name} {_format(ws, s)} --attempt N` "
                "writes one out for its task's own evaluator)"
                if cpu
                else f"search {s.name!r} has no correct, timed attempt yet",
                code=1,
            )
        return a

    s, a, cand, n = _read(db, search, pick)
    assert a.evaluation is not None  # a best attempt is always evaluated
    _show(s, a, cand, n, f"best of {s.name!r}", output=output, source_only=source_only, as_json=as_json)


def attempt(
    search: SearchArg,
    attempt_id: Annotated[int, typer.Argument(min=1, help="Attempt id (a submit says it; `ksearch tree SEARCH --json` lists each node's best)")],
    output: OutputOpt = None,
    source_only: SourceOnlyOpt = False,
    as_json: JsonOpt = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """One attempt of a search, any status: its source and its numbers (on a CPU too)."""
    if output is not None:
        check_output(output)

    async def pick(ws: Workspace, s: Search) -> Attempt:
        try:
            a: Attempt | None = await ws.records.get_attempt(attempt_id)
        except NotFound:
            a = None
        if a is None or a.search_id != s.id:
            ids = [x.id for x in await ws.records.list_attempts(s.id)]
            have = f"its attempts are #{ids[0]}–#{ids[-1]}" if ids else "it has no attempt yet"
            raise fail(f"search {s.name!r} has no attempt #{attempt_id}: {have}")
        return a

    s, a, cand, n = _read(db, search, pick)
    _show(s, a, cand, n, f"{s.name!r}", output=output, source_only=source_only, as_json=as_json)
