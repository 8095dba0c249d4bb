"""Prompt caching, end to end against stub providers on 127.0.0.1 with the real clients: consecutive requests of a
search share a byte-identical prefix (the rules, the task brief, the phase's context), Anthropic's requests mark
it with `cache_control` breakpoints (at most four), the OpenAI-compatible ones carry no markers, and the cached
tokens the providers report are accounted (tokens, dollars at the cache rates, stored, printed) — or said to be
unknown when a provider does not report them, never counted as zero."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ksearch.server.driver.policies.anthropic import AnthropicPolicy
from ksearch.server.driver.policies.base import CallRecord, UpdateContext, WriteContext
from ksearch.server.driver.policies.openai import OpenAIPolicy
from ksearch.server.driver.policies.pricing import price_for
from ksearch.tools.llm_calls import call_cache_text, usage_text
from ksearch.tools.prompting.fill import prompt_parts
from ksearch.worldmodel.store import Store
from tests.policies.policy_data import VALID_CODE, VALID_UPDATE
from tests.stubs import StubAnthropic, StubOpenAI, StubServer

pytestmark = pytest.mark.anyio

MARK = {"type": "ephemeral"}
BANK = "- softmax_fp16 (similarity 0.92): one program per row, BLOCK_N 4096, 1.8x vs eager\n```python\n# kernel\n```"


def _anthropic(stub: StubServer, records: list[CallRecord]) -> AnthropicPolicy:
    policy = AnthropicPolicy(base_url=stub.base_url, api_key="test-key", max_retries=0, timeout_s=10.0)

    async def sink(rec: CallRecord) -> None:
        records.append(rec)

    policy.on_call(sink)
    return policy


def _attempts(write_ctx: WriteContext) -> tuple[WriteContext, WriteContext]:
    """Two consecutive write_code calls on one intent: the second with the first's feedback and a changed tree."""
    first = write_ctx.model_copy(
        update={"bank": BANK, "tree_view": "#1 root\n  #2 fuse (active, 0 attempts)"}
    )
    second = first.model_copy(
        update={
            "feedback": "incorrect: max abs err 0.5 at [3, 7]",
            "feedback_attempt_id": 11,
            "attempt_index": 1,
            "tree_view": "#1 root\n  #2 fuse (active, 1 attempt)",
        }
    )
    return first, second


