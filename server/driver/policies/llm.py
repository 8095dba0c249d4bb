"""What every LLM-backed policy shares: prompts, structured output, validation with one corrective
retry, retries with backoff on transient failures, and per-call accounting.

A provider subclass implements only `complete` (one request, errors translated to ProviderError) and
`answer_hint` (how the model must deliver its answer: a tool call, a JSON object).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ValidationError

from ksearch.server.driver.policies.base import (
    CallRecord,
    CodeResult,
    InitContext,
    InitResult,
    Policy,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.server.driver.policies.pricing import Price, as_price, call_cost, price_for
from ksearch.tools.prompting.fill import Phase, PromptParts, prompt_parts
from ksearch.worldmodel.errors import KsearchError


class Message(TypedDict):
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class OutputSchema:
    """The structured answer one phase expects: a tool for tool-use providers, a JSON schema for others."""

    name: str
    description: str
    json_schema: dict[str, Any]
    model: type[BaseModel]


@dataclass(frozen=True)
class Request:
    """One request, its stable part first: the prompt's parts (tools/prompting/fill.py, PromptParts: the rules and
    the task brief the same for every call of a search, each context part for the next calls of the same phase),
    then `messages`, this call's turns, the first one's text (the ask, and how to answer) coming after the context.
    A provider sends them in this order, so that consecutive requests share a byte-identical prefix."""

    parts: PromptParts
    messages: list[Message]

    @property
    def system(self) -> str:
        return self.parts.system

    @property
    def task(self) -> str:
        return self.parts.task

    @property
    def context(self) -> tuple[str, ...]:
        return self.parts.context

    def text_messages(self) -> list[Message]:
        """The turns with the first one's text whole (task, context, ask), for a provider that takes text."""
        first, *rest = self.messages
        whole = "\n".join((self.task, *self.context, first["content"]))
        return [{"role": first["role"], "content": whole}, *rest]


@dataclass
class Completion:
    """One successful provider response."""

    content: dict[str, Any] | str | None  # structured arguments when the provider returned them, else text
    text: str  # the response as text, for the record and for a corrective turn
    tokens_in: int = 0  # every input token, read from the prompt cache or not
    tokens_out: int = 0
    stop_reason: str | None = None  # "max_tokens" / "length" means the answer was cut off
    cache_read: int | None = None  # of tokens_in, read from the provider's prompt cache (None: not said)
    cache_write: int | None = None  # of tokens_in, written to it at a write rate (None: not said)


class ProviderError(KsearchError):
    """One failed request, classified so the retry loop can decide what to do."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        auth: bool = False,
        response_text: str = "",
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.auth = auth
        self.response_text = response_text


class OutputInvalid(KsearchError):
    """The model answered, but not with something usable; `problems` go back to it."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# HTTP statuses worth another try: timeouts, conflicts, rate limits, server errors (529 = overloaded).
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def classify_status(status: int, message: str, retry_after: float | None, body: str) -> ProviderError:
    if status in (401, 403):
        return ProviderError(message, retryable=False, status=status, auth=True, response_text=body)
    retryable = status in RETRYABLE_STATUS or status >= 500
    return ProviderError(
        message, retryable=retryable, status=status, retry_after=retry_after, response_text=body
    )


def _seconds(value: str | None, scale: float = 1.0) -> float | None:
    try:
        return None if value is None else max(0.0, float(value) * scale)
    except ValueError:
        return None


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None when absent
    or malformed (our own backoff applies then)."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = _seconds(lower.get("retry-after-ms"), 1e-3)
    if ms is not None:
        return ms
    value = lower.get("retry-after")
    secs = _seconds(value)
    if secs is not None or not value:
        return secs
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(
    attempt: int, base_s: float, max_s: float, retry_after: float | None, rng: random.Random
) -> float:
    """The wait before retry number `attempt` (0-based): the server's retry-after when it gave one,
    else exponential with jitter (half to full of the step) so that many clients do not retry in step."""
    if retry_after is not None:
        return retry_after
    return rng.uniform(0.5, 1.0) * min(max_s, base_s * (2**attempt))


# --------------------------------------------------------------------------- schemas


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic puts nested models under $defs; inline them so every provider reads one plain schema."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = walk(defs[ref.removeprefix("#/$defs/")])
                extra = {k: walk(v) for k, v in node.items() if k != "$ref"}
                return {**target, **extra}
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


