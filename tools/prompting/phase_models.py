"""What each phase of the loop decides on, as data: the contexts a decision-maker reads and its answers.

Three decisions, one per phase (init, write_code, update). The built-in driver hands these to its policy;
the MCP prompts and the tools' loop guidance render the same contexts (tools/prompting/fill.py), so an
assistant driving the loop over MCP reads exactly what the driver's model reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ksearch.gpu.tasks.contract import MODELNEW_CALL_SITE, MODELNEW_KEEP, MODELNEW_RULES, MODELNEW_SIGNATURE
from ksearch.tools.schema import ToolIn
from ksearch.worldmodel.models import EditSpec, IntentSpec, Language


class Ctx(ToolIn):
    """A phase's context, as the policy and the prompt templates read it."""


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
    facts: str = ""  # derived from running the reference: shapes, dtypes, bytes, FLOPs, the bound
    tolerance: str = ""  # the correctness rule candidates are judged by
    reference_times: str = ""  # the reference's measured eager / torch.compile times, per workload
    # What this task's candidate must define (gpu/tasks/contract.py): ModelNew, custom_kernel(data) or run(...)
    entry: str = MODELNEW_SIGNATURE
    entry_rules: str = MODELNEW_RULES  # the rules on it, as prompt bullets
    entry_call_site: str = MODELNEW_CALL_SITE  # where its kernels are launched from
    keep_rule: str = MODELNEW_KEEP  # what an attempt keeps of its base's interface
    timing: str = ""  # the search's timing protocol in words ("" for a context built without a search)


class AttemptOutcome(Ctx):
    """What one attempt produced, as the policy sees it."""

    attempt_id: int | None = None
    node_id: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # tunable values, when the intent set any
    status: str  # Evaluation.status
    speedup_vs_eager: float | None = None
    speedup_vs_base: float | None = None
    base_attempt_id: int | None = None  # the attempt it was built on (None: written from the seed or scratch)
    cpu_interpreter: bool = False  # timed in Triton's CPU interpreter: correct or not, its speed is unknown
    summary: str = ""  # compile errors / correctness diff / timings / profile, rendered as text


class BankSetting(Ctx):
    """Tunable settings that won on a related task (the kernel bank), for a policy's first moves."""

    uid: str  # the bank entry
    task: str
    params: dict[str, Any]
    speedup_vs_eager: float | None = None  # as measured there (on its device and protocol)
    similarity: float


class InitContext(Ctx):
    task: TaskBrief
    seed_source: str  # the plain seed candidate the search starts from ("" when the task has none)
    tunables: dict[str, list[Any]] = Field(default_factory=dict)
    tree_view: str = ""
    bank: str = ""  # lessons from earlier searches on related tasks (tools/bank/ops.py), "" when none
    bank_settings: list[BankSetting] = Field(default_factory=list)  # their winning tunable settings


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
    base_source: str  # the phase's best code so far, else its base, else the seed; "" = write from scratch
    base_attempt_id: int | None = None  # the attempt base_source is the code of (None: the seed, or nothing)
    base_summary: str = ""  # its measured numbers
    feedback: str = ""  # from the previous attempt on this intent ("" on the first)
    feedback_attempt_id: int | None = None  # the attempt `feedback` is about (its id in the search)
    bank: str = ""  # related kernels with code from earlier searches (tools/bank/ops.py), "" when none
    attempt_index: int = 0  # 0-based within this refine phase
    attempt_cap: int = 0  # at most this many attempts in the phase (0: not stated)
    tunables: dict[str, list[Any]] = Field(default_factory=dict)
    tree_view: str = ""


class CodeResult(Ctx):
    source: str = Field(
        description="The complete candidate module (defines the task's entry point: ModelNew, custom_kernel or run), "
        "not a diff"
    )
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
    intent_status: str = ""  # closed (it has a correct attempt) or failed, as the refine phase ended
    intent_params: dict[str, Any] = Field(default_factory=dict)  # the intent's settings, if it had any
    prediction: float | None = None  # the intent's expected speedup, as predicted
    outcomes: list[AttemptOutcome]  # this round's attempts
    # all earlier attempts of the search (compact)
    history: list[AttemptOutcome] = Field(default_factory=list)
    tree_view: str
    # id, title, priority, difficulty, params
    open_intents: list[dict[str, Any]] = Field(default_factory=list)
    # every node's title by id (the root's is ":root"): a recorded answer's node ids, said by title, find the
    # same nodes in another search (server/driver/policies/replay.py)
    node_titles: dict[int, str] = Field(default_factory=dict)
    # every attempt's id, in order: a recording's attempt ids (counted from its first) find this search's attempts
    attempt_ids: list[int] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)  # problems with the previous answer, to fix
    best_speedup: float | None = None
    tunables: dict[str, list[Any]] = Field(default_factory=dict)  # the space, for policies that model it
    bank: str = ""  # lessons from earlier searches on related tasks (tools/bank/ops.py), "" when none


class UpdateResult(Ctx):
    reflection: str = Field("", description="What the measurement teaches, compared with the prediction")
    new_intents: list[IntentSpec] = Field(default_factory=list, description="Intents to insert")
    edits: list[EditSpec] = Field(default_factory=list, description="Changes to existing nodes")
