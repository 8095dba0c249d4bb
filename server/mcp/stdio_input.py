"""The stdio transport's input side: JSON-RPC lines from the host, made decodable before the SDK sees them,
and an answer for the lines the SDK cannot read.

A lone UTF-16 surrogate escape (`"\\ud800"`) is valid JSON, and JavaScript hosts send one for a broken
string, but it is not valid Unicode: the SDK's reader cannot decode such a line and drops it without
answering, so the host waits for its own timeout. Here such escapes become U+FFFD, the request gets
its answer (usually a refusal naming the field), and every other line passes through untouched.

The SDK drops every other line it cannot read unanswered too: a line that is not JSON, a JSON-RPC batch
(MCP dropped batches in protocol version 2025-06-18) and JSON that is no JSON-RPC message. Those get the
JSON-RPC answer here instead (parse error, or invalid request naming the request's id where it has one),
and the SDK never sees them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.types import INVALID_REQUEST, PARSE_ERROR, JSONRPCNotification, jsonrpc_message_adapter
from pydantic import ValidationError

log = logging.getLogger("ksearch.mcp")

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# An answer is a single write() of under PIPE_BUF (4096) bytes, which a pipe keeps in one piece (unless the
# host's own request id is kilobytes long); the SDK writes each message with one write() as well, so the two
# could interleave only while the host stops reading in the middle of a message larger than the pipe's free
# space. The excerpt of the host's line an answer quotes is bounded to keep answers that short.
_EXCERPT = 80
_BATCH = (
    "Invalid Request: JSON-RPC batches are not accepted (MCP dropped them in protocol version 2025-06-18); "
    "nothing in this batch was run: send each message as a JSON object on its own line"
)


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
        return line  # not JSON at all: refusals() answers it
    cleaned = _clean(parsed)
    if cleaned == parsed:
        return line
    return json.dumps(cleaned, ensure_ascii=False) + ("\n" if line.endswith("\n") else "")


def _error(id_: int | str | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _excerpt(line: str) -> str:
    text = line.strip()
    if len(text) <= _EXCERPT:
        return repr(text)
    return f"{text[:_EXCERPT]!r} (first {_EXCERPT} of {len(text)} characters)"


def _request_id(message: Any) -> int | str | None:
    """The id of what reads as a request; None otherwise. A malformed *response* is never answered with
    its id: that id is one of this server's requests, and the host would take the error as its own."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    id_ = message.get("id")
    return id_ if isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool)) else None


def _unanswerable_id(line: str) -> list[dict[str, Any]] | None:
    """The refusal of what the SDK read as a notification although it has an id (`"id": null`, a bool, an
    object: no id the SDK accepts): the SDK drops the id and never answers, so the host would wait for its own
    timeout. None for a true notification."""
    if '"id"' not in line:  # the cheap test first: a message without an id key is what it claims to be
        return None
    message = json.loads(line)
    if not isinstance(message, dict) or "id" not in message:
        return None
    id_ = message["id"]
    return [
        _error(
            None,
            INVALID_REQUEST,
            f"Invalid Request: the id of {_excerpt(line)} is {json.dumps(id_)[:_EXCERPT]}: a request's id is "
            "a string or an integer (MCP never accepts null); a notification has no id at all",
        )
    ]


def refusals(line: str) -> list[dict[str, Any]] | None:
    """The JSON-RPC error responses for a host line the SDK cannot read; None for a line it reads (a
    JSON-RPC message), [] for a blank line (no message, nothing to answer)."""
    if not line.strip():
        return []
    try:
        parsed = jsonrpc_message_adapter.validate_json(line, by_name=False)  # exactly the SDK's own check
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "json_invalid":
            return [_error(None, PARSE_ERROR, f"Parse error: {first['msg']}: {_excerpt(line)}")]
    else:
        return _unanswerable_id(line) if isinstance(parsed, JSONRPCNotification) else None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as e:  # pydantic parsed it; json should too, but never crash here
        return [_error(None, PARSE_ERROR, f"Parse error: {type(e).__name__}: {_excerpt(line)}")]
    if isinstance(message, list):
        ids = [i for i in map(_request_id, message) if i is not None]
        return [_error(i, INVALID_REQUEST, _BATCH) for i in ids] or [_error(None, INVALID_REQUEST, _BATCH)]
    return [
        _error(
            _request_id(message),
            INVALID_REQUEST,
            f"Invalid Request: {_excerpt(line)} is no JSON-RPC 2.0 request, notification or response: "
            "a request is an object with jsonrpc '2.0', an id, a method and, optionally, params that are "
            "an object",
        )
    ]


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class HostLines:
    """An async iterator over stdin's lines (UTF-8, undecodable bytes replaced), each made decodable; lines
    the SDK cannot read are answered here and not passed on.

    Construct it before the SDK's stdio_server starts: that diverts fd 1 to stderr (stray prints must miss
    the wire), so the answers are written to a duplicate of the wire taken here.
    """

    def __init__(self) -> None:
        # fd 0 itself: the SDK reads the same descriptor when it is given no stream of its own
        self._file = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        self._wire = os.dup(1)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        try:
            async for raw in self._file:
                line = decodable(raw)
                answers = refusals(line)
                if answers is None:
                    yield line
                    continue
                for answer in answers:
                    log.warning(
                        "answered a host line the MCP SDK cannot read: %s", answer["error"]["message"]
                    )
                    data = (json.dumps(answer) + "\n").encode()
                    try:
                        await anyio.to_thread.run_sync(_write_all, self._wire, data)
                    except OSError as e:  # the host hung up: stdin's end will stop the server
                        log.warning("could not answer the host: %s", e)
        finally:
            os.close(self._wire)
