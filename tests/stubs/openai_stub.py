"""A stub of an OpenAI-compatible chat-completions endpoint (`POST /v1/chat/completions`):

with StubOpenAI([StubOpenAI.chat('{"source": "..."}')]) as s:
    ... base_url = s.base_url (ends in /v1, as vLLM / OpenRouter URLs do) ...
"""

from __future__ import annotations

import itertools
from typing import Any

from tests.stubs.server import Reply, StubServer

_ids = itertools.count(1)


class StubOpenAI(StubServer):
    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @staticmethod
    def chat(
        content: str | None,
        *,
        tokens_in: int = 900,
        tokens_out: int = 250,
        finish_reason: str = "stop",
        model: str = "stub-model",
        details: dict[str, Any] | None = None,
    ) -> Reply:
        """A chat completion; `details` is the usage's `prompt_tokens_details` (None: left out), e.g.
        {"cached_tokens": 800}."""
        body: dict[str, Any] = {
            "id": f"chatcmpl-stub{next(_ids)}",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }
        if details is not None:
            body["usage"]["prompt_tokens_details"] = details
        return Reply(200, body)

    @staticmethod
    def error(status: int, message_text: str = "stub error", headers: dict[str, str] | None = None) -> Reply:
        return Reply(
            status,
            {"error": {"message": message_text, "type": "stub_error", "code": status}},
            dict(headers or {}),
        )
