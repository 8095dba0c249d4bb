"""Refuse tool calls whose arguments the tool cannot take, in the tools' own plain wording.

The SDK builds each tool's argument model from its signature and drops keys it does not know, so a
misspelt `node` for `node_id` would silently run the tool without it. This middleware answers such a
call with an error naming the unknown arguments and the accepted ones, before anything runs; and it
validates the arguments with the tool's own model first, so a wrong type reads as the tools' other
refusals do ("search: …, got …") rather than as the SDK's pydantic dump with its links.
"""

from __future__ import annotations

import difflib
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from ksearch.tools.errors import describe_validation


class RefuseUnknownArguments:
    """Context-tier middleware; `accepted` maps each tool name to its parameter names."""

    def __init__(
        self, accepted: dict[str, set[str]], models: dict[str, type[BaseModel]] | None = None
    ) -> None:
        self.accepted = accepted
        self.models = models if models is not None else {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            name, args = ctx.params.get("name"), ctx.params.get("arguments")
            known = self.accepted.get(name) if isinstance(name, str) else None
            if known is not None and isinstance(args, dict):
                unknown = sorted(str(k) for k in args if k not in known)
                if unknown:
                    listed = ", ".join(repr(k[:60]) for k in unknown[:10])
                    meant = _meant(unknown[:10], known)
                    msg = (
                        f"unknown argument(s) {listed} for tool {name!r}{meant}; accepted: "
                        f"{', '.join(sorted(known)) or '(none)'}. Nothing was done."
                    )
                    return CallToolResult(content=[TextContent(type="text", text=msg)], is_error=True)
                model = self.models.get(name) if isinstance(name, str) else None
                if model is not None:
                    try:
                        model.model_validate(args)
                    except ValidationError as e:
                        text = str(describe_validation(e, f"arguments to {name}")) + "\nNothing was done."
                        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(ctx)


def _meant(unknown: list[str], known: set[str]) -> str:
    """ " (did you mean …?)" for the unknown names that one accepted name begins with or resembles, else ""."""
    guesses: list[str] = []
    for k in unknown:
        starts = sorted(a for a in known if a.startswith(k) or k.startswith(a))
        close = starts or difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.7)
        if len(close) == 1:
            guesses.append(f"{close[0]!r} for {k[:60]!r}")
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""
