"""`ksearch budget SEARCH`: a search's budgets and what is spent of them; with options, new budgets (to go on
past a spent one, or to stop sooner)."""

from __future__ import annotations

from typing import Annotated

import typer

from ksearch.server.cli.common import DEFAULT_DB, DbOption, refusals, run_async, say
from ksearch.server.cli.steer import SearchArg, workspace
from ksearch.server.cli.words import cli_words


def register(app: typer.Typer) -> None:
    app.command("budget")(budget)


def budget(
    search: SearchArg,
    rounds: Annotated[
        int | None, typer.Option("--rounds", min=1, help="Rounds in all, started ones included")
    ] = None,
    more_rounds: Annotated[
        int | None, typer.Option("--more-rounds", min=1, help="Rounds beyond those already started")
    ] = None,
    attempts: Annotated[int | None, typer.Option("--attempts", min=1, help="Attempts in all")] = None,
    wall_s: Annotated[
        float | None, typer.Option("--wall-s", min=1, help="Wall time in seconds, from the search's creation")
    ] = None,
    tokens: Annotated[
        int | None, typer.Option("--tokens", min=1, help="Language-model tokens in all")
    ] = None,
    usd: Annotated[
        float | None, typer.Option("--usd", min=0.01, help="Language-model spend in US dollars")
    ] = None,
    target: Annotated[
        float | None,
        typer.Option("--target", min=0.01, help="Stop once the best is this much faster than eager"),
    ] = None,
    lift: Annotated[
        list[str] | None,
        typer.Option(
            "--lift", help="Remove a budget: rounds, attempts, wall_s, tokens, usd or target_speedup"
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Show a search's budgets, or change them. A person's own kernels (`ksearch submit`) are measured whatever
    the round budget; the budgets stop the policy's rounds and `ksearch select`.

    Exit code 0 when done, 2 when the input was refused (nothing changed).
    """
    from ksearch.tools.budgets import BUDGET_NAMES, SetBudgetsIn, set_budgets
    from ksearch.tools.llm_calls import usage_text
    from ksearch.tools.loop.state import budget_state

    changes = {
        "rounds": rounds,
        "more_rounds": more_rounds,
        "attempts": attempts,
        "wall_s": wall_s,
        "tokens": tokens,
        "usd": usd,
        "target_speedup": target,
    }
    asked = {k: v for k, v in changes.items() if v is not None}

    async def go() -> list[str]:
        async with workspace(db) as ws:
            if asked or lift:
                with refusals():
                    out = await set_budgets(ws, SetBudgetsIn(search=search, **asked, lift=lift or []))
                s = await ws.search(out.search)
                lines = [f"{s.name}: budgets changed"]
                for n in BUDGET_NAMES:
                    old, new = getattr(out.before, n), getattr(out.after, n)
                    if old != new:
                        lines.append(f"  {n}: {_v(old)} -> {_v(new)}")
                lines.append(f"next: {cli_words(out.next, s.name)}")
                return lines
            s = await ws.search(search)
            b = await budget_state(ws, s)
            cfg = s.config.budgets
            usage = usage_text(await ws.records.llm_totals(s.id))
            return [
                f"{s.name}: budgets (used / limit)",
                f"  rounds: {b.rounds_used} / {_v(cfg.rounds)}",
                f"  attempts: {b.attempts_used} / {_v(cfg.attempts)}",
                f"  wall_s: {_v(cfg.wall_s)} (from the search's creation)",
                f"  tokens: {b.tokens_used} / {_v(cfg.tokens)}",
                f"  usd: {b.usd_used:.2f} / {_v(cfg.usd)}",
                f"  target_speedup: {_v(cfg.target_speedup)}",
                *([f"  {usage}"] if usage else []),
                f"spent: {b.exhausted}" if b.exhausted else "none is spent",
            ]

    for line in run_async(go()):
        say(line)


def _v(value: object) -> str:
    return "no limit" if value is None else str(value)
