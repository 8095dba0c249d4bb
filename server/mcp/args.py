"""Refuse tool calls whose arguments the tool cannot take, in the tools' own plain wording.

The SDK builds each tool's argument model from its signature and drops keys it does not know, so a
misspelt `node` for `node_id` would silently run the tool without it. This middleware answers such a
call with an error naming the unknown arguments and the accepted ones, before anything runs; and it
validates the arguments with the tool's own model first, so a wrong type reads as the tools' other
refusals do ("search: …, got …") rather than as the SDK's pydantic dump with its links.
"""

from __future__ import annotations

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
                    msg = (
                        f"unknown argument(s) {listed} for tool {name!r}; accepted: "
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
