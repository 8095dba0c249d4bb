"""record_llm_call: account one language-model call of a search (tokens, dollars, latency, its prompt and answer,
or its error). The budgets in tokens and dollars, and every face's spend, are read from these records; the words
for what a call or a search spent, with the prompt cache's part, are here too, so that every face says it alike."""

from __future__ import annotations

from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import LLMCall, LLMCallRecord
from ksearch.worldmodel.store import LLMTotals


async def record_llm_call(ws: Workspace, search_id: int | None, call: LLMCallRecord) -> LLMCall:
    """Keep the call as its policy reported it, on the search (None: on no search; failed calls too, with their
    `error`); returns the stored record. NotFound for a search that does not exist: nothing is written."""
    return await ws.store.log_llm_call(search_id=search_id, **call.model_dump())


def call_cache_text(call: LLMCallRecord) -> str:
    """What one call's provider said of its prompt cache ("" for a call with no input: a failed try):
    `9,800 cache read, 1,200 cache write`; a count the provider did not give is said to be so, never 0."""
    if not call.tokens_in:
        return ""
    if call.cache_read_tokens is None and call.cache_write_tokens is None:
        return "cache not reported"
    read = (
        "reads not reported" if call.cache_read_tokens is None else f"{call.cache_read_tokens:,} cache read"
    )
    write = (
        "writes not reported"
        if call.cache_write_tokens is None
        else f"{call.cache_write_tokens:,} cache write"
    )
    return f"{read}, {write}"


def usage_text(t: LLMTotals) -> str:
    """A search's model usage in one line ("" with no model call): input tokens by what the prompt cache did
    with them, output tokens, and the dollars by what they paid for. What a provider did not report is said to
    be unknown, never counted as 0."""
    if not t.calls:
        return ""
    tokens = f"{t.tokens_in:,} input tokens ({_cache_split(t)}) and {t.tokens_out:,} output tokens"
    return f"model usage: {t.calls} calls, {tokens}; {_money(t)}"


def cache_text(t: LLMTotals) -> str:
    """What the prompt cache did with a search's input tokens and what that cost ("" with no input), for a
    face that shows the tokens and dollars elsewhere."""
    if not t.tokens_in:
        return ""
    split = _cache_split(t)
    if t.cache_read_usd or t.cache_write_usd:
        split += f"; {usd(t.cache_read_usd)} cache reads, {usd(t.cache_write_usd)} cache writes"
    return split


def usd(x: float) -> str:
    """Dollars to the cent, to a hundredth of a cent under a dollar (a cache read of a few thousand tokens)."""
    return f"${x:.2f}" if x >= 1 or x == 0 else f"${x:.4f}"


def _money(t: LLMTotals) -> str:
    money = usd(t.usd)
    if t.cache_read_usd or t.cache_write_usd:
        rest = max(0.0, t.usd - t.cache_read_usd - t.cache_write_usd)
        money += (
            f": {usd(t.cache_read_usd)} cache reads, {usd(t.cache_write_usd)} cache writes, "
            f"{usd(rest)} uncached input and output"
        )
    if t.unpriced_calls:
        money += f" (+{t.unpriced_calls} calls to unpriced models)"
    return money


def _cache_split(t: LLMTotals) -> str:
    reported_in = t.cache_read_tokens + t.cache_write_tokens + t.uncached_tokens_in
    if not reported_in:
        return "the provider did not say what its prompt cache served" if t.cache_unreported_calls else "none"
    if t.cache_write_unreported_calls and not t.cache_write_tokens:
        written = "writes not reported, billed as uncached"
    elif t.cache_write_unreported_calls:
        written = (
            f"{t.cache_write_tokens:,} written to it ({t.cache_write_unreported_calls} calls did not say)"
        )
    else:
        written = f"{t.cache_write_tokens:,} written to it"
    out = f"{t.cache_read_tokens:,} read from the prompt cache, {written}, {t.uncached_tokens_in:,} uncached"
    if t.cache_unreported_calls:
        out += f"; {t.cache_unreported_calls} calls did not report the cache"
    return out
