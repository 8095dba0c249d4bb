"""The policy interface: what the driver asks a decision-maker (an LLM, the offline tuner, a replay).

Three decisions, one per phase of the loop (docs/architecture.md, "One loop, three drivers"): `init` analyses the kernel and seeds the
tree, `write_code` implements an intent, `update` reflects on an outcome and edits the tree. Contexts
carry everything a decision needs as data (tools/prompting/phase_models.py); prompts render them (tools/prompting/prompts/*.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from ksearch.tools.prompting.phase_models import (  # re-exported: policies and their tests read the contexts from here
    AttemptOutcome,
    CodeResult,
    Ctx,
    InitContext,
    InitResult,
    TaskBrief,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import LLMCallRecord

__all__ = [
    "AttemptOutcome",
    "CallRecord",
    "CallSink",
    "CodeResult",
    "Ctx",
    "InitContext",
    "InitResult",
    "IntentDeclined",
    "Policy",
    "PolicyError",
    "TaskBrief",
    "UpdateContext",
    "UpdateResult",
    "WriteContext",
]


class PolicyError(RuntimeError, KsearchError):
    """The policy cannot go on (provider keeps failing, key rejected, replay exhausted). The driver stops cleanly."""


class IntentDeclined(PolicyError):
    """This policy cannot implement this one intent (e.g. the offline tuner given an intent with no tunable
    settings, or a base source lacking a tunable's line). The search itself can go on: a driver that knows
    this class marks the intent failed with the message; one that does not stops cleanly as for PolicyError."""


# One model call, for accounting (stored by the driver as an LLMCall): the store's own schema.
CallRecord = LLMCallRecord


CallSink = Callable[[CallRecord], Awaitable[None]]


class Policy(ABC):
    """A decision-maker for the three phases. `name` is shown to the user ("policy: tuner")."""

    name: str = "policy"
    model: str = ""

    def __init__(self) -> None:
        self._sink: CallSink | None = None

    def on_call(self, sink: CallSink) -> None:
        """Register where call records go (the driver stores them)."""
        self._sink = sink

    async def _record(self, rec: CallRecord) -> None:
        if self._sink is not None:
            await self._sink(rec)

    @abstractmethod
    async def init(self, ctx: InitContext) -> InitResult: ...

    @abstractmethod
    async def write_code(self, ctx: WriteContext) -> CodeResult: ...

    @abstractmethod
    async def update(self, ctx: UpdateContext) -> UpdateResult: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release clients; most policies hold none."""
