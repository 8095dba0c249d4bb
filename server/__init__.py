"""ksearch faces: MCP server, CLI, driver agent and its policies, web UI."""
