"""The OpenAI-compatible policy: any `/v1/chat/completions` endpoint (vLLM, Ollama, OpenRouter, OpenAI)
through httpx, asking for one JSON object that matches the phase's result schema.

Prompt caching: OpenAI (and vLLM's prefix caching, and others) reuse the longest prefix a request shares with an
earlier one, with no markers. A request is sent stable part first: the system message (the rules), then a user
turn that starts with the task brief and the phase's context and ends with this call's ask and the answer's
schema, so consecutive calls of a search share a byte-identical prefix. The usage's
`prompt_tokens_details.cached_tokens` (and OpenRouter's `cache_write_tokens`) say what the cache served.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any
from urllib.parse import urlsplit

import httpx

from ksearch.server.driver.policies.llm import (
    Completion,
    LLMPolicy,
    OutputSchema,
    ProviderError,
    Request,
    classify_status,
    parse_retry_after,
)
from ksearch.server.driver.policies.pricing import Price


def chat_url(base_url: str) -> str:
    """`.../v1` + `/chat/completions`. A bare host (`http://localhost:11434`) gets `/v1` added, since every
    compatible server serves the API there; any other path is taken as given (OpenRouter's `/api/v1`)."""
    base = base_url.rstrip("/")
    if urlsplit(base).path in ("", "/"):
        base += "/v1"
    return base + "/chat/completions"


class OpenAIPolicy(LLMPolicy):
    name = "openai"
    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        json_mode: bool = True,
        timeout_s: float = 600.0,
        max_retries: int = 5,
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
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL such as http://localhost:8000/v1, got {base_url!r}"
            )
        self.url = chat_url(base_url)
        self.api_key_env = api_key_env
        self.max_tokens = (
            max_tokens  # None: let the server decide (local servers reject sizes past their context)
        )
        self.temperature = temperature
        self.json_mode = json_mode
        key = os.environ.get(api_key_env)
        # Local servers (vLLM, Ollama) need no key; send one only when the environment has it.
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(timeout=timeout_s, headers=headers)

    def answer_hint(self, schema: OutputSchema) -> str:
        return (
            "Answer with exactly one JSON object and nothing else (no prose, no code fences around it), "
            f"matching this JSON schema:\n{json.dumps(schema.json_schema, separators=(',', ':'))}"
        )

    async def complete(self, request: Request, schema: OutputSchema) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": request.system}, *request.text_messages()],
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        try:
            r = await self._http.post(self.url, json=body)
        except httpx.TimeoutException as e:
            raise ProviderError(f"the request to {self.url} timed out", retryable=True) from e
        except httpx.TransportError as e:
            raise ProviderError(
                f"connection to {self.url} failed: {type(e).__name__}: {e}", retryable=True
            ) from e
        except httpx.HTTPError as e:  # e.g. a body that cannot be decoded: may pass on a retry
            raise ProviderError(
                f"the request to {self.url} failed: {type(e).__name__}: {e}", retryable=True
            ) from e

        if r.status_code >= 400:
            text = r.text
            if r.status_code == 400 and self.json_mode and "response_format" in text:
                # The server does not do JSON mode: ask again without it (the prompt still asks for JSON).
                self.json_mode = False
                raise ProviderError(
                    "HTTP 400: the server rejects response_format; retrying without JSON mode",
                    retryable=True,
                    status=400,
                    retry_after=0.0,
                    response_text=text,
                )
            err = classify_status(r.status_code, f"HTTP {r.status_code}: {_error_message(text)}", None, text)
            err.retry_after = parse_retry_after(r.headers)
            if err.auth:
                err.args = (f"{err.args[0]} (key from ${self.api_key_env})",)
            raise err

        try:
            data = r.json()
            choice = data["choices"][0]
            content = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise ProviderError(
                f"HTTP {r.status_code} with a body that is not a chat completion: {r.text[:300]!r}",
                retryable=True,
                status=r.status_code,
                response_text=r.text,
            ) from e
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        text = content if isinstance(content, str) else ""
        reason = choice.get("finish_reason")
        tokens_in = _count(usage.get("prompt_tokens"))
        read, write = _cache_counts(usage, tokens_in)
        return Completion(
            content=text or None,
            text=text,
            tokens_in=tokens_in,
            tokens_out=_count(usage.get("completion_tokens")),
            stop_reason=reason if isinstance(reason, str) else None,
            cache_read=read,
            cache_write=write,
        )

    async def aclose(self) -> None:
        await self._http.aclose()


def _count(value: object) -> int:
    """A token count from a usage block; a malformed one (a string, infinity, negative) counts as 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        return 0
    return int(value)


def _cache_counts(usage: dict[str, Any], tokens_in: int) -> tuple[int | None, int | None]:
    """(read, written) of the prompt tokens, from `prompt_tokens_details`: `cached_tokens` (OpenAI, vLLM, xAI,
    OpenRouter), `cache_write_tokens` (OpenRouter, for providers that bill writes). None where the server does not
    say, or says something no count can be (not a number, more than the prompt)."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        return None, None

    def part(key: str) -> int | None:
        value = details.get(key)
        if value is None or _count(value) != value:  # absent, or not a plain count
            return None
        return int(value) if value <= tokens_in else None

    read, write = part("cached_tokens"), part("cache_write_tokens")
    if read is not None and write is not None and read + write > tokens_in:
        return None, None
    return read, write


def _error_message(text: str) -> str:
    """The `error.message` of an OpenAI-style error body, else the start of the body."""
    try:
        err = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return text[:300]
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return str(err)[:300] if err else text[:300]