def _marks(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')


def _anthropic_prefix(body: dict[str, Any]) -> str:
    """What the cache reads of a request: tools, system blocks, then the first turn's blocks up to its last mark."""
    content = body["messages"][0]["content"]
    last = max(i for i, b in enumerate(content) if "cache_control" in b)
    return json.dumps([body["tools"], body["system"], content[: last + 1]], sort_keys=True)


async def test_anthropic_marks_the_stable_prefix_and_two_attempts_share_it(
    write_ctx: WriteContext, update_ctx: UpdateContext
) -> None:
    first, second = _attempts(write_ctx)
    records: list[CallRecord] = []
    script = [
        StubAnthropic.tool_call(VALID_CODE, tokens_in=700, cache_write=5200, tokens_out=400),
        StubAnthropic.tool_call(VALID_CODE, tokens_in=900, cache_read=5200, tokens_out=400),
        StubAnthropic.tool_call(VALID_UPDATE, tokens_in=2000, cache_read=3100, cache_write=0, tokens_out=300),
    ]
    with StubAnthropic(script) as s:
        policy = _anthropic(s, records)
        await policy.write_code(first)
        await policy.write_code(second)
        await policy.update(update_ctx.model_copy(update={"bank": BANK}))
        await policy.aclose()
    one, two, upd = (r.json() for r in s.requests)

    # the markers: the rules and the task brief (system), the bank's kernels and the intent with its base code
    # (the first turn's context); this call's ask is not marked; four in all, the API's limit
    parts = prompt_parts("write_code", first)
    assert one["system"] == [
        {"type": "text", "text": parts.system, "cache_control": MARK},
        {"type": "text", "text": parts.task, "cache_control": MARK},
    ]
    blocks = one["messages"][0]["content"]
    assert [b.get("cache_control") for b in blocks] == [MARK, MARK, None]
    assert blocks[0]["text"].startswith("## Related kernels") and blocks[1]["text"].startswith(
        "# Implement intent"
    )
    assert "What to do (attempt 1)" in blocks[2]["text"]
    assert _marks(one) == _marks(two) == 4 and _marks(upd) <= 4

    # two consecutive attempts: the same prefix, byte for byte, through the last marked block; then their asks differ
    assert _anthropic_prefix(one) == _anthropic_prefix(two)
    assert one["messages"][0]["content"][-1] != two["messages"][0]["content"][-1]
    assert "max abs err 0.5" in two["messages"][0]["content"][-1]["text"]
    # another phase forces another tool but lists the same tools and sends the same system blocks: that prefix holds
    assert upd["tool_choice"]["name"] == "submit_tree_update" != one["tool_choice"]["name"]
    assert json.dumps([upd["tools"], upd["system"]]) == json.dumps([one["tools"], one["system"]])

    # usage: the cache's tokens are part of the input, billed at their rates (claude-sonnet-4-5: $3 input, $3.75
    # a cache write, $0.30 a cache read, $15 output per Mtok)
    w1, w2, u = records
    assert (w1.tokens_in, w1.cache_read_tokens, w1.cache_write_tokens) == (5900, None, 5200)
    assert (w2.tokens_in, w2.cache_read_tokens, w2.cache_write_tokens) == (6100, 5200, None)
    assert (u.tokens_in, u.cache_read_tokens, u.cache_write_tokens) == (5100, 3100, 0)
    assert w1.cache_write_usd == pytest.approx(5200 * 3.75 / 1e6) and w1.cache_read_usd == 0
    assert w1.cost_usd == pytest.approx((700 * 3 + 5200 * 3.75 + 400 * 15) / 1e6)
    assert w2.cost_usd == pytest.approx((900 * 3 + 5200 * 0.3 + 400 * 15) / 1e6)
    assert u.cost_usd == pytest.approx((2000 * 3 + 3100 * 0.3 + 300 * 15) / 1e6)
    assert call_cache_text(u) == "3,100 cache read, 0 cache write"
    assert (
        call_cache_text(w1) == "reads not reported, 5,200 cache write"
    )  # a field left out is unknown, not 0


async def test_a_corrective_retry_reuses_the_marked_prefix(write_ctx: WriteContext) -> None:
    first, _ = _attempts(write_ctx)
    with StubAnthropic([StubAnthropic.text("no tool call"), StubAnthropic.tool_call(VALID_CODE)]) as s:
        policy = _anthropic(s, [])
        await policy.write_code(first)
        await policy.aclose()
    answer, retry = (r.json() for r in s.requests)
    assert _anthropic_prefix(answer) == _anthropic_prefix(retry) and _marks(retry) == 4
    assert [m["role"] for m in retry["messages"]] == ["user", "assistant", "user"]


async def test_openai_sends_the_same_order_without_markers(
    monkeypatch: pytest.MonkeyPatch, write_ctx: WriteContext, update_ctx: UpdateContext
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    first, second = _attempts(write_ctx)
    records: list[CallRecord] = []
    script = [
        StubOpenAI.chat(json.dumps(VALID_CODE), tokens_in=6000, details={"cached_tokens": 0}),
        StubOpenAI.chat(json.dumps(VALID_CODE), tokens_in=6200, details={"cached_tokens": 5120}),
        StubOpenAI.chat(json.dumps(VALID_UPDATE), tokens_in=4000),  # a server that says nothing of its cache
    ]
    with StubOpenAI(script) as s:
        policy = OpenAIPolicy(base_url=s.base_url, model="gpt-4o-mini", max_retries=0)
        policy.on_call(lambda rec: _append(records, rec))
        await policy.write_code(first)
        await policy.write_code(second)
        await policy.update(update_ctx.model_copy(update={"bank": BANK}))
        await policy.aclose()
    bodies = [r.json() for r in s.requests]
    assert all("cache_control" not in r.body.decode() for r in s.requests)
    # the system message, then one user turn that starts with the task brief and the phase's context
    parts = prompt_parts("write_code", first)
    prefix = "\n".join((parts.task, *parts.context))
    one, two = (b["messages"] for b in bodies[:2])
    assert one[0] == two[0] == {"role": "system", "content": parts.system}
    assert one[1]["content"].startswith(prefix + "\n") and two[1]["content"].startswith(prefix + "\n")
    assert one[1]["content"] != two[1]["content"]
    # and another phase shares the system message and the task brief
    assert bodies[2]["messages"][0] == one[0] and bodies[2]["messages"][1]["content"].startswith(parts.task)

    w1, w2, u = records
    assert (w1.cache_read_tokens, w2.cache_read_tokens, u.cache_read_tokens) == (0, 5120, None)
    assert w2.cache_write_tokens is None  # OpenAI does not say what it wrote: unknown (and billed as input)
    price = price_for("gpt-4o-mini")
    assert price is not None
    assert w2.cost_usd == pytest.approx(
        ((6200 - 5120) * price.input + 5120 * price.cache_read + 250 * price.output) / 1e6
    )
    assert w2.cache_read_usd == pytest.approx(5120 * price.cache_read / 1e6)
    assert call_cache_text(u) == "cache not reported"


async def test_openrouter_cache_writes_and_malformed_counts(write_ctx: WriteContext) -> None:
    script = [
        StubOpenAI.chat(
            json.dumps(VALID_CODE), tokens_in=6000, details={"cached_tokens": 0, "cache_write_tokens": 5000}
        ),
        StubOpenAI.chat(
            json.dumps(VALID_CODE), tokens_in=6000, details={"cached_tokens": 7000}
        ),  # > the prompt
        StubOpenAI.chat(json.dumps(VALID_CODE), tokens_in=6000, details={"cached_tokens": "many"}),
    ]
    records: list[CallRecord] = []
    with StubOpenAI(script) as s:
        policy = OpenAIPolicy(
            base_url=s.base_url,
            model="anthropic/claude-sonnet-4-5",
            api_key_env="KSEARCH_NO_KEY",
            max_retries=0,
        )
        policy.on_call(lambda rec: _append(records, rec))
        for _ in script:
            await policy.write_code(write_ctx)
        await policy.aclose()
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in records] == [
        (0, 5000),
        (None, None),
        (None, None),
    ]
    assert records[0].cache_write_usd == pytest.approx(5000 * 3.75 / 1e6)


async def test_stored_and_printed_usage_reflect_the_cache(tmp_path: Path) -> None:
    def call(tokens_in: int, read: int | None, write: int | None, **kw: Any) -> CallRecord:
        return CallRecord(
            phase="write_code",
            provider="anthropic",
            model="claude-sonnet-4-5",
            tokens_in=tokens_in,
            tokens_out=100,
            cache_read_tokens=read,
            cache_write_tokens=write,
            **kw,
        )

    async with await Store.open(tmp_path / "k.db") as store:
        for rec in (
            call(6000, 0, 5000, cost_usd=0.03, cache_write_usd=0.0188),
            call(6000, 5000, 0, cost_usd=0.006, cache_read_usd=0.0015),
            call(0, None, None, error="HTTP 529"),  # a failed try: no input, nothing to report
        ):
            await store.log_llm_call(search_id=None, **rec.model_dump())
        stored = await store.list_llm_calls()
        assert [(c.cache_read_tokens, c.cache_write_tokens) for c in stored] == [
            (0, 5000),
            (5000, 0),
            (None, None),
        ]
        t = await store.llm_totals()
        assert (
            t.cache_read_tokens,
            t.cache_write_tokens,
            t.uncached_tokens_in,
            t.cache_unreported_calls,
        ) == (
            5000,
            5000,
            2000,
            0,
        )
        assert usage_text(t) == (
            "model usage: 3 calls, 12,000 input tokens (5,000 read from the prompt cache, 5,000 written to it, "
            "2,000 uncached) and 300 output tokens; $0.0360: $0.0015 cache reads, $0.0188 cache writes, "
            "$0.0157 uncached input and output"
        )
        # a call whose provider said nothing of its cache is unknown, not zero
        await store.log_llm_call(search_id=None, **call(4000, None, None, cost_usd=0.01).model_dump())
        t = await store.llm_totals()
        assert t.cache_unreported_calls == 1 and t.uncached_tokens_in == 2000
        assert "; 1 calls did not report the cache)" in usage_text(t)


async def test_usage_of_a_provider_that_reports_no_cache() -> None:
    from ksearch.worldmodel.store import LLMTotals

    t = LLMTotals(
        calls=2, tokens_in=9000, tokens_out=500, usd=0.0, unpriced_calls=2, cache_unreported_calls=2
    )
    assert usage_text(t) == (
        "model usage: 2 calls, 9,000 input tokens (the provider did not say what its prompt cache served) and "
        "500 output tokens; $0.00 (+2 calls to unpriced models)"
    )
    openai = LLMTotals(calls=1, tokens_in=6200, tokens_out=250, usd=0.001, cache_read_tokens=5120,
                       uncached_tokens_in=1080, cache_write_unreported_calls=1)  # fmt: skip
    assert (
        "5,120 read from the prompt cache, writes not reported, billed as uncached, 1,080 uncached"
        in usage_text(openai)
    )


async def _append(records: list[CallRecord], rec: CallRecord) -> None:
    records.append(rec)


def test_a_price_given_as_a_pair_takes_its_providers_cache_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    # Anthropic's multipliers are the same for every model: writes 1.25x, reads 0.1x the input price
    assert AnthropicPolicy(model="claude-next", price=(2.0, 10.0)).price == pytest.approx(
        (2.0, 10.0, 2.5, 0.2)
    )
    # an OpenAI-compatible server's are not known: the most any listed provider charges (never understated)
    priced = OpenAIPolicy(base_url="http://127.0.0.1:9/v1", model="local", price=(2.0, 10.0)).price
    assert priced == pytest.approx((2.0, 10.0, 2.5, 2.0))
