"""`ksearch searches` and `ksearch tree SEARCH`: look at searches and their intent trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ksearch.server.cli.common import DbOption, default_db, fail, print_table, run_async, say
from ksearch.server.cli.steer import workspace
from ksearch.tools.get_tree import tree_text
from ksearch.tools.loop.runs import run_status, run_statuses
from ksearch.worldmodel.errors import NotFound, SchemaError
from ksearch.worldmodel.render import MIN_BUDGET, fmt_speedup, no_best, tree_json, tree_mermaid


async def _searches(db: Path) -> list[dict[str, object]]:
    async with workspace(db) as ws:
        records = ws.records
        out: list[dict[str, object]] = []
        searches = await records.list_searches()
        shown = await run_statuses(ws, searches)
        for s in searches:
            best = await records.best_attempt(s.id)
            fig = await records.best_figure(s)
            counts = await records.node_counts(s.id)
            out.append(
                {
                    "id": s.id,
                    "name": s.name,
                    "task": s.task,
                    # `interrupted`: left `running` by a process that is gone (resume it with ksearch run)
                    "status": shown[s.id].status,
                    "round": s.round,
                    "intents": sum(counts.values()),
                    "open": counts.get("open", 0),
                    "best_speedup": best.speedup if best else None,
                    "best_workloads": fig.workloads if fig else None,
                    "final_speedup": fig.final_speedup_vs_eager if fig else None,
                    "final_workloads": fig.final_workloads if fig else None,
                    "best_shown": fig.short() if fig else None,
                    "best_attempt_id": s.best_attempt_id,
                    "cpu_correct": len((await records.attempt_speedups(s.id)).cpu_interpreted),
                }
            )
        return out


async def _tree(db: Path, search: str, fmt: str, budget: int) -> str:
    async with workspace(db) as ws:
        found = await ws.search(search)
        if fmt == "text":
            return await tree_text(ws, found.id, budget)
        nodes = await ws.records.list_nodes(found.id)
        speedups = await ws.records.attempt_speedups(found.id)
        if fmt == "json":
            data = tree_json(nodes, speedups, best_attempt_id=found.best_attempt_id)
            data["search"] = found.model_dump(mode="json")
            data["search"]["shown_status"] = (await run_status(ws, found)).status
            return json.dumps(data, indent=2)
        return tree_mermaid(nodes, speedups, best_attempt_id=found.best_attempt_id)


def register(app: typer.Typer) -> None:
    """Add `searches` and `tree` to the `ksearch` app."""

    @app.command("searches")
    def searches(
        db: DbOption = default_db(),
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """List the searches in the project database."""
        try:
            found = run_async(_searches(db))
        except SchemaError as exc:
            raise fail(str(exc)) from exc
        if as_json:
            typer.echo(json.dumps(found, indent=2))
            return
        if not found:
            typer.echo(f"no searches in {db}")
            return
        table = Table("id", "name", "task", "status", "round", "intents", "open", "best vs eager")
        for s in found:
            speed, cpu = s["best_speedup"], s["cpu_correct"]
            table.add_row(
                str(s["id"]),
                escape(str(s["name"])),
                escape(str(s["task"])),
                str(s["status"]),
                str(s["round"]),
                str(s["intents"]),
                str(s["open"]),
                str(s["best_shown"])
                if s["best_shown"]
                else fmt_speedup(speed)
                if isinstance(speed, float)
                else (no_best(cpu) if isinstance(cpu, int) and cpu else "-"),
            )
        print_table(table)
        if any(s["status"] == "interrupted" for s in found):
            say("interrupted: its run was killed; `ksearch run --resume NAME` continues it")

    @app.command("tree")
    def tree(
        search: Annotated[str, typer.Argument(help="Search id or name.")],
        db: DbOption = default_db(),
        as_json: Annotated[bool, typer.Option("--json", help="The whole tree as JSON.")] = False,
        mermaid: Annotated[bool, typer.Option("--mermaid", help="A Mermaid flowchart.")] = False,
        budget: Annotated[
            int, typer.Option("--budget", help="Maximum characters of the text view (as sent to a model).")
        ] = 6000,
    ) -> None:
        """Show a search's intent tree: the text a model sees, or JSON, or a Mermaid diagram."""
        if as_json and mermaid:
            raise fail("--json and --mermaid exclude each other; accepted: one of them, or neither for text")
        if budget < MIN_BUDGET + 1:
            raise fail(f"--budget {budget} is too small; accepted: at least {MIN_BUDGET + 1}")
        fmt = "json" if as_json else "mermaid" if mermaid else "text"
        try:
            text = run_async(_tree(db, search, fmt, budget))
        except (NotFound, SchemaError) as exc:
            raise fail(str(exc)) from exc
        typer.echo(text)
