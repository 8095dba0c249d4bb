"""The driver's decision-makers (docs/architecture.md, "One loop, three drivers"): pick one by name with `make_policy`.

- `anthropic` — Claude through the Messages API (the default when ANTHROPIC_API_KEY is set);
- `openai` — any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, OpenRouter, OpenAI);
- `tuner` — no model: explores the seed's TUNABLES (the default without a key);
- `replay` — plays back a recorded JSONL of answers.
"""

from __future__ import annotations

import os
from pathlib import Path

from ksearch.server.driver.policies.base import (
    CallRecord,
    CodeResult,
    InitContext,
    InitResult,
    IntentDeclined,
    Policy,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.tools.prompting.fill import PHASES, render_prompt
from ksearch.worldmodel.models import POLICY_NAMES

__all__ = [
    "PHASES",
    "POLICY_NAMES",
    "CallRecord",
    "CodeResult",
    "InitContext",
    "InitResult",
    "IntentDeclined",
    "Policy",
    "PolicyError",
    "UpdateContext",
    "UpdateResult",
    "WriteContext",
    "default_policy_name",
    "make_policy",
    "render_prompt",
]


def default_policy_name() -> str:
    """`anthropic` when ANTHROPIC_API_KEY is set, else the offline `tuner`, so a fresh machine can run."""
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "tuner"


def make_policy(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    replay: str | Path | None = None,
    record: str | Path | None = None,
) -> Policy:
    """Build a policy by name; `record` wraps it so every answer is appended to that JSONL file.
    Raises ValueError for a bad combination of arguments, PolicyError when the provider cannot be used
    (e.g. no API key)."""
    key = name.strip().lower()
    if key not in POLICY_NAMES:
        raise ValueError(f"unknown policy {name!r}; accepted: {', '.join(POLICY_NAMES)}")
    if replay is not None and key != "replay":
        raise ValueError(f"a replay file is only used by the replay policy, not by {key!r}")
    policy: Policy
    if key == "anthropic":
        from ksearch.server.driver.policies.anthropic import DEFAULT_MODEL, AnthropicPolicy

        policy = AnthropicPolicy(model=model or DEFAULT_MODEL, base_url=base_url)
    elif key == "openai":
        from ksearch.server.driver.policies.openai import OpenAIPolicy

        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        if not model:
            raise ValueError(
                "the openai policy needs a model name (--model): the name the endpoint serves, "
                "e.g. 'gpt-4.1' for OpenAI, 'Qwen/Qwen2.5-Coder-32B-Instruct' for a vLLM server"
            )
        policy = OpenAIPolicy(base_url=url, model=model)
    elif key == "tuner":
        from ksearch.server.driver.policies.tuner import TunerPolicy

        if model or base_url:
            raise ValueError(
                "the tuner policy uses no model: drop --model / --base-url, or pick an LLM policy"
            )
        policy = TunerPolicy()
    else:
        from ksearch.server.driver.policies.replay import ReplayPolicy

        if replay is None:
            raise ValueError("the replay policy needs the JSONL file of recorded answers to play back")
        policy = ReplayPolicy(replay)
    if record is not None:
        from ksearch.server.driver.policies.replay import RecordingPolicy

        policy = RecordingPolicy(policy, record)
    return policy
