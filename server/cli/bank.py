"""`ksearch bank`: the kernel bank's entries (list, show, search, forget, export, import)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import typer

from ksearch.server.cli.common import BankOption, DbOption, default_db, run_async, say, tell, use_bank
from ksearch.server.cli.steer import workspace
from ksearch.tools.bank import ops as bank_ops
from ksearch.tools.bank.record import record_search
from ksearch.tools.workspace import Workspace


@contextlib.asynccontextmanager
async def bank_workspace(db: Path, bank: Path | None) -> AsyncIterator[Workspace]:
    """The workspace a bank command works in: the --db database; with --bank and no database there, the bank
    file itself (a shared bank needs no project database to be read, exported, imported or pruned)."""
    if bank is not None and not await asyncio.to_thread(db.exists):
        async with await Workspace.open(bank) as ws:
            yield ws
        return
    async with workspace(db) as ws:
        yield ws


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="The kernel bank: what earlier searches learned (intents and their outcomes, notes, best kernels), "
        "shown to new searches on related tasks.",
        no_args_is_help=True,
    )
    app.add_typer(sub, name="bank")

    @sub.command("list")
    def list_(db: DbOption = default_db(), bank: BankOption = None, as_json: JsonOption = False) -> None:
        """Every entry, newest first: uid, kind, task, search, title and what it measured."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) as ws:
                entries = list(reversed(await bank_ops.list_bank(ws)))
                if as_json:
                    say(json.dumps([e.model_dump(mode="json") for e in entries], indent=1))
                    return
                say(f"{len(entries)} entries in {bank_ops.where(ws)}")
                for e in entries:
                    say(bank_ops.list_line(e))

        run_async(go())

    @sub.command("show")
    def show(
        entry: Annotated[str, typer.Argument(help="An entry's uid (or its first 4+ characters)")],
        db: DbOption = default_db(),
        bank: BankOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """One entry whole: its task's signature, outcome with device and protocol, notes, and code."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) as ws:
                out = await bank_ops.query_bank(ws, bank_ops.QueryBankIn(entry=entry))
                say(out.hits[0].entry.model_dump_json(indent=1) if as_json else out.text)

        run_async(go())

    @sub.command("search")
    def search(
        words: Annotated[
            list[str] | None, typer.Argument(help="Words to find in titles, notes, tasks, patterns")
        ] = None,
        task: Annotated[
            str | None, typer.Option("--task", help="Entries related to this task (name or path)")
        ] = None,
        for_search: Annotated[
            str | None,
            typer.Option("--search", help="Entries related to this search's task (its own left out)"),
        ] = None,
        limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 10,
        db: DbOption = default_db(),
        bank: BankOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Entries related to a task or a search (ranked by similarity and measured value, with the reasons), or
        matching words."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) if for_search is None else workspace(db) as ws:
                inp = bank_ops.QueryBankIn(
                    task=task, search=for_search, text=" ".join(words or []) or None, limit=limit
                )
                out = await bank_ops.query_bank(ws, inp)
                say(out.model_dump_json(indent=1) if as_json else out.text)

        run_async(go())

    @sub.command("forget")
    def forget(
        entries: Annotated[list[str], typer.Argument(help="uids of the entries to forget")],
        reason: Annotated[str, typer.Option("--reason", help="Why (kept with the forgotten uid)")] = "",
        db: DbOption = default_db(),
        bank: BankOption = None,
    ) -> None:
        """Remove entries for good: recording their search again does not bring them back."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) as ws:
                gone = await bank_ops.forget_entries(ws, entries, reason)
                say(f"forgot {len(gone)} entries: {', '.join(gone)}")

        run_async(go())

    @sub.command("export")
    def export(
        path: Annotated[Path, typer.Argument(help="The JSON file to write")],
        db: DbOption = default_db(),
        bank: BankOption = None,
    ) -> None:
        """Write every entry to a JSON file a team can share (`ksearch bank import` reads it)."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) as ws:
                n = await bank_ops.export_bank(ws, path)
                say(f"wrote {n} entries to {path}")

        run_async(go())

    @sub.command("import")
    def import_(
        path: Annotated[Path, typer.Argument(help="A JSON file written by `ksearch bank export`")],
        db: DbOption = default_db(),
        bank: BankOption = None,
    ) -> None:
        """Add a bank file's entries (a newer recording of an entry wins; a forgotten entry stays out). A corrupt
        file, another format or a newer bank version is refused whole, with the reason."""
        use_bank(bank)

        async def go() -> None:
            async with bank_workspace(db, bank) as ws:
                done = await bank_ops.import_bank(ws, path)
                skipped = (
                    f"; {len(done.skipped_forgotten)} left out (forgotten here: {', '.join(done.skipped_forgotten)})"
                    if done.skipped_forgotten
                    else ""
                )
                say(f"imported {path}: {done.added} added, {done.updated} updated{skipped}")

        run_async(go())

    @sub.command("record")
    def record(
        searches: Annotated[list[str], typer.Argument(help="Search ids or names")],
        db: DbOption = default_db(),
        bank: BankOption = None,
    ) -> None:
        """Record (again) what searches taught. ksearch does this when an intent ends and when a search ends;
        this fills a shared bank from an existing database."""
        use_bank(bank)

        async def go() -> None:
            async with workspace(db) as ws:
                for ref in searches:
                    n = await record_search(ws, ref)
                    tell(f"search {ref}: {n} entries in {bank_ops.where(ws)}")

        run_async(go())
