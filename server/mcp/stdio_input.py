"""The stdio transport's input side: JSON-RPC lines from the host, made decodable before the SDK sees them.

A lone UTF-16 surrogate escape (`"\\ud800"`) is valid JSON, and JavaScript hosts send one for a broken
string, but it is not valid Unicode: the SDK's reader cannot decode such a line and drops it without
answering, so the host waits for its own timeout. Here such escapes become U+FFFD, the request gets
its answer (usually a refusal naming the field), and every other line passes through untouched.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        # valid pairs were already combined by json.loads; what is left alone becomes U+FFFD
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def decodable(line: str) -> str:
    """`line` with lone surrogate escapes replaced by U+FFFD (unchanged if it has none or is not JSON)."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        parsed = json.loads(line)
    except ValueError:
        return line  # not JSON at all: the SDK answers that as it always does
    cleaned = _clean(parsed)
    if cleaned == parsed:
        return line
    return json.dumps(cleaned, ensure_ascii=False) + ("\n" if line.endswith("\n") else "")


class HostLines:
    """An async iterator over stdin's lines (UTF-8, undecodable bytes replaced), each made decodable."""

    def __init__(self) -> None:
        # fd 0 itself: the SDK reads the same descriptor when it is given no stream of its own
        self._file = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._file:
            yield decodable(line)
