"""The world model's data: searches, nodes, attempts, evaluations, edits and LLM calls.

These pydantic models are the one schema every part of ksearch speaks. `gpu/` imports the
evaluation models from here (pure data, no database) so a result is described exactly once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(UTC)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- candidates

Language = Literal["triton", "cuda", "cpp_ext"]
LANGUAGES: tuple[str, ...] = ("triton", "cuda", "cpp_ext")


def candidate_id(source: str, language: str) -> str:
    """Content address of a candidate: the same source in the same language is one candidate."""
    digest = hashlib.sha256(f"{language}\0{source}".encode()).hexdigest()
    return "c" + digest[:15]


class Candidate(Strict):
    id: str
    language: Language
    source: str
    created_at: datetime = Field(default_factory=utcnow)

    @classmethod
    def of(cls, source: str, language: Language) -> Candidate:
        return cls(id=candidate_id(source, language), language=language, source=source)


# --------------------------------------------------------------------------- evaluations


class Diagnostic(Strict):
    """One compiler message, mapped to a line of the candidate's own source when possible."""

    severity: Literal["error", "warning", "note"]
    message: str
    line: int | None = None  # 1-based line in the candidate source
    column: int | None = None
    kernel: str | None = None


class KernelOccupancy(Strict):
    """Resident blocks and warps per SM that a kernel's resources allow (the occupancy calculator's rule)."""

    arch: str  # e.g. "sm_90": the limits used
    threads_per_block: int
    blocks_per_sm: int  # 0: the block does not fit on an SM at all (the launch fails)
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # warps_per_sm / max_warps_per_sm
    limiter: str  # the resource(s) that bound blocks_per_sm: "registers", "shared memory", "warps", "blocks"
    limits: dict[str, int] = Field(default_factory=dict)  # blocks per SM each resource alone allows


class KernelResources(Strict):
    name: str
    registers: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    threads_per_block: int | None = None
    config: str | None = None  # what this build was specialised for, e.g. "BLOCK_N=2048; smoke workload"
    occupancy: KernelOccupancy | None = None


class CompileReport(Strict):
    ok: bool
    language: Language
    seconds: float
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    kernels: list[KernelResources] = Field(default_factory=list)
    log: str = ""  # raw compiler output, truncated
    cached: bool = False
    mode: str = ""  # e.g. "nvcc sm_90 (compile-only)", "triton interpreter (syntax/AST only)"


CorrectnessKind = Literal[
    "ok",
    "wrong_values",
    "wrong_shape",
    "wrong_dtype",
    "unwritten",  # output left at the NaN poison
    "nan_inf",
    "input_mutated",
    "exception",
    "crash",
    "timeout",
    # the Triton CPU interpreter ran out of time: too slow for this workload, which says nothing about
    # the kernel itself (not a failed implementation)
    "interpreter_timeout",
    # on extra inputs with signed values the output is zeros, a constant or an input itself where the
    # reference's is not: the task's own inputs (e.g. torch.rand in [0, 1)) could not tell it from the answer
    "degenerate",
]

CaughtBy = Literal["poison_unwritten", "poison_read", "nonfinite", "tolerance", "task_check"]
"""Which check found a failure in an output's values. `poison_unwritten`: elements still hold the poison the
harness writes into fresh allocations (confirmed by a re-run with a finite poison); `poison_read`: NaN/Inf that
follow that poison (with a finite poison they become other, wrong values), so the output is computed from memory
the candidate never initialised; `nonfinite`: NaN/Inf computed by the candidate; `tolerance`: values outside the
task's tolerance; `task_check`: the task's own check (GPU MODE, FlashInfer-Bench) refused them."""


class WorkloadCorrectness(Strict):
    workload: str
    passed: bool
    kind: CorrectnessKind
    trials: int
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int | None = None
    numel: int | None = None
    first_mismatch_index: list[int] | None = None
    expected_at_first: float | None = None
    got_at_first: float | None = None
    message: str = ""
    caught_by: CaughtBy | None = None  # for a failure in the output's values; other kinds name their check


