"""A command-line MCP client for a language model acting as the host: one call per invocation, over
streamable HTTP to a running `ksearch serve --http` (the search state lives in the server's database).

    python bench/live_host/mcpc.py info                      # server instructions, tools, prompts
    python bench/live_host/mcpc.py call TOOL '{"arg": ...}'  # a tool call: its text (then `next`), then its
                                                             # structured content
    python bench/live_host/mcpc.py prompt NAME '{"arg": ...}'
    python bench/live_host/mcpc.py read URI

The URL comes from $KSEARCH_MCP_URL (default http://127.0.0.1:8765/mcp).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp.client import Client

URL = os.environ.get("KSEARCH_MCP_URL", "http://127.0.0.1:8765/mcp")


async def info_text(c: Client) -> str:
    """The server's instructions, its tools with their input schemas, and its prompts."""
    out = ["INSTRUCTIONS:\n" + c.instructions] if c.instructions else []
    for t in (await c.list_tools()).tools:
        out.append(f"\n## tool {t.name}\n{t.description}\ninput schema: {json.dumps(t.input_schema)}")
    for p in (await c.list_prompts()).prompts:
        args = ", ".join(f"{a.name}{'' if a.required else '?'}" for a in p.arguments or [])
        out.append(f"\n## prompt {p.name}({args})\n{p.description}")
    return "\n".join(out)


def texts_of(res: Any) -> str:
    """A tool result's text blocks (the summary, then `next`), as the host reads them."""
    return "\n".join(t for part in res.content if (t := getattr(part, "text", None)))


async def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("info", "call", "prompt", "read"):
        print(__doc__)
        return 2
    async with Client(URL) as c:
        if argv[0] == "info":
            print(await info_text(c))
            return 0
        args = json.loads(argv[2]) if len(argv) > 2 else {}
        if argv[0] == "call":
            res = await c.call_tool(argv[1], args)
            if res.is_error:
                print("ERROR: " + (res.content[0].text if res.content else ""))
                return 1
            print(texts_of(res))  # what the host reads first, then the structured content
            print("STRUCTURED:\n" + json.dumps(res.structured_content, indent=1))
            return 0
        if argv[0] == "prompt":
            got = await c.get_prompt(argv[1], {k: str(v) for k, v in args.items()})
            for m in got.messages:
                print(m.content.text)
            return 0
        res = await c.read_resource(argv[1])
        for part in res.contents:
            print(part.text)
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
