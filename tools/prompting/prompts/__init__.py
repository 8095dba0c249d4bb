"""Prompt files (Markdown templates) for the driver's policies and the MCP server's prompts."""
