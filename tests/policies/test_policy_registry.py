"""Choosing a policy by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.server.driver.policies import POLICY_NAMES, default_policy_name, make_policy
from ksearch.server.driver.policies.anthropic import AnthropicPolicy
from ksearch.server.driver.policies.base import PolicyError
from ksearch.server.driver.policies.openai import OpenAIPolicy
from ksearch.server.driver.policies.replay import RecordingPolicy, ReplayPolicy
from ksearch.server.driver.policies.tuner import TunerPolicy


def test_default_depends_on_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert default_policy_name() == "tuner"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert default_policy_name() == "anthropic"


def test_unknown_name_lists_the_accepted_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown policy 'gemini'; accepted: anthropic, openai, tuner, replay"
    ):
        make_policy("gemini")
    assert POLICY_NAMES == ("anthropic", "openai", "tuner", "replay")


def test_each_policy_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    a = make_policy("anthropic")
    assert isinstance(a, AnthropicPolicy) and a.model == "claude-sonnet-4-5"
    assert make_policy("Anthropic", model="claude-opus-4-5").model == "claude-opus-4-5"
    o = make_policy("openai", model="qwen", base_url="http://localhost:8000/v1")
    assert isinstance(o, OpenAIPolicy) and o.url == "http://localhost:8000/v1/chat/completions"
    assert isinstance(make_policy("tuner"), TunerPolicy)
    replay_file = tmp_path / "r.jsonl"
    replay_file.write_text("")
    assert isinstance(make_policy("replay", replay=replay_file), ReplayPolicy)
    rec = make_policy("tuner", record=tmp_path / "out.jsonl")
    assert isinstance(rec, RecordingPolicy) and rec.name == "tuner"


def test_bad_combinations_say_what_is_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(PolicyError, match="ANTHROPIC_API_KEY"):
        make_policy("anthropic")
    with pytest.raises(ValueError, match="needs a model name"):
        make_policy("openai", base_url="http://localhost:8000/v1")
    with pytest.raises(ValueError, match="needs the JSONL file"):
        make_policy("replay")
    with pytest.raises(ValueError, match="only used by the replay policy"):
        make_policy("tuner", replay=tmp_path / "r.jsonl")
    with pytest.raises(ValueError, match="uses no model"):
        make_policy("tuner", model="gpt-4o")