_SCHEMA_INFO: dict[str, tuple[str, str, type[BaseModel]]] = {
    "init": ("submit_analysis", "Submit the kernel analysis and the first optimization intents.", InitResult),
    "write_code": ("submit_code", "Submit the complete candidate module for the intent.", CodeResult),
    "update": ("submit_tree_update", "Submit the reflection and the edits to the intent tree.", UpdateResult),
}


def schema_for(phase: Phase) -> OutputSchema:
    name, description, model = _SCHEMA_INFO[phase]
    return OutputSchema(name, description, _inline_refs(model.model_json_schema()), model)


# --------------------------------------------------------------------------- parsing

_FENCE = re.compile(r"^\s*```[\w+-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(\{.*?\})\s*```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_fences(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's text answer: reasoning blocks (`<think>`) dropped, a fenced JSON block
    preferred, else the first object in the text; surrounding prose tolerated."""
    body = _THINK.sub("", text).strip()
    fenced = _JSON_FENCE.search(body)
    body = fenced.group(1) if fenced else body
    start = body.find("{")
    if start < 0:
        raise OutputInvalid(["the answer holds no JSON object (expected one object, no prose around it)"])
    try:
        value, _ = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError as e:
        raise OutputInvalid([f"the JSON does not parse: {e.msg} at line {e.lineno} column {e.colno}"]) from e
    if not isinstance(value, dict):
        raise OutputInvalid(["the answer must be one JSON object"])
    return value


def _json_or_text(text: str) -> Any:
    """The decoded JSON, or the text unchanged (validation then reports the field with what was sent)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _validation_problems(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(answer)"
        got = repr(e.get("input"))
        got = got if len(got) <= 80 else got[:77] + "..."
        out.append(f"{loc}: {e['msg']} (got {got})")
    return out


_LIST_FIELDS = ("intents", "new_intents", "edits")


def parse_answer(phase: Phase, content: dict[str, Any] | str | None, ctx: Any) -> BaseModel:
    """Validate one answer against the phase's result model; OutputInvalid lists what to fix."""
    schema = schema_for(phase)
    if content is None:
        raise OutputInvalid(["no answer was given (no tool call and no text): send the result as asked"])
    data = extract_json_object(content) if isinstance(content, str) else dict(content)
    # Models sometimes send a nested list as a JSON string; decoding it loses nothing.
    for key in _LIST_FIELDS:
        if isinstance(data.get(key), str):
            data[key] = _json_or_text(data[key])
    if phase == "write_code":
        data.setdefault("language", ctx.task.language)
        if isinstance(data.get("source"), str):
            data["source"] = strip_fences(data["source"])
    try:
        result = schema.model.model_validate(data)
    except ValidationError as e:
        raise OutputInvalid(_validation_problems(e)) from e
    if isinstance(result, CodeResult):
        problems = []
        if result.language != ctx.task.language:
            problems.append(f"language: this search is in {ctx.task.language!r}, not {result.language!r}")
        if not result.source.strip():
            problems.append("source: empty; send the complete module")
        if problems:
            raise OutputInvalid(problems)
    return result


# --------------------------------------------------------------------------- the policy


class LLMPolicy(Policy):
    """A policy that asks a chat model. Subclasses: `complete` (one request) and `answer_hint`."""

    provider: str = "llm"
    # A price given as (input, output) bills cache writes and reads at these multiples of its input rate
    # (pricing.as_price): by default the most any listed provider charges, never an understated spend.
    cache_multipliers: tuple[float, float] = (1.25, 1.0)

    def __init__(
        self,
        *,
        model: str,
        max_retries: int = 5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        retry_after_limit_s: float = 300.0,
        price: Price | tuple[float, float] | None = None,
    ) -> None:
        super().__init__()
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_limit_s = retry_after_limit_s
        write, read = self.cache_multipliers
        self.price = (
            as_price(price, cache_write=write, cache_read=read) if price is not None else price_for(model)
        )
        self._rng = random.Random()

    @abstractmethod
    async def complete(self, request: Request, schema: OutputSchema) -> Completion:
        """Send one request, in its order (stable part first). Raise ProviderError for any failure of the
        request itself."""

    @abstractmethod
    def answer_hint(self, schema: OutputSchema) -> str:
        """The closing instruction saying how to deliver the answer."""

    # -- phases

    async def init(self, ctx: InitContext) -> InitResult:
        return await self._structured("init", ctx)  # type: ignore[return-value]

    async def write_code(self, ctx: WriteContext) -> CodeResult:
        return await self._structured("write_code", ctx)  # type: ignore[return-value]

    async def update(self, ctx: UpdateContext) -> UpdateResult:
        return await self._structured("update", ctx)  # type: ignore[return-value]

    # -- machinery

    async def _structured(self, phase: Phase, ctx: InitContext | WriteContext | UpdateContext) -> BaseModel:
        parts = prompt_parts(phase, ctx)
        schema = schema_for(phase)
        messages: list[Message] = [{"role": "user", "content": f"{parts.ask}\n{self.answer_hint(schema)}"}]
        problems: list[str] = []
        for turn in range(2):  # the answer, then at most one corrective retry
            request = Request(parts, messages)
            completion, rec = await self._request(phase, request, schema)
            try:
                result = parse_answer(phase, completion.content, ctx)
            except OutputInvalid as e:
                problems = list(e.problems)
                if completion.stop_reason in ("max_tokens", "length"):
                    problems.append("the answer was cut off at the output token limit: make it shorter")
                rec.error = "invalid output: " + "; ".join(problems)
                await self._record(rec)
                if turn == 0:
                    messages = [
                        *messages,
                        {"role": "assistant", "content": completion.text.strip() or "(no answer)"},
                        {"role": "user", "content": self._correction(problems, schema)},
                    ]
                continue
            await self._record(rec)
            return result
        raise PolicyError(
            f"{self.provider} model {self.model} gave an unusable {phase} answer twice (the second after being "
            f"told what was wrong); last problems: {'; '.join(problems)}"
        )

    def _correction(self, problems: list[str], schema: OutputSchema) -> str:
        listed = "\n".join(f"- {p}" for p in problems)
        return f"Your answer could not be used:\n{listed}\nAnswer again in full, fixing these.\n{self.answer_hint(schema)}"

    async def _request(
        self, phase: Phase, request: Request, schema: OutputSchema
    ) -> tuple[Completion, CallRecord]:
        """One completion, retried on transient failures. Failed tries are recorded here; the successful
        one's record is returned so the caller can add a validation error before storing it."""
        request_text = _render_request(request.system, request.text_messages())
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            t0 = time.monotonic()
            try:
                completion = await self.complete(request, schema)
            except ProviderError as e:
                await self._record(
                    CallRecord(
                        phase=phase,
                        provider=self.provider,
                        model=self.model,
                        latency_s=time.monotonic() - t0,
                        request=request_text,
                        response=e.response_text,
                        error=str(e),
                        priced=self.price is not None,
                    )
                )
                failures.append(str(e))
                self._raise_if_final(e, attempt, failures)
                await asyncio.sleep(
                    backoff_delay(attempt, self.backoff_base_s, self.backoff_max_s, e.retry_after, self._rng)
                )
                continue
            cost = call_cost(
                completion.tokens_in,
                completion.tokens_out,
                self.price,
                cache_read=completion.cache_read,
                cache_write=completion.cache_write,
            )
            rec = CallRecord(
                phase=phase,
                provider=self.provider,
                model=self.model,
                tokens_in=completion.tokens_in,
                tokens_out=completion.tokens_out,
                cost_usd=cost.total,
                latency_s=time.monotonic() - t0,
                request=request_text,
                response=completion.text,
                priced=self.price is not None,
                cache_read_tokens=completion.cache_read,
                cache_write_tokens=completion.cache_write,
                cache_read_usd=cost.cache_read,
                cache_write_usd=cost.cache_write,
            )
            return completion, rec
        raise AssertionError("unreachable: the last failed try raises")

    def _raise_if_final(self, e: ProviderError, attempt: int, failures: list[str]) -> None:
        who = f"{self.provider} ({self.model})"
        if e.auth:
            raise PolicyError(
                f"the API key was rejected by {who}: HTTP {e.status}: {e}. Check the key "
                f"(and that it may use this model); nothing was retried."
            ) from e
        if not e.retryable:
            raise PolicyError(
                f"{who} refused the request: {e}. Not retried: the same request would fail again."
            ) from e
        if e.retry_after is not None and e.retry_after > self.retry_after_limit_s:
            raise PolicyError(
                f"{who} asked to wait {e.retry_after:.0f} s before retrying, more than the "
                f"{self.retry_after_limit_s:.0f} s limit: {e}"
            ) from e
        if attempt >= self.max_retries:
            raise PolicyError(
                f"{who} kept failing: {len(failures)} tries, all failed; last: {failures[-1]}"
            ) from e


def _render_request(system: str, messages: list[Message]) -> str:
    parts = [f"[system]\n{system}"]
    parts += [f"[{m['role']}]\n{m['content']}" for m in messages]
    return "\n\n".join(parts)
