"""The policy interface: what the driver asks a decision-maker (an LLM, the offline tuner, a replay).

Three decisions, one per phase of the loop (DESIGN.md §4): `init` analyses the kernel and seeds the
tree, `write_code` implements an intent, `update` reflects on an outcome and edits the tree. Contexts
carry everything a decision needs as data; prompts render them (server/prompts/*.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldmodel.models import EditSpec, IntentSpec, Language, LLMCallRecord


class PolicyError(RuntimeError):
    """The policy cannot go on (provider keeps failing, key rejected, replay exhausted). The driver stops cleanly."""


class IntentDeclined(PolicyError):
    """This policy cannot implement this one intent (e.g. the offline tuner given an intent with no tunable
    settings, or a base source lacking a tunable's line). The search itself can go on: a driver that knows
    this class marks the intent failed with the message; one that does not stops cleanly as for PolicyError."""


class Ctx(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskBrief(Ctx):
    name: str
    title: str = ""
    op: str = ""
    dtype: str = ""
    bound: str = ""
    description: str = ""
    reference_source: str  # the task file (reference implementation, inputs, workloads)
    workloads: list[str] = Field(default_factory=list)  # "name: params" lines of the search workloads
    language: Language = "triton"
    hardware: str = ""  # GPU name, SMs, measured bandwidth and peak rates, as text


class AttemptOutcome(Ctx):
    """What one attempt produced, as the policy sees it."""

    attempt_id: int | None = None
    node_id: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # tunable values, when the intent set any
    status: str  # Evaluation.status
    speedup_vs_eager: float | None = None
    speedup_vs_base: float | None = None
    summary: str = ""  # compile errors / correctness diff / timings / profile, rendered as text


class InitContext(Ctx):
    task: TaskBrief
    seed_source: str  # the plain seed candidate the search starts from
    tunables: dict[str, list[Any]] = Field(default_factory=dict)
    tree_view: str = ""


class InitResult(Ctx):
    analysis: str = Field(
        description="Kernel analysis: what it computes, its bound and regimes (the root's notes)"
    )
    intents: list[IntentSpec] = Field(description="The first open intents, under the root")


class WriteContext(Ctx):
    task: TaskBrief
    intent_id: int
    intent_title: str
    intent_rationale: str = ""
    intent_params: dict[str, Any] = Field(default_factory=dict)
    base_source: str  # best code on the path so far (or the seed)
    base_summary: str = ""  # its measured numbers
    feedback: str = ""  # from the previous attempt on this intent ("" on the first)
    attempt_index: int = 0  # 0-based within this refine phase
    tunables: dict[str, list[Any]] = Field(default_factory=dict)
    tree_view: str = ""


class CodeResult(Ctx):
    source: str = Field(description="The complete candidate module (defines ModelNew), not a diff")
    language: Language = "triton"
    explanation: str = Field("", description="What changed, and the predicted effect on time")
    # Tunable values the source sets, when the policy knows them (the tuner always does): the driver passes
    # them back as AttemptOutcome.params, so a refine attempt that moved another parameter is described right.
    params: dict[str, Any] = Field(default_factory=dict)


class UpdateContext(Ctx):
    task: TaskBrief
    round: int
    intent_id: int
    intent_title: str
    intent_params: dict[str, Any] = Field(default_factory=dict)  # the intent's settings, if it had any
    prediction: float | None = None  # the intent's expected speedup, as predicted
    outcomes: list[AttemptOutcome]  # this round's attempts
    # all earlier attempts of the search (compact)
    history: list[AttemptOutcome] = Field(default_factory=list)
    tree_view: str
    # id, title, priority, difficulty, params
    open_intents: list[dict[str, Any]] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)  # problems with the previous answer, to fix
    best_speedup: float | None = None
    tunables: dict[str, list[Any]] = Field(default_factory=dict)  # the space, for policies that model it


class UpdateResult(Ctx):
    reflection: str = Field("", description="What the measurement teaches, compared with the prediction")
    new_intents: list[IntentSpec] = Field(default_factory=list, description="Intents to insert")
    edits: list[EditSpec] = Field(default_factory=list, description="Changes to existing nodes")


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
