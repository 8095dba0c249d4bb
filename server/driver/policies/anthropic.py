"""The Anthropic policy: the Messages API through the `anthropic` SDK, with structured output by a forced
tool call (one tool per phase, its input schema taken from the phase's result model)."""

from __future__ import annotations

import json
import os
from typing import Any, cast

import anthropic

from ksearch.server.driver.policies.base import PolicyError
from ksearch.server.driver.policies.llm import (
    Completion,
    LLMPolicy,
    Message,
    OutputSchema,
    ProviderError,
    classify_status,
    parse_retry_after,
)

DEFAULT_MODEL = "claude-sonnet-4-5"


class AnthropicPolicy(LLMPolicy):
    name = "anthropic"
    provider = "anthropic"

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
        price: tuple[float, float] | None = None,
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

    async def complete(self, system: str, messages: list[Message], schema: OutputSchema) -> Completion:
        # Any: the SDK's overloads want its TypedDicts; these dicts have their shapes
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        try:
            msg = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=cast(Any, [{"role": m["role"], "content": m["content"]} for m in messages]),
                tools=cast(
                    Any,
                    [
                        {
                            "name": schema.name,
                            "description": schema.description,
                            "input_schema": schema.json_schema,
                        }
                    ],
                ),
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
        tokens_in = (usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
        tokens_in += getattr(usage, "cache_read_input_tokens", 0) or 0
        tokens_out = usage.output_tokens or 0
        call = next((b for b in msg.content if b.type == "tool_use" and b.name == schema.name), None)
        if call is not None:
            args = call.input if isinstance(call.input, dict) else None
            text = json.dumps(call.input, ensure_ascii=False)
            return Completion(args, text, tokens_in, tokens_out, msg.stop_reason)
        text = "\n".join(getattr(b, "text", "") for b in msg.content if b.type == "text")
        return Completion(None, text, tokens_in, tokens_out, msg.stop_reason)

    async def aclose(self) -> None:
        await self._client.close()


def _body_text(e: anthropic.APIStatusError) -> str:
    try:
        return e.response.text
    except Exception as read_error:  # a streamed body that can no longer be read
        return f"(body unavailable: {read_error})"