CPU_INTERPRETER = "cpu-interpreter"
"""The device name of timings taken in the Triton CPU interpreter (no GPU): they show that code runs,
not how fast it is, so they never rank candidates."""

TimingProtocol = Literal["ksearch", "gpumode"]
"""How calls are timed. `ksearch`: L2 flushed and the launch covered before each call, inputs rotated among
several sets (a per-call copy of GPU MODE data made outside the timed region), median with a confidence
interval. `gpumode`: as a GPU MODE task folder's own eval.py times a benchmark (one input set from the task's
seeds, the first call untimed and checked, then up to 100 calls each between a synchronize and CUDA events or
the host clock, the L2 flushed only where that eval.py flushes it, stopping at its error bound; in final mode
fresh inputs and a check for every call, as its leaderboard mode): the statistic it reports is the mean
(`WorkloadTiming.mean_us`). Cheat checks run in both."""

CompileMode = Literal["default", "max-autotune", "max-autotune-no-cudagraphs"]
COMPILE_MODES: tuple[str, ...] = get_args(CompileMode)
"""torch.compile's `mode` for the torch.compile baseline. The baseline is always what a user gets by
compiling for that one shape: static (`dynamic=False`), a fresh compile per workload. `max-autotune`
benchmarks kernel configurations while compiling (minutes, paid once: the result is cached) and adds CUDA
graphs, which copy each call's inputs into the graph's own buffers; `max-autotune-no-cudagraphs` leaves
those out."""


def compile_baseline_how(mode: str | None) -> str:
    """How a torch.compile baseline was built, in words ("" for a record from before the mode was kept)."""
    if mode is None:
        return ""
    return "static, per shape" if mode == "default" else f"{mode}, static, per shape"


def compile_label(modes: Any) -> str:
    """ "torch.compile (static, per shape)" for the modes of some timings; several modes are all named."""
    hows = sorted({compile_baseline_how(m) for m in modes if m is not None} - {""})
    return f"torch.compile ({'; '.join(hows)})" if hows else "torch.compile"


class WorkloadTiming(Strict):
    """Timing of one workload. All times in microseconds of device time per call."""

    workload: str
    device: str  # "NVIDIA H200" or "cpu-interpreter": CPU timings are never compared with GPU ones
    median_us: float
    mean_us: float | None = None  # what GPU MODE's evaluator reports (the `gpumode` timing protocol)
    iqr_us: float
    ci_low_us: float  # confidence interval of the median
    ci_high_us: float
    n: int
    host_median_us: float | None = None  # host-clock cross-check
    eager_median_us: float | None = None
    compile_median_us: float | None = None  # torch.compile baseline
    compile_mode: CompileMode | None = None  # how that baseline was compiled (None: not recorded)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    roofline_fraction: float | None = None  # achieved / attainable, from the task's cost model
    flags: list[str] = Field(default_factory=list)


class ProfileSummary(Strict):
    workload: str
    kernel: str
    duration_us: float | None = None  # median over `launches` profiled calls (gpu__time_duration)
    launches: int = 1
    duration_range_us: tuple[float, float] | None = None  # fastest and slowest profiled launch
    dram_throughput_pct: float | None = None
    sm_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    registers_per_thread: int | None = None
    shared_bytes_per_block: int | None = None
    l1_hit_rate_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    top_stalls: list[tuple[str, float]] = Field(default_factory=list)
    advice: list[str] = Field(default_factory=list)
    metrics: dict[str, str] = Field(default_factory=dict)


class Environment(Strict):
    device: str  # GPU name or "cpu-interpreter"
    cpu_mode: bool
    sm_count: int | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    python: str | None = None

    def key(self) -> str:
        return f"{self.device}|{self.driver}|{self.cuda}|{self.torch}|{self.triton}"


