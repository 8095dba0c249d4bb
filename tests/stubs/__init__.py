"""Stub LLM provider servers on 127.0.0.1 for tests: real HTTP, scripted replies, recorded requests."""

from tests.stubs.anthropic_stub import StubAnthropic
from tests.stubs.openai_stub import StubOpenAI
from tests.stubs.server import Recorded, Reply, StubServer

__all__ = ["Recorded", "Reply", "StubAnthropic", "StubOpenAI", "StubServer"]
