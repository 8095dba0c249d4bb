"""A stub of the Anthropic Messages API (`POST /v1/messages`) for the real `anthropic` SDK:

with StubAnthropic([StubAnthropic.rate_limited(retry_after=0), StubAnthropic.tool_call({...})]) as s:
    client = anthropic.AsyncAnthropic(base_url=s.base_url, api_key="test")
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tests.stubs.server import Recorded, Reply, StubServer

_ids = itertools.count(1)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def message(
    content: list[dict[str, Any]],
    *,
    tokens_in: int = 100,
    tokens_out: int = 50,
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-4-5",
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> dict[str, Any]:
    """A Messages API response; `cache_read` / `cache_write` fill the usage's cache fields (None: left out, as a
    proxy that does not report them would)."""
    usage: dict[str, Any] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return {
        "id": f"msg_stub{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


class StubAnthropic(StubServer):
    @staticmethod
    def tool_call(
        arguments: dict[str, Any],
        *,
        name: str | None = None,
        tokens_in: int = 1200,
        tokens_out: int = 300,
        stop_reason: str = "tool_use",
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> Callable[[Recorded], Reply]:
        """A tool_use answer; the tool's name is the one the request forced, unless `name` is given. `tokens_in` is
        the usage's `input_tokens`: the input after the last cache breakpoint, the cache's own apart."""

        def reply(req: Recorded) -> Reply:
            forced = (req.json().get("tool_choice") or {}).get("name", "unknown_tool")
            block = {
                "type": "tool_use",
                "id": f"toolu_stub{next(_ids)}",
                "name": name or forced,
                "input": arguments,
            }
            return Reply(
                200,
                message(
                    [block],
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    stop_reason=stop_reason,
                    cache_read=cache_read,
                    cache_write=cache_write,
                ),
            )

        return reply

    @staticmethod
    def text(text: str, *, tokens_in: int = 1000, tokens_out: int = 20) -> Reply:
        """A plain text answer (no tool call): malformed output for a structured phase."""
        return Reply(
            200, message([{"type": "text", "text": text}], tokens_in=tokens_in, tokens_out=tokens_out)
        )

    @staticmethod
    def error(status: int, message_text: str = "stub error", headers: dict[str, str] | None = None) -> Reply:
        kind = _ERROR_TYPES.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message_text}}
        return Reply(status, body, dict(headers or {}))

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> Reply:
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        return cls.error(429, "rate limited (stub)", headers)