class EvalSettings(Strict):
    seed: int
    trials: int = 3
    workloads: list[str] = Field(default_factory=list)
    input_sets: int = 4
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 200
    time_budget_s: float = 2.0
    target_rel_ci: float = 0.01
    flush_l2: bool = True
    final: bool = False  # final-evaluation mode: fresh inputs for each timed call, re-checked
    compile_mode: CompileMode = "default"  # the torch.compile baseline's mode (static, per workload)
    timing_protocol: TimingProtocol = "ksearch"


EvaluationStatus = Literal[
    "ok",  # compiled, correct, timed
    "compile_error",
    "incorrect",
    "crash",
    "timeout",
    "interpreter_timeout",  # the CPU interpreter was too slow for the workload: inconclusive, not a failure
    "error",  # harness-side or input problem
    "flagged",  # ran, but a cheat check tripped
]
# Statuses that say nothing about the candidate's implementation: neither a success nor a failure.
INCONCLUSIVE_STATUSES: tuple[str, ...] = ("interpreter_timeout",)


class Evaluation(Strict):
    """Everything measured about one candidate. Written only by the evaluator."""

    status: EvaluationStatus
    compile: CompileReport | None = None
    correctness: list[WorkloadCorrectness] = Field(default_factory=list)
    timings: list[WorkloadTiming] = Field(default_factory=list)
    speedup_vs_eager: float | None = None  # geometric mean over timed workloads
    speedup_vs_compile: float | None = None
    roofline_fraction: float | None = None
    profile: ProfileSummary | None = None
    env: Environment | None = None
    settings: EvalSettings | None = None
    flags: list[str] = Field(default_factory=list)  # cheat / plausibility flags, with reasons
    error: str | None = None  # one paragraph a model can act on
    seconds: float = 0.0  # wall time of the whole evaluation
    # The kernel audit saw no kernel of the candidate's own run (no Triton JIT, NVRTC or extension kernel):
    # it computes with PyTorch ops. Its numbers are kept, but it is never a node's or the search's best.
    pure_pytorch: bool = False

    @property
    def correct(self) -> bool:
        return bool(self.correctness) and all(c.passed for c in self.correctness)

    @property
    def compile_label(self) -> str:
        """What its "vs torch.compile" figures are against, in words."""
        return compile_label(t.compile_mode for t in self.timings if t.speedup_vs_compile is not None)

    @property
    def cpu_interpreted(self) -> bool:
        """Measured in the CPU interpreter: its timings (and speedups) rank nothing."""
        return any(t.device == CPU_INTERPRETER for t in self.timings) or (
            self.env is not None and self.env.cpu_mode
        )

    @property
    def ranks(self) -> bool:
        """Correct, a kernel of its own, and not timed on the CPU interpreter: its speed may be compared
        with others'."""
        return self.status == "ok" and not self.cpu_interpreted and not self.pure_pytorch

    @property
    def inconclusive(self) -> bool:
        """The evaluation could not judge the implementation (e.g. the CPU interpreter was too slow)."""
        return self.status in INCONCLUSIVE_STATUSES


# --------------------------------------------------------------------------- world model


class NodeStatus(StrEnum):
    open = "open"
    active = "active"
    closed = "closed"
    failed = "failed"
    pruned = "pruned"


class Budgets(Strict):
    rounds: int | None = 10
    attempts: int | None = None
    wall_s: float | None = None
    tokens: int | None = None
    usd: float | None = None
    target_speedup: float | None = None


class SearchConfig(Strict):
    language: Language = "triton"
    policy: str = "tuner"  # anthropic | openai | tuner | replay
    model: str | None = None
    base_url: str | None = None
    seed: int = 0  # per-search secret for input generation, drawn at creation
    stagnation: int = 5
    max_attempts_per_intent: int = 8
    branching: int = 1
    difficulty_cap: int = 4
    budgets: Budgets = Field(default_factory=Budgets)
    compile_mode: CompileMode = "default"  # the torch.compile baseline its evaluations divide by


