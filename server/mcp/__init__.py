"""The MCP face: tools/ exposed as MCP tools, resources and prompts (stdio or streamable HTTP)."""
