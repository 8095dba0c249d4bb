"""Recording any policy's answers to JSONL, and playing them back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ksearch.server.driver.policies.anthropic import AnthropicPolicy
from ksearch.server.driver.policies.base import (
    CallRecord,
    InitContext,
    IntentDeclined,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.server.driver.policies.replay import RecordingPolicy, ReplayPolicy
from ksearch.server.driver.policies.tuner import TunerPolicy
from tests.policies.policy_data import VALID_CODE, VALID_INIT, VALID_UPDATE
from tests.stubs import StubAnthropic

pytestmark = pytest.mark.anyio


async def test_record_then_replay_round_trip(
    tmp_path: Path, init_ctx: InitContext, update_ctx: UpdateContext
) -> None:
    path = tmp_path / "runs" / "tuner.jsonl"
    rec = RecordingPolicy(TunerPolicy(), path)
    assert rec.name == "tuner"
    init = await rec.init(init_ctx)
    first = init.intents[0]
    code = await rec.write_code(
        WriteContext(
            task=init_ctx.task,
            intent_id=2,
            intent_title=first.title,
            intent_params=first.params,
            base_source=init_ctx.seed_source,
        )
    )
    upd = await rec.update(update_ctx)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["phase"] for line in lines] == ["init", "write_code", "update"]
    assert lines[0]["policy"] == "tuner"

    calls: list[CallRecord] = []

    async def sink(r: CallRecord) -> None:
        calls.append(r)

    replay = ReplayPolicy(path)
    replay.on_call(sink)
    assert replay.remaining == 3
    assert await replay.init(init_ctx) == init
    # each answer is keyed by its intent: another intent has none to replay, and is declined
    assert replay.by_intent
    with pytest.raises(IntentDeclined, match="no further attempt for intent 'x'"):
        await replay.write_code(
            WriteContext(task=init_ctx.task, intent_id=9, intent_title="x", base_source="")
        )
    assert (
        await replay.write_code(
            WriteContext(task=init_ctx.task, intent_id=2, intent_title=first.title, base_source="")
        )
        == code
    )
    assert (
        await replay.update(update_ctx.model_copy(update={"intent_title": "never refined"})) == UpdateResult()
    )
    assert await replay.update(update_ctx) == upd
    assert [c.phase for c in calls] == ["init", "write_code", "update"]
    assert calls[1].provider == "replay" and calls[1].request.endswith("tuner.jsonl:2")
    with pytest.raises(PolicyError, match=r"exhausted: all 3 recorded answers.*init answer"):
        await replay.init(init_ctx)


async def test_recording_an_llm_policy_keeps_its_accounting(tmp_path: Path, init_ctx: InitContext) -> None:
    path = tmp_path / "claude.jsonl"
    calls: list[CallRecord] = []

    async def sink(r: CallRecord) -> None:
        calls.append(r)

    with StubAnthropic([StubAnthropic.tool_call(VALID_INIT)]) as s:
        inner = AnthropicPolicy(base_url=s.base_url, api_key="test", max_retries=0)
        policy = RecordingPolicy(inner, path)
        policy.on_call(sink)
        result = await policy.init(init_ctx)
        await policy.aclose()
    assert calls[0].provider == "anthropic" and calls[0].tokens_in == 1200  # the inner policy still reports
    line = json.loads(path.read_text())
    assert line["model"] == "claude-sonnet-4-5" and line["phase"] == "init"
    assert await ReplayPolicy(path).init(init_ctx) == result


async def test_phase_mismatch_is_reported_with_the_line(tmp_path: Path, write_ctx: WriteContext) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"phase": "init", "result": VALID_INIT}) + "\n")
    with pytest.raises(PolicyError, match=r"r.jsonl line 1 holds a init answer, but a write_code answer"):
        await ReplayPolicy(path).write_code(write_ctx)


async def test_invalid_recorded_answer_is_an_error(tmp_path: Path, update_ctx: UpdateContext) -> None:
    path = tmp_path / "r.jsonl"
    bad = {**VALID_UPDATE, "edits": [{"op": "explode", "node_id": 3}]}
    path.write_text("\n" + json.dumps({"phase": "update", "result": bad}) + "\n")
    with pytest.raises(PolicyError, match=r"line 2: the recorded update answer is invalid"):
        await ReplayPolicy(path).update(update_ctx)


def test_malformed_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"phase": "write_code", "result": VALID_CODE}) + "\nnot json\n")
    with pytest.raises(PolicyError, match="line 2 is not a replay record"):
        ReplayPolicy(path)
    path.write_text(json.dumps({"phase": "refine", "result": {}}) + "\n")
    with pytest.raises(PolicyError, match=r"line 1 .*phase"):
        ReplayPolicy(path)
    with pytest.raises(PolicyError, match="cannot read the replay file"):
        ReplayPolicy(tmp_path / "missing.jsonl")


async def test_a_recorded_update_finds_its_nodes_by_title_in_another_search(
    tmp_path: Path, update_ctx: UpdateContext
) -> None:
    """Node ids name nodes of the search an answer was recorded in: the recording keeps their titles, and a
    replay in another search (another database, or a second search in the same one) applies the answer to the
    nodes of that search with those titles; an edit on a node it lacks is left out, and said."""

    class Fixed(TunerPolicy):
        async def update(self, ctx: UpdateContext) -> UpdateResult:
            return UpdateResult.model_validate(
                {
                    **VALID_UPDATE,
                    "edits": [
                        *VALID_UPDATE["edits"],  # node 3, "vectorise loads"
                        {
                            "op": "prune",
                            "node_id": 4,
                            "reason": "measured slower",
                        },  # "split rows", absent later
                    ],
                }
            )

    recorded_titles = {
        1: ":root",
        2: "fuse max and sum into one online pass",
        3: "vectorise loads",
        4: "split rows",
    }
    path = tmp_path / "rec.jsonl"
    await RecordingPolicy(Fixed(), path).update(
        update_ctx.model_copy(update={"node_titles": recorded_titles})
    )
    line = json.loads(path.read_text().splitlines()[0])
    assert line["nodes"] == {"2": recorded_titles[2], "3": "vectorise loads", "4": "split rows"}

    here = {10: ":root", 11: "fuse max and sum into one online pass", 12: "vectorise loads"}
    ctx = update_ctx.model_copy(update={"node_titles": here, "intent_id": 11})
    got = await ReplayPolicy(path).update(ctx)
    assert [(e.op, e.node_id) for e in got.edits] == [("update", 12)]
    assert [i.parent_id for i in got.new_intents] == [11]
    assert "recorded edits on nodes this search lacks were left out: 'split rows'" in got.reflection
    # without titles (a recording made before they were kept) the recording's ids count its nodes from its root,
    # node 1: the third and fourth it made are this search's third (12) and fourth (none: left out, said)
    path.write_text(json.dumps({k: v for k, v in line.items() if k != "nodes"}) + "\n")
    by_order = await ReplayPolicy(path).update(ctx)
    assert [e.node_id for e in by_order.edits] == [12]
    assert "left out: '#4'" in by_order.reflection


async def test_a_recording_without_titles_finds_its_base_attempts_by_order(
    tmp_path: Path, update_ctx: UpdateContext
) -> None:
    """A replay into a database that holds other searches: the recording's attempt ids (its first is 1) name the
    replaying search's attempts in order, as its node ids name its nodes; one this search lacks is cleared, and said."""
    answer = {
        "reflection": "the online pass won",
        "edits": [{"op": "update", "node_id": 3, "base_attempt_id": 2}],
        "new_intents": [{"title": "tile the rows", "parent_id": 2, "base_attempt_id": 5}],
    }
    path = tmp_path / "rec.jsonl"
    path.write_text(json.dumps({"phase": "update", "result": answer}) + "\n")
    here = {10: ":root", 11: "fuse max and sum into one online pass", 12: "vectorise loads"}
    ctx = update_ctx.model_copy(update={"node_titles": here, "attempt_ids": [40, 41, 42]})
    got = await ReplayPolicy(path).update(ctx)
    assert [(e.node_id, e.base_attempt_id) for e in got.edits] == [(12, 41)]
    assert [(i.parent_id, i.base_attempt_id) for i in got.new_intents] == [(11, None)]
    assert "recorded base attempts this search lacks were left out: #5" in got.reflection