class Search(Strict):
    id: int
    name: str
    task: str  # built-in task name or path
    config: SearchConfig
    status: Literal["new", "running", "stopped", "done"] = "new"
    round: int = 0
    best_attempt_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Node(Strict):
    id: int
    search_id: int
    parent_id: int | None
    kind: Literal["root", "intent"]
    title: str
    rationale: str = ""
    priority: float = Field(0.5, ge=0.0, le=1.0)
    difficulty: int = Field(3, ge=1, le=5)
    expected_speedup: float | None = Field(None, gt=0)
    notes: str = ""
    author: str = "human"  # llm:<model> | human | tuner
    status: NodeStatus = NodeStatus.open
    pinned: bool = False
    vetoed: bool = False
    round_created: int = 0
    round_updated: int = 0
    visits: int = 0
    best_attempt_id: int | None = None
    base_attempt_id: int | None = None  # code the intent starts from, if the proposer named one
    params: dict[str, Any] = Field(default_factory=dict)  # e.g. tuner settings for this intent


class FinalOutcome(Strict):
    """One candidate's result in a search's final evaluation (every workload, held-out included)."""

    attempt_id: int
    candidate_id: str
    passed: bool  # ok on every workload (not incorrect, not flagged) and a kernel of its own
    status: str
    why: str = ""  # what failed, for one that did not pass


class FinalVerdict(Strict):
    """What a search's final evaluation did to the search's best (`Store.record_final`). The search workloads
    may have been overfitted (a kernel hard-coded to their shapes): a best whose candidate fails the final
    evaluation loses its place to the first re-measured attempt that passed it, or to none."""

    outcomes: list[FinalOutcome] = Field(default_factory=list)
    best_before: int | None = None
    best_after: int | None = None
    lost_because: str = ""  # why `best_before` failed the final evaluation; "" when it kept its place

    def note(self) -> str:
        """One line for the views when the best lost its place ("" when it did not)."""
        if not self.lost_because:
            return ""
        now = (
            f"the best is now attempt #{self.best_after}, the first re-measured attempt that passed it"
            if self.best_after is not None
            else "no re-measured attempt passed it: the search has no best"
        )
        return (
            f"final evaluation: attempt #{self.best_before}, the search's best, failed it ({self.lost_because}) "
            f"and lost its place; {now}"
        )


class Attempt(Strict):
    id: int
    search_id: int
    node_id: int | None
    candidate_id: str
    base_attempt_id: int | None = None
    round: int = 0
    author: str = "human"
    evaluation: Evaluation | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def speedup(self) -> float | None:
        e = self.evaluation
        return e.speedup_vs_eager if e and e.status == "ok" else None


class AttemptSpeedups(dict[int, float | None]):
    """attempt id → speedup vs eager, None unless the attempt is correct and GPU-timed.

    `cpu_interpreted` holds the correct attempts timed on the CPU interpreter: correct code, but their
    timings rank nothing, so they map to None here. A plain dict for every other reader.
    """

    def __init__(
        self, speedups: Mapping[int, float | None] | None = None, cpu_interpreted: Iterable[int] = ()
    ) -> None:
        super().__init__(speedups or {})
        self.cpu_interpreted: frozenset[int] = frozenset(cpu_interpreted)


EditOp = Literal["insert", "update", "move", "prune", "reopen", "pin", "unpin", "veto", "unveto"]


class Edit(Strict):
    id: int
    search_id: int
    op: EditOp
    node_id: int | None
    payload: dict[str, Any] = Field(default_factory=dict)
    author: str
    round: int
    reason: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class LLMCallRecord(Strict):
    """One model call as its policy reports it: what the driver accounts."""

    phase: Literal["init", "write_code", "update", "other"]
    provider: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    request: str = ""
    response: str = ""
    error: str | None = None
    priced: bool = True  # False: the model has no known price, so cost_usd = 0 means "unknown", not "free"


