"""The bases of the tools' input and output models.

Each field's docstring (the string literal after it) becomes its description in the JSON schema an MCP host
reads, so a field is explained once, next to its type.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ToolModel(BaseModel):
    """A tool's answer, or a part of one."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class ToolIn(ToolModel):
    """A tool's input: an argument it does not know is refused, never ignored."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
