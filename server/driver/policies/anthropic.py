"""The Anthropic policy: the Messages API through the `anthropic` SDK, with structured output by a forced
tool call (one tool per phase, its input schema taken from the phase's result model).

Prompt caching: a request's stable part is marked for Anthropic's prompt cache (`cache_control` breakpoints, at
most four a request), in the order the cache reads a prefix (tools, system, messages). Every request lists the
three phases' tools, the same each time, and forces the one its phase answers with, so that the tools and the
system blocks are one prefix for every call of a search; changing the forced tool only invalidates the cached
message blocks. The system blocks are the rules and the task brief (each marked: the rules are also the same for
the next task of a suite in the same language), the first user turn starts with the phase's context parts (each
marked: the bank's kernels, the intent and its base code), then this call's ask.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

import anthropic

from ksearch.server.driver.policies.base import PolicyError
from ksearch.server.driver.policies.llm import (
    Completion,
    LLMPolicy,
    OutputSchema,
    ProviderError,
    Request,
    classify_status,
    parse_retry_after,
    schema_for,
)
from ksearch.server.driver.policies.pricing import ANTHROPIC_CACHE_READ, ANTHROPIC_CACHE_WRITE, Price
from ksearch.tools.prompting.fill import PHASES

DEFAULT_MODEL = "claude-sonnet-4-5"
MAX_CACHE_MARKS = 4  # the Messages API's limit of cache_control breakpoints per request
CACHE_MARK = {"type": "ephemeral"}  # the default 5-minute lifetime, the one pricing.py's write rate is for


class AnthropicPolicy(LLMPolicy):
    name = "anthropic"
    provider = "anthropic"
    cache_multipliers = (ANTHROPIC_CACHE_WRITE, ANTHROPIC_CACHE_READ)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 16_000,
        max_retries: int = 5,
        *,
        timeout_s: float = 600.0,
        temperature: float | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        retry_after_limit_s: float = 300.0,
        price: Price | tuple[float, float] | None = None,
    ) -> None:
        super().__init__(
            model=model,
            max_retries=max_retries,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            retry_after_limit_s=retry_after_limit_s,
            price=price,
        )
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise PolicyError(
                "the anthropic policy needs an API key: set ANTHROPIC_API_KEY (or pass api_key); "
                "without one, use the offline 'tuner' policy"
            )
        self.max_tokens = max_tokens
        self.temperature = temperature
        # Retries are ours (bounded, recorded, honouring retry-after), so the SDK's own are off.
        self._client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s
        )

    def answer_hint(self, schema: OutputSchema) -> str:
        return f"Answer by calling the `{schema.name}` tool once, with the complete answer as its input."

    async def complete(self, request: Request, schema: OutputSchema) -> Completion:
        # Any: the SDK's overloads want its TypedDicts; these dicts have their shapes
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        try:
            msg = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=cast(Any, system_blocks(request)),
                messages=cast(Any, message_blocks(request)),
                tools=cast(Any, TOOLS),
                tool_choice={"type": "tool", "name": schema.name},
                **extra,
            )
        except anthropic.APIStatusError as e:
            body = _body_text(e)
            raise classify_status(
                e.status_code,
                f"HTTP {e.status_code}: {e.api_message or body[:300] or e}",
                parse_retry_after(e.response.headers),
                body,
            ) from e
        except anthropic.APITimeoutError as e:
            raise ProviderError("the request timed out", retryable=True) from e
        except anthropic.APIConnectionError as e:
            raise ProviderError(f"connection failed: {e}", retryable=True) from e
        except anthropic.APIError as e:  # e.g. a response the SDK could not parse: may pass on a retry
            raise ProviderError(f"{type(e).__name__}: {e}", retryable=True) from e
        except anthropic.AnthropicError as e:  # client-side configuration (credentials, options): permanent
            raise ProviderError(f"{type(e).__name__}: {e}", retryable=False) from e

        if (
            not isinstance(msg, anthropic.types.Message)
            or msg.usage is None
            or not isinstance(msg.content, list)
        ):
            # e.g. a proxy's HTML error page or a cut-off body with status 200: the SDK hands it over unparsed
            raise ProviderError(
                f"HTTP 200 with a body that is not a Messages API response: {str(msg)[:300]!r}",
                retryable=True,
            )
        usage = msg.usage
        # input_tokens counts only the input after the last cache breakpoint; the cache's own are apart. A field the
        # response leaves out (a proxy's) is not said, not zero.
        read = _count(getattr(usage, "cache_read_input_tokens", None))
        write = _count(getattr(usage, "cache_creation_input_tokens", None))
        tokens_in = (_count(usage.input_tokens) or 0) + (read or 0) + (write or 0)
        tokens_out = _count(usage.output_tokens) or 0
        call = next((b for b in msg.content if b.type == "tool_use" and b.name == schema.name), None)
        if call is not None:
            args = call.input if isinstance(call.input, dict) else None
            text = json.dumps(call.input, ensure_ascii=False)
            return Completion(args, text, tokens_in, tokens_out, msg.stop_reason, read, write)
        text = "\n".join(getattr(b, "text", "") for b in msg.content if b.type == "text")
        return Completion(None, text, tokens_in, tokens_out, msg.stop_reason, read, write)

    async def aclose(self) -> None:
        await self._client.close()


# Every phase's tool, in the phases' order, in every request: the tools are the first part of the cached prefix, so
# they stay the same whichever phase asks.
TOOLS: list[dict[str, Any]] = [
    {"name": s.name, "description": s.description, "input_schema": s.json_schema}
    for s in (schema_for(p) for p in PHASES)
]


def system_blocks(request: Request) -> list[dict[str, Any]]:
    """The rules, then the task brief: each marked for the prompt cache."""
    return [
        {"type": "text", "text": request.system, "cache_control": CACHE_MARK},
        {"type": "text", "text": request.task, "cache_control": CACHE_MARK},
    ]


def message_blocks(request: Request) -> list[dict[str, Any]]:
    """The turns; the first starts with the context parts, each marked while breakpoints are left."""
    first, *rest = request.messages
    left = MAX_CACHE_MARKS - 2  # the system blocks hold two
    content: list[dict[str, Any]] = []
    for i, part in enumerate(request.context):
        block: dict[str, Any] = {"type": "text", "text": part}
        if i < left:
            block["cache_control"] = CACHE_MARK
        content.append(block)
    content.append({"type": "text", "text": first["content"]})
    return [
        {"role": first["role"], "content": content},
        *({"role": m["role"], "content": m["content"]} for m in rest),
    ]


def _count(value: object) -> int | None:
    """A token count from the usage block; None when it is absent or not a count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _body_text(e: anthropic.APIStatusError) -> str:
    try:
        return e.response.text
    except Exception as read_error:  # a streamed body that can no longer be read
        return f"(body unavailable: {read_error})"