class LLMCall(LLMCallRecord):
    """A stored model call."""

    id: int
    search_id: int | None
    created_at: datetime = Field(default_factory=utcnow)


# --------------------------------------------------------------------------- requested changes
# What a policy, a human or an MCP client may ask for. None of these can carry a result.

EXPECTED_SPEEDUP = (
    "predicted speedup over the code the intent builds on: its base attempt, or the reference in eager "
    "PyTorch where there is no code yet"
)
"""What an intent's `expected_speedup` means, the one definition every schema, prompt and help text uses.
The measurement it is checked against is the refine phase's "vs base" (a seed is measured as an attempt)."""


class IntentSpec(Strict):
    """A new open intent to insert under `parent_id` (the root when omitted)."""

    title: str = Field(
        min_length=3, max_length=200, description="Short imperative idea, e.g. 'keep Q in registers'"
    )
    rationale: str = Field("", max_length=4000, description="Why it should help: the hypothesis")
    priority: float = Field(0.5, ge=0.0, le=1.0, description="0 (least) to 1 (most promising)")
    difficulty: int = Field(3, ge=1, le=5, description="1 (a parameter change) to 5 (a rewrite)")
    expected_speedup: float | None = Field(
        None, gt=0, le=1000, description=EXPECTED_SPEEDUP[0].upper() + EXPECTED_SPEEDUP[1:]
    )
    notes: str = Field("", max_length=4000, description="Beliefs to re-read later")
    parent_id: int | None = Field(None, ge=1, description="Node to insert under; the root when omitted")
    params: dict[str, Any] = Field(default_factory=dict, description="Concrete settings, e.g. tunable values")
    base_attempt_id: int | None = Field(None, ge=1, description="Attempt whose code this intent starts from")


class EditSpec(Strict):
    """One change to an existing node. Results (best attempt, evaluations) are not editable.

    A field left out (or null, except `base_attempt_id` on `update`) is not changed.
    """

    op: Literal["update", "move", "prune", "reopen", "pin", "unpin", "veto", "unveto"] = Field(
        description=(
            "update: change the fields given below; move: put the node (with its subtree) under "
            "`parent_id`; prune: close the node and its subtree for good; reopen: a closed, failed or "
            "pruned node becomes open again; pin/unpin: a pinned open intent is selected first; "
            "veto/unveto: a vetoed node is never selected and nothing grows under it"
        )
    )
    node_id: int = Field(ge=1, description="The node to change (an id from the tree)")
    priority: float | None = Field(
        None, ge=0.0, le=1.0, description="update: 0 (least) to 1 (most promising)"
    )
    difficulty: int | None = Field(
        None, ge=1, le=5, description="update: 1 (a parameter change) to 5 (a rewrite)"
    )
    expected_speedup: float | None = Field(None, gt=0, le=1000, description=f"update: {EXPECTED_SPEEDUP}")
    notes: str | None = Field(
        None, max_length=4000, description="update: beliefs to re-read later (replaces the notes)"
    )
    rationale: str | None = Field(
        None, max_length=4000, description="update: why it should help (the hypothesis)"
    )
    title: str | None = Field(
        None, min_length=3, max_length=200, description="update: short imperative idea (a new wording)"
    )
    params: dict[str, Any] | None = Field(
        None,
        description="update: the intent's concrete settings, e.g. tunable values (replaces them; {} clears them)",
    )
    base_attempt_id: int | None = Field(
        None,
        ge=1,
        description=(
            "update: a correct attempt of this search whose code the intent starts from; "
            "null clears it (the intent then starts from the best attempt on its path)"
        ),
    )
    parent_id: int | None = Field(
        None,
        ge=1,
        description="move: the new parent, a node of this search that is not pruned and not inside the moved subtree",
    )
    reason: str = Field("", max_length=2000, description="Why: kept in the tree's edit log")
