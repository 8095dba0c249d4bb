"""OpenAIPolicy end to end: httpx against a stub OpenAI-compatible chat-completions server."""

from __future__ import annotations

import json

import pytest

from ksearch.server.driver.policies.base import (
    CallRecord,
    InitContext,
    PolicyError,
    UpdateContext,
    WriteContext,
)
from ksearch.server.driver.policies.openai import OpenAIPolicy, chat_url
from tests.policies.policy_data import VALID_CODE, VALID_INIT, VALID_UPDATE
from tests.stubs import Reply, StubOpenAI

pytestmark = pytest.mark.anyio


def make(stub: StubOpenAI, records: list[CallRecord], **kw: object) -> OpenAIPolicy:
    opts: dict[str, object] = {
        "max_retries": 3,
        "backoff_base_s": 0.001,
        "backoff_max_s": 0.01,
        "timeout_s": 10.0,
    }
    opts.update(kw)
    model = str(opts.pop("model", "qwen2.5-coder-32b"))
    policy = OpenAIPolicy(stub.base_url, model, **opts)  # type: ignore[arg-type]

    async def sink(rec: CallRecord) -> None:
        records.append(rec)

    policy.on_call(sink)
    return policy


async def test_json_answer_in_fences_is_parsed(
    init_ctx: InitContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub")
    records: list[CallRecord] = []
    fenced = "```json\n" + json.dumps(VALID_INIT) + "\n```"
    with StubOpenAI([StubOpenAI.chat(fenced, tokens_in=900, tokens_out=250)]) as s:
        policy = make(s, records)
        result = await policy.init(init_ctx)
        await policy.aclose()
    assert len(result.intents) == 2 and result.intents[0].priority == 0.8

    (req,) = s.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-stub"
    body = req.json()
    assert body["model"] == "qwen2.5-coder-32b"
    assert body["response_format"] == {"type": "json_object"}
    assert "max_tokens" not in body  # left to the server unless configured
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "ModelNew" in body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    assert "one JSON object" in user and '"intents"' in user  # the schema travels in the prompt

    (rec,) = records
    assert (rec.provider, rec.phase, rec.tokens_in, rec.tokens_out) == ("openai", "init", 900, 250)
    assert rec.cost_usd == 0.0 and rec.priced is False  # a self-hosted model has no list price


async def test_known_model_is_priced_and_no_key_sends_no_auth(
    write_ctx: WriteContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    records: list[CallRecord] = []
    with StubOpenAI([StubOpenAI.chat(json.dumps(VALID_CODE), tokens_in=1000, tokens_out=1000)]) as s:
        policy = make(s, records, model="openai/gpt-4o")
        code = await policy.write_code(write_ctx)
    assert "BLOCK_SIZE = 1024" in code.source and code.language == "triton"
    assert "authorization" not in s.requests[0].headers
    assert records[0].cost_usd == pytest.approx(1000 * 2.5 / 1e6 + 1000 * 10 / 1e6)


async def test_prose_around_json_is_tolerated(update_ctx: UpdateContext) -> None:
    records: list[CallRecord] = []
    text = "Here is the update:\n" + json.dumps(VALID_UPDATE) + "\nHope this helps."
    with StubOpenAI([StubOpenAI.chat(text)]) as s:
        upd = await make(s, records).update(update_ctx)
    assert upd.edits[0].node_id == 3 and len(s.requests) == 1


async def test_invalid_json_gets_a_corrective_retry(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    script = [
        StubOpenAI.chat('{"analysis": "memory-bound", "intents": [ {"title": '),
        StubOpenAI.chat(json.dumps(VALID_INIT)),
    ]
    with StubOpenAI(script) as s:
        result = await make(s, records).init(init_ctx)
    assert len(result.intents) == 2
    msgs = s.requests[1].json()["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "the JSON does not parse" in msgs[3]["content"]
    assert records[0].error and "does not parse" in records[0].error
    assert records[1].error is None


async def test_invalid_twice_stops(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    with StubOpenAI([StubOpenAI.chat("no json here"), StubOpenAI.chat('{"analysis": 3}')]) as s:
        with pytest.raises(PolicyError, match=r"unusable init answer twice.*intents"):
            await make(s, records).init(init_ctx)
    assert "holds no JSON object" in s.requests[1].json()["messages"][3]["content"]


async def test_empty_content_is_corrected(write_ctx: WriteContext) -> None:
    records: list[CallRecord] = []
    with StubOpenAI([StubOpenAI.chat(None), StubOpenAI.chat(json.dumps(VALID_CODE))]) as s:
        code = await make(s, records).write_code(write_ctx)
    assert "BLOCK_SIZE = 1024" in code.source
    assert "no answer was given" in s.requests[1].json()["messages"][3]["content"]


async def test_rate_limit_and_server_errors_are_retried(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    script = [
        StubOpenAI.error(429, "slow down", {"retry-after-ms": "300"}),
        StubOpenAI.error(502, "bad gateway"),
        StubOpenAI.chat(json.dumps(VALID_INIT)),
    ]
    with StubOpenAI(script) as s:
        result = await make(s, records).init(init_ctx)
    assert len(result.intents) == 2 and len(s.requests) == 3
    assert s.requests[1].at - s.requests[0].at >= 0.3
    assert "429" in (records[0].error or "") and "slow down" in (records[0].error or "")
    assert "502" in (records[1].error or "")


async def test_rejected_key_names_the_variable(
    init_ctx: InitContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_ROUTER_KEY", "sk-wrong")
    records: list[CallRecord] = []
    with StubOpenAI([StubOpenAI.error(401, "Incorrect API key provided")]) as s:
        policy = make(s, records, api_key_env="MY_ROUTER_KEY")
        with pytest.raises(PolicyError, match=r"API key was rejected.*\$MY_ROUTER_KEY"):
            await policy.init(init_ctx)
    assert s.requests[0].headers["authorization"] == "Bearer sk-wrong" and len(s.requests) == 1


async def test_server_without_json_mode_is_asked_again_without_it(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    script = [
        StubOpenAI.error(400, "response_format is not supported by this model"),
        StubOpenAI.chat(json.dumps(VALID_INIT)),
    ]
    with StubOpenAI(script) as s:
        result = await make(s, records).init(init_ctx)
    assert len(result.intents) == 2
    assert "response_format" in s.requests[0].json()
    assert "response_format" not in s.requests[1].json()


async def test_non_json_http_body_is_retried(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    with StubOpenAI([Reply(200, "<html>proxy hiccup</html>"), StubOpenAI.chat(json.dumps(VALID_INIT))]) as s:
        result = await make(s, records).init(init_ctx)
    assert len(result.intents) == 2
    assert "not a chat completion" in (records[0].error or "")


async def test_connection_refused_exhausts_retries(init_ctx: InitContext) -> None:
    with StubOpenAI() as s:
        url = s.base_url
    # The server is gone: every try fails to connect.
    records: list[CallRecord] = []
    policy = OpenAIPolicy(url, "m", max_retries=1, backoff_base_s=0.001)

    async def sink(rec: CallRecord) -> None:
        records.append(rec)

    policy.on_call(sink)
    with pytest.raises(PolicyError, match=r"kept failing: 2 tries.*connection"):
        await policy.init(init_ctx)
    assert len(records) == 2


def test_chat_url() -> None:
    assert chat_url("http://localhost:11434") == "http://localhost:11434/v1/chat/completions"
    assert chat_url("http://localhost:8000/v1/") == "http://localhost:8000/v1/chat/completions"
    assert chat_url("https://openrouter.ai/api/v1") == "https://openrouter.ai/api/v1/chat/completions"
    with pytest.raises(ValueError, match="http"):
        OpenAIPolicy("localhost:8000", "m")


async def test_reasoning_and_prose_around_a_fenced_answer(init_ctx: InitContext) -> None:
    records: list[CallRecord] = []
    text = (
        "<think>The kernel {maybe} reads x twice...</think>\nHere you go:\n```json\n"
        + json.dumps(VALID_INIT)
        + "\n```\nLet me know."
    )
    with StubOpenAI([StubOpenAI.chat(text)]) as s:
        result = await make(s, records).init(init_ctx)
    assert len(result.intents) == 2 and len(s.requests) == 1
