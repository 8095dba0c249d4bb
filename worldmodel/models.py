"""The world model's data: searches, nodes, attempts, evaluations, edits and LLM calls.

These pydantic models are the one schema every part of ksearch speaks. `gpu/` imports the
evaluation models from here (pure data, no database) so a result is described exactly once.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, model_validator


def utcnow() -> datetime:
    return datetime.now(UTC)


class Strict(BaseModel):
    """The base of every world-model record: unknown fields are refused, and each field's docstring (the
    string literal after it) is its description in the JSON schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


# --------------------------------------------------------------------------- candidates

Language = Literal["triton", "cuda", "cpp_ext"]
LANGUAGES: tuple[str, ...] = ("triton", "cuda", "cpp_ext")


def candidate_id(source: str, language: str) -> str:
    """Content address of a candidate: the same source in the same language is one candidate."""
    digest = hashlib.sha256(f"{language}\0{source}".encode()).hexdigest()
    return "c" + digest[:15]


class Candidate(Strict):
    """One module defining `ModelNew`, identified by the hash of its source and language."""

    id: str
    """Content address: "c" and 15 hex digits of the hash of language and source."""
    language: Language
    """How the source is compiled and run."""
    source: str
    """The whole Python module, defining `ModelNew`."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was first stored."""

    @classmethod
    def of(cls, source: str, language: Language) -> Candidate:
        return cls(id=candidate_id(source, language), language=language, source=source)


# --------------------------------------------------------------------------- evaluations


Severity = Literal["error", "warning", "note"]


class Diagnostic(Strict):
    """One compiler message, mapped to a line of the candidate's own source when possible."""

    severity: Severity
    """How serious the compiler says it is."""
    message: str
    """The compiler's message."""
    line: int | None = None
    """1-based line in the candidate source."""
    column: int | None = None
    """1-based column in the candidate source."""
    kernel: str | None = None
    """The kernel it is about, when known."""


class KernelOccupancy(Strict):
    """Resident blocks and warps per SM that a kernel's resources allow (the occupancy calculator's rule)."""

    arch: str
    """E.g. "sm_90": the limits used."""
    threads_per_block: int
    """Threads of one block, from the launch configuration."""
    blocks_per_sm: int
    """0: the block does not fit on an SM at all (the launch fails)."""
    warps_per_sm: int
    """Resident warps per SM: blocks_per_sm times the warps of a block."""
    max_warps_per_sm: int
    """The architecture's limit of resident warps per SM."""
    occupancy: float
    """warps_per_sm / max_warps_per_sm."""
    limiter: str
    """The resource(s) that bound blocks_per_sm: "registers", "shared memory", "warps", "blocks"."""
    limits: dict[str, int] = Field(default_factory=dict)
    """Blocks per SM each resource alone allows."""


class KernelResources(Strict):
    """One compiled kernel's resources, as the compiler reports them."""

    name: str
    """The kernel's name."""
    registers: int | None = None
    """Registers per thread."""
    spill_stores_bytes: int | None = None
    """Bytes of registers spilled to local memory, per thread, as ptxas counts them in the compiled code (static):
    not how often that code runs, which a profiler counts (profile_ncu: local spilling requests, per warp and per
    loop iteration)."""
    spill_loads_bytes: int | None = None
    """Bytes read back from local memory after a spill, per thread, as ptxas counts them (static)."""
    shared_bytes: int | None = None
    """Shared memory per block, static and dynamic."""
    stack_bytes: int | None = None
    """Stack frame per thread: local memory for spilled registers and local arrays (for a Triton build after a
    launch on a GPU, the driver's local memory size, its only figure: its spills are not counted apart)."""
    num_warps: int | None = None
    """Triton's `num_warps`."""
    num_stages: int | None = None
    """Triton's `num_stages`."""
    threads_per_block: int | None = None
    """Threads of one block."""
    config: str | None = None
    """What this build was specialised for, e.g. "BLOCK_N=2048; smoke workload"."""
    occupancy: KernelOccupancy | None = None
    """What these resources allow resident per SM."""


class CompileReport(Strict):
    """What compiling a candidate said: success, diagnostics on its own lines, and each kernel's resources."""

    ok: bool
    """True when every kernel compiled."""
    language: Language
    """The candidate's language."""
    seconds: float
    """Wall time of the compile."""
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    """Compiler messages, mapped to lines of the candidate source."""
    kernels: list[KernelResources] = Field(default_factory=list)
    """Each compiled kernel's resources."""
    log: str = ""
    """Raw compiler output, truncated."""
    cached: bool = False
    """Answered from the compile cache."""
    mode: str = ""
    """E.g. "nvcc sm_90 (compile-only)", "triton interpreter (syntax/AST only)"."""
    unchecked: str = ""
    """Why the sources were not checked by a compiler here ("" when they were): CUDA sources nvcc could not
    check, Triton kernels a dry run never launched, a task whose inputs need a GPU. `ok` then says only that no
    error was found, and the sources compile for real when the candidate runs."""

    def verdict(self) -> str:
        """`ok`, `FAILED`, or `not checked` (no error found, but the compiler could not check the sources)."""
        if not self.ok:
            return "FAILED"
        return "not checked" if self.unchecked else "ok"


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
    """A candidate's output checked against the reference on one workload."""

    workload: str
    """The workload's name."""
    passed: bool
    """Every trial matched the reference within tolerance."""
    kind: CorrectnessKind
    """What was found (`ok` when it passed)."""
    trials: int
    """How many fresh input sets were checked."""
    max_abs_err: float | None = None
    """Largest absolute difference from the reference."""
    max_rel_err: float | None = None
    """Largest relative difference from the reference."""
    tolerance_used: float | None = None
    """How much of its tolerance the worst element used: max |got - ref| / (atol + rtol * |ref|) over the elements
    and trials (1.0 is the rule's edge; None where the task's own check or an exact dtype judged)."""
    mismatches: int | None = None
    """Elements outside the tolerance."""
    numel: int | None = None
    """Elements compared."""
    first_mismatch_index: list[int] | None = None
    """Index of the first element outside the tolerance."""
    expected_at_first: float | None = None
    """The reference's value there."""
    got_at_first: float | None = None
    """The candidate's value there."""
    message: str = ""
    """What failed, in words a model can act on."""
    caught_by: CaughtBy | None = None
    """For a failure in the output's values; other kinds name their check."""


CPU_INTERPRETER = "cpu-interpreter"
"""The device name of timings taken in the Triton CPU interpreter (no GPU): they show that code runs,
not how fast it is, so they never rank candidates."""

TimingProtocol = Literal["ksearch", "gpumode", "kernelbench", "flashinfer"]
TIMING_PROTOCOLS: tuple[str, ...] = get_args(TimingProtocol)
KernelBenchPrecision = Literal["fp32", "fp16", "bf16"]
KERNELBENCH_PRECISIONS: tuple[str, ...] = get_args(KernelBenchPrecision)
"""KernelBench's `precision` setting: inputs and weights cast to that dtype, judged by its tolerance for it."""
TimingStatistic = Literal["median", "mean"]
PROTOCOL_STATISTIC: dict[str, TimingStatistic] = {
    "ksearch": "median",
    "gpumode": "mean",
    "kernelbench": "mean",
    "flashinfer": "mean",
}
"""The statistic each protocol ranks by: what its owner's evaluator reports (FlashInfer-Bench's is the mean of
its trials' medians, held in `mean_us`)."""
PROTOCOL_HOW: dict[str, str] = {
    "ksearch": "ksearch's protocol: L2 flushed and launch covered before each call, inputs rotated, median",
    "gpumode": "as GPU MODE's eval.py times (a synchronize before each call, its L2 policy, mean)",
    "kernelbench": "as KernelBench's evaluation times (its warm-up, trials and cache policy, mean)",
    "flashinfer": "as FlashInfer-Bench's benchmark runner times (its warm-up, iterations and trials, mean)",
}
"""Each protocol in a few words, for every face that shows a figure."""
"""How calls are timed. `ksearch`: L2 flushed and the launch covered before each call, inputs rotated among
several sets (a per-call copy of GPU MODE data made outside the timed region), median with a confidence
interval. `gpumode`: as a GPU MODE task folder's own eval.py times a benchmark (one input set from the task's
seeds, the first call untimed and checked, then up to 100 calls each between a synchronize and CUDA events or
the host clock, the L2 flushed only where that eval.py flushes it, stopping at its error bound; in final mode
fresh inputs and a check for every call, as its leaderboard mode): the statistic it reports is the mean
(`WorkloadTiming.mean_us`). `kernelbench`: as KernelBench's own evaluation times a kernel. `flashinfer`: as
FlashInfer-Bench's benchmark runner times a solution. A task's searches use its owner's protocol
(`default_timing_protocol`); native tasks use `ksearch`. Cheat checks run in every protocol, outside the timed
loop."""

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


BaselineKind = Literal["eager", "compile"]


class BaselineReading(Strict):
    """One measured baseline of one workload: the reference in eager PyTorch, or its torch.compile, timed by the
    search's protocol in a fresh process; when and on which GPU."""

    kind: BaselineKind
    """eager | compile (torch.compile)."""
    time_us: float
    """The protocol's statistic: what speedups divide."""
    statistic: TimingStatistic = "median"
    """Which statistic `time_us` is."""
    ci_low_us: float
    """Lower end of the 95% confidence interval of the statistic."""
    ci_high_us: float
    """Upper end of the 95% confidence interval of the statistic."""
    n: int
    """Timed calls."""
    median_us: float
    """Median time per call."""
    mean_us: float | None = None
    """Mean time per call."""
    protocol: TimingProtocol = "ksearch"
    """How the calls were timed."""
    compile_mode: CompileMode | None = None
    """How the torch.compile baseline was compiled (None for eager)."""
    measured_at: datetime | None = None
    """When it was measured (UTC; None: a reading cached before this was recorded)."""
    device: str = ""
    """The GPU's name."""
    gpu_uuid: str | None = None
    """The GPU's UUID ("GPU-…"), where the worker could read it."""
    env_key: str | None = None
    """The environment's key (GPU, driver, CUDA, torch, Triton) it was measured in."""
    remeasured: str = ""
    """Why it was measured again before being kept (a bimodal or wide first reading), and how it was chosen."""

    @property
    def rel_ci(self) -> float:
        """Half the CI's width relative to the statistic."""
        if self.time_us <= 0:
            return math.inf
        return max(self.time_us - self.ci_low_us, self.ci_high_us - self.time_us) / self.time_us


class WorkloadTiming(Strict):
    """Timing of one workload. All times in microseconds of device time per call."""

    workload: str
    """The workload's name."""
    device: str
    """The GPU's name (e.g. "NVIDIA H200") or "cpu-interpreter": CPU timings are never compared with GPU ones."""
    median_us: float
    """Median time per call."""
    mean_us: float | None = None
    """Mean time per call: what the owners' evaluators report (GPU MODE, KernelBench; FlashInfer-Bench: the
    mean of its trials' medians)."""
    protocol: TimingProtocol = "ksearch"
    """How the calls were timed."""
    statistic: TimingStatistic = "median"
    """The statistic the protocol ranks by; `time_us` is it, and the CI and speedups are of it."""
    iqr_us: float
    """Interquartile range of the per-call times."""
    ci_low_us: float
    """Lower end of the 95% confidence interval of the statistic."""
    ci_high_us: float
    """Upper end of the 95% confidence interval of the statistic."""
    n: int
    """Timed calls."""
    host_median_us: float | None = None
    """Host-clock cross-check."""
    eager_us: float | None = None
    """The reference in eager PyTorch, timed by the same protocol: its statistic (`statistic`: the median under
    ksearch's protocol, the mean under GPU MODE's and KernelBench's). Records written before it was named so call it
    `eager_median_us`, whatever it held."""
    compile_us: float | None = None
    """The torch.compile baseline, timed by the same protocol: its statistic, as `eager_us` (formerly
    `compile_median_us`)."""
    compile_mode: CompileMode | None = None
    """How that baseline was compiled (None: not recorded)."""
    eager_baseline: BaselineReading | None = None
    """The eager reading `eager_us` is: in a search, the search's pinned baseline (when and on which GPU it
    was measured, its spread)."""
    compile_baseline: BaselineReading | None = None
    """The torch.compile reading `compile_us` is, as `eager_baseline`."""
    baseline_generation: int | None = None
    """In a search: which of its pinned baselines the speedups divide by (1 the first, one more per
    re-measurement); None outside a search or before baselines were pinned."""
    gpu_uuid: str | None = None
    """The UUID of the GPU it was timed on, where the worker could read it."""
    speedup_vs_eager: float | None = None
    """eager_us / time_us."""
    speedup_vs_compile: float | None = None
    """compile_us / time_us."""
    roofline_fraction: float | None = None
    """Attainable / measured time: the attainable time is the larger of the task's bytes at this GPU's measured
    bandwidth (the best of its copy, read and write runs) and its FLOPs at its measured matmul rate for the
    dtype; not the data sheet's figures."""
    flags: list[str] = Field(default_factory=list)
    """Plausibility notes on this timing (e.g. a launch-bound call)."""

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, data: Any) -> Any:
        """Timings written before the baselines were named for what they hold call them `eager_median_us` and
        `compile_median_us`: read as `eager_us` and `compile_us`."""
        if isinstance(data, dict) and ("eager_median_us" in data or "compile_median_us" in data):
            data = dict(data)
            for old in ("eager_median_us", "compile_median_us"):
                if old in data:
                    value = data.pop(old)
                    data.setdefault(old.replace("_median", ""), value)
        return data

    @property
    def time_us(self) -> float:
        """The protocol's number: the mean where the protocol reports a mean, else the median."""
        if self.statistic == "mean" and self.mean_us is not None:
            return self.mean_us
        return self.median_us


class ProfileSummary(Strict):
    """Nsight Compute metrics of the main kernel of one workload, with advice in words."""

    workload: str
    """The workload's name."""
    kernel: str
    """The profiled kernel."""
    duration_us: float | None = None
    """Median over `launches` profiled calls (gpu__time_duration)."""
    launches: int = 1
    """Calls profiled."""
    duration_range_us: tuple[float, float] | None = None
    """Fastest and slowest profiled launch."""
    dram_throughput_pct: float | None = None
    """DRAM throughput, percent of peak."""
    sm_throughput_pct: float | None = None
    """SM throughput, percent of peak."""
    achieved_occupancy_pct: float | None = None
    """Achieved occupancy, percent."""
    registers_per_thread: int | None = None
    """Registers per thread."""
    shared_bytes_per_block: int | None = None
    """Shared memory per block."""
    l1_hit_rate_pct: float | None = None
    """L1 hit rate, percent."""
    l2_hit_rate_pct: float | None = None
    """L2 hit rate, percent."""
    top_stalls: list[tuple[str, float]] = Field(default_factory=list)
    """The largest warp stall reasons and their share."""
    advice: list[str] = Field(default_factory=list)
    """What the metrics suggest, in words."""
    metrics: dict[str, str] = Field(default_factory=dict)
    """The raw metrics, by Nsight Compute name."""


class Environment(Strict):
    """The machine and software an evaluation ran on; timings compare only within one `key()`."""

    device: str
    """The GPU's name, or "cpu-interpreter"."""
    cpu_mode: bool
    """No GPU: Triton ran in its CPU interpreter."""
    sm_count: int | None = None
    """Streaming multiprocessors of the GPU."""
    driver: str | None = None
    """NVIDIA driver version."""
    cuda: str | None = None
    """CUDA version torch was built with."""
    torch: str | None = None
    """The torch version."""
    triton: str | None = None
    """Triton version."""
    python: str | None = None
    """Python version."""
    gpu_uuid: str | None = None
    """The GPU's UUID ("GPU-…") on a one-GPU sandbox (with several, each timing names its own); not part of the
    key: two GPUs of one model compare."""

    def key(self) -> str:
        return f"{self.device}|{self.driver}|{self.cuda}|{self.torch}|{self.triton}"


class EvalSettings(Strict):
    """How an evaluation is run: inputs, workloads, repetitions and the timing protocol."""

    seed: int
    """Seed of the inputs, derived from the search's secret."""
    trials: int = 3
    """Fresh input sets the correctness check runs."""
    workloads: list[str] = Field(default_factory=list)
    """Workloads to run (empty: the search split)."""
    input_sets: int = 4
    """Input sets the timed calls rotate among."""
    warmup: int = 3
    """Untimed calls before timing."""
    min_reps: int = 10
    """Fewest timed calls."""
    max_reps: int = 200
    """Most timed calls."""
    time_budget_s: float = 2.0
    """Seconds of timing per workload, once min_reps calls are timed."""
    target_rel_ci: float = 0.01
    """Stop timing once the confidence interval is this narrow, relative to the median."""
    flush_l2: bool = True
    """Flush the L2 cache before each timed call."""
    final: bool = False
    """Final-evaluation mode: fresh inputs for each timed call, re-checked."""
    compile_mode: CompileMode = "default"
    """The torch.compile baseline's mode (static, per workload)."""
    timing_protocol: TimingProtocol = "ksearch"
    """How calls are timed."""


EvaluationStatus = Literal[
    "ok",  # compiled, correct, timed
    "compile_error",
    "incorrect",
    "crash",
    "timeout",
    "interpreter_timeout",  # the CPU interpreter was too slow for the workload: inconclusive, not a failure
    # the CPU interpreter could not run a kernel that compiles for the GPU (a dry run): inconclusive, not a failure
    "interpreter_unsupported",
    "error",  # harness-side or input problem
    "flagged",  # ran, but a cheat check tripped
]
# Statuses that say nothing about the candidate's implementation: neither a success nor a failure.
INCONCLUSIVE_STATUSES: tuple[str, ...] = ("interpreter_timeout", "interpreter_unsupported")
# Flags that describe the task or the measurement, not a cheat: they never change an evaluation's status.
NOTE_FLAG_PREFIXES: tuple[str, ...] = ("note:", "degenerate_reference:")


def is_note(flag: str) -> bool:
    """A flag that informs (the timing was launch-bound, the reference is degenerate), not a cheat."""
    return flag.startswith(NOTE_FLAG_PREFIXES)


class Evaluation(Strict):
    """Everything measured about one candidate. Written only by the evaluator."""

    status: EvaluationStatus
    """The outcome, in one word."""
    compile: CompileReport | None = None
    """What compiling said."""
    correctness: list[WorkloadCorrectness] = Field(default_factory=list)
    """One check per workload."""
    timings: list[WorkloadTiming] = Field(default_factory=list)
    """One timing per timed workload."""
    speedup_vs_eager: float | None = None
    """Geometric mean over timed workloads."""
    speedup_vs_compile: float | None = None
    """Geometric mean over timed workloads, against torch.compile."""
    roofline_fraction: float | None = None
    """Geometric mean of the workloads' roofline fractions."""
    profile: ProfileSummary | None = None
    """Nsight Compute summary, when profiled."""
    env: Environment | None = None
    """Where it ran."""
    settings: EvalSettings | None = None
    """How it ran."""
    flags: list[str] = Field(default_factory=list)
    """Cheat / plausibility flags, with reasons."""
    error: str | None = None
    """One paragraph a model can act on."""
    seconds: float = 0.0
    """Wall time of the whole evaluation."""
    seconds_by_step: dict[str, float] = Field(default_factory=dict)
    """Where those seconds went: compile, waiting for a worker, load, correctness, timing (the candidate's
    loop and its re-checks), baselines, profile; `inputs` is the host time spent drawing inputs inside the
    correctness, timing and baseline steps."""
    pure_pytorch: bool = False
    """The kernel audit saw no kernel of the candidate's own run (no Triton JIT, NVRTC or extension kernel):
    it computes with PyTorch ops. Its numbers are kept, but it is never a node's or the search's best."""
    audited: bool | None = None
    """Whether the kernel audit ran after the timing: False where it was left out because the candidate was slower
    beyond noise than its node's best on every workload (it can become no best; an attempt that is not audited never
    becomes one, and the final evaluation audits every row); None where no audit applies (no timing, records from
    before this field)."""

    @model_validator(mode="after")
    def _consistent(self) -> Evaluation:
        """An evaluation never contradicts itself. Only contradictions are refused, not absences: records
        written before a field existed (no correctness list, no compile report) still load."""
        problems = []
        cheats = [f for f in self.flags if not is_note(f)]
        if self.status == "ok":
            failed = [c.workload for c in self.correctness if not c.passed]
            if failed:
                problems.append(f"status 'ok' with failed correctness on {', '.join(failed)}")
            if cheats:
                problems.append(f"status 'ok' with cheat flags ({'; '.join(cheats)})")
            if self.compile is not None and not self.compile.ok:
                problems.append("status 'ok' with a compile report that failed")
        if self.status == "flagged" and not cheats:
            problems.append("status 'flagged' needs a flag other than a note (note:, degenerate_reference:)")
        if self.status == "compile_error" and self.compile is not None and self.compile.ok:
            problems.append("status 'compile_error' with a compile report that succeeded")
        for name in ("speedup_vs_eager", "speedup_vs_compile", "roofline_fraction"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                problems.append(f"{name} must be a positive finite number, got {value}")
        if problems:
            raise ValueError("inconsistent evaluation: " + "; ".join(problems))
        return self

    @property
    def correct(self) -> bool:
        return bool(self.correctness) and all(c.passed for c in self.correctness)

    @property
    def compile_label(self) -> str:
        """What its "vs torch.compile" figures are against, in words."""
        return compile_label(t.compile_mode for t in self.timings if t.speedup_vs_compile is not None)

    @property
    def timing_protocol(self) -> str | None:
        """The protocol its GPU timings were taken by ("a, b" if mixed; None when none was GPU-timed)."""
        got = sorted({t.protocol for t in self.timings if t.device != CPU_INTERPRETER})
        return ", ".join(got) or None

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
    """Limits after which the driver stops a search (None: no limit)."""

    rounds: int | None = 10
    """Rounds (one intent each)."""
    attempts: int | None = None
    """Attempts in all."""
    wall_s: float | None = None
    """Wall time, seconds."""
    tokens: int | None = None
    """LLM tokens, in and out."""
    usd: float | None = None
    """LLM spend in US dollars."""
    target_speedup: float | None = None
    """Stop once the best is this much faster than eager."""


PolicyName = Literal["anthropic", "openai", "tuner", "replay"]
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)
"""The built-in driver's decision-makers (server/driver/policies), by the name `config.policy` stores."""


class SearchConfig(Strict):
    """A search's configuration, fixed at creation except where the driver's options change it."""

    language: Language = "triton"
    """The language candidates are written in."""
    policy: str = "tuner"
    """The policy that decides: anthropic | openai | tuner | replay."""
    model: str | None = None
    """The policy's model (None: the policy's default)."""
    base_url: str | None = None
    """An OpenAI-compatible server's URL, for the openai policy."""
    seed: int = 0
    """Per-search secret for input generation, drawn at creation."""
    stagnation: int = 5
    """Attempts in a row without a gain beyond noise before the search stops."""
    max_attempts_per_intent: int = 8
    """Attempts of one refine phase."""
    branching: int = 1
    """Intents refined at once (lanes, one per GPU)."""
    difficulty_cap: int = 4
    """Intents harder than this are not selected."""
    budgets: Budgets = Field(default_factory=Budgets)
    """When the driver stops."""
    compile_mode: CompileMode = "default"
    """The torch.compile baseline its evaluations divide by."""
    timing_protocol: TimingProtocol = "ksearch"
    """How its candidates and baselines are timed: the task's owner's evaluator's way by default (fixed at
    creation; a search stored before protocols were kept was timed with ksearch's)."""
    precision: KernelBenchPrecision | None = None
    """A KernelBench problem file run at KernelBench's `precision` (its inputs and weights cast to that dtype, its
    tolerance for it); None: the file's inputs as drawn (fixed at creation)."""
    replay: str | None = None
    """The JSONL file a replay policy plays back (kept so that a resumed run finds it)."""
    record: str | None = None
    """The JSONL file a run appends its policy's answers to (kept so that a resumed run goes on writing it)."""


SearchStatus = Literal["new", "running", "stopped", "done"]
"""A search's stored status (the views add `interrupted`: ksearch.worldmodel.runs.ShownStatus)."""
NodeKind = Literal["root", "intent"]


class Search(Strict):
    """One campaign on one task: configuration, budgets, its tree, its attempts, its best."""

    id: int
    """Database id."""
    name: str
    """Unique name, used on the command line."""
    task: str
    """Built-in task name or path."""
    config: SearchConfig
    """Its configuration."""
    status: SearchStatus = "new"
    """Where the search is in its life."""
    round: int = 0
    """Rounds begun."""
    best_attempt_id: int | None = None
    """The best correct attempt, set only by the evaluator."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was created."""
    updated_at: datetime = Field(default_factory=utcnow)
    """When it last changed."""


class Node(Strict):
    """The root (the kernel analysis) or an optimization intent of a search's tree."""

    id: int
    """Database id (global across searches)."""
    search_id: int
    """The search it belongs to."""
    parent_id: int | None
    """Its parent (None for the root)."""
    kind: NodeKind
    """The root or an intent."""
    title: str
    """Short imperative idea, e.g. "keep Q in registers"."""
    rationale: str = ""
    """Why it should help: the hypothesis."""
    priority: float = Field(0.5, ge=0.0, le=1.0)
    """0 (least) to 1 (most promising)."""
    difficulty: int = Field(3, ge=1, le=5)
    """1 (a parameter change) to 5 (a rewrite)."""
    expected_speedup: float | None = Field(None, gt=0)
    """How much faster the intent should make the code; the one definition is this module's EXPECTED_SPEEDUP."""
    notes: str = ""
    """Beliefs to re-read later."""
    author: str = "human"
    """Who proposed it: llm:<model> | human | tuner."""
    status: NodeStatus = NodeStatus.open
    """Where the intent is in its lifecycle."""
    pinned: bool = False
    """Selected before any unpinned open intent."""
    vetoed: bool = False
    """Never selected; nothing grows under it."""
    round_created: int = 0
    """Round it was added in."""
    round_updated: int = 0
    """Round it last changed in."""
    visits: int = 0
    """Refine phases it had."""
    best_attempt_id: int | None = None
    """Its best correct attempt, set only by the evaluator."""
    base_attempt_id: int | None = None
    """Code the intent starts from, if the proposer named one."""
    params: dict[str, Any] = Field(default_factory=dict)
    """E.g. tuner settings for this intent."""
    handle: str | None = None
    """The name its proposer gave it, unique in its search; tools take it in place of the id."""


class FinalOutcome(Strict):
    """One candidate's result in a search's final evaluation (every workload, held-out included)."""

    attempt_id: int
    """The re-measured attempt."""
    candidate_id: str
    """Its candidate."""
    passed: bool
    """Status `ok` on every workload (not incorrect, not flagged) and a kernel of its own."""
    status: str
    """The final evaluation's status."""
    why: str = ""
    """What failed, for one that did not pass."""
    speedup_vs_eager: float | None = None
    """Its geomean speedup vs eager over every workload of the final evaluation (None: not GPU-timed, failed, or
    recorded before the final evaluation kept it)."""
    workloads: int = 0
    """How many workloads that figure covers (the final evaluation's: search and held-out ones)."""


class FinalVerdict(Strict):
    """What a search's final evaluation did to the search's best (`Store.record_final`). The search workloads
    may have been overfitted (a kernel hard-coded to their shapes): a best whose candidate fails the final
    evaluation loses its place to the first re-measured attempt that passed it, or to none."""

    outcomes: list[FinalOutcome] = Field(default_factory=list)
    """One outcome per re-measured candidate."""
    best_before: int | None = None
    """The search's best before the final evaluation."""
    best_after: int | None = None
    """The search's best after it."""
    lost_because: str = ""
    """Why `best_before` failed the final evaluation; "" when it kept its place."""
    beaten_because: str = ""
    """Why `best_after` replaced a `best_before` that passed: the final evaluation measured it faster beyond
    noise; "" when the best kept its place."""
    round: int | None = None
    """The search's round when it was made (None: not recorded): rounds started after it call for another."""

    def current(self, search_round: int) -> bool:
        """Whether it speaks for the search as it stands: no round started since (or its round unknown)."""
        return self.round is None or self.round == search_round

    def final_figure(self, attempt_id: int | None) -> tuple[float, int] | None:
        """(speedup vs eager, workloads) the final evaluation measured of `attempt_id`; None where it did not."""
        o = next((o for o in self.outcomes if o.attempt_id == attempt_id), None)
        if o is None or not o.passed or o.speedup_vs_eager is None or not o.workloads:
            return None
        return o.speedup_vs_eager, o.workloads

    def note(self) -> str:
        """One line for the views when the best lost its place ("" when it did not)."""
        if self.beaten_because:
            return (
                f"final evaluation: attempt #{self.best_after} is now the search's best, in place of attempt "
                f"#{self.best_before}: {self.beaten_because}"
            )
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
    """One candidate tried for one node in one round, with its evaluation (written by the evaluator)."""

    id: int
    """Database id."""
    search_id: int
    """The search it belongs to."""
    node_id: int | None
    """The node it was tried for (None: a free-standing attempt, e.g. a seed)."""
    candidate_id: str
    """The candidate measured."""
    base_attempt_id: int | None = None
    """The attempt whose code it built on."""
    round: int = 0
    """The round it was made in."""
    author: str = "human"
    """Who wrote it: human | llm:<model> | tuner | seed."""
    evaluation: Evaluation | None = None
    """What the evaluator measured."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was recorded."""

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
        self,
        speedups: Mapping[int, float | None] | None = None,
        cpu_interpreted: Iterable[int] = (),
        workloads: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__(speedups or {})
        self.cpu_interpreted: frozenset[int] = frozenset(cpu_interpreted)
        # attempt id -> how many workloads its speedup is the geomean of (its evaluation's timed workloads)
        self.workloads: dict[int, int] = dict(workloads or {})


NodeEditOp = Literal["update", "move", "prune", "reopen", "pin", "unpin", "veto", "unveto"]
"""The changes an `EditSpec` makes to an existing node."""
EditOp = Literal["insert", "finish", NodeEditOp]
"""Every kind of entry in the edit log: a new intent, a refine phase's end that brought a reason alone (its status
and the reflection's reason), or a change to a node."""


class Edit(Strict):
    """One validated change to the tree, in the append-only edit log."""

    id: int
    """Database id."""
    search_id: int
    """The search whose tree changed."""
    op: EditOp
    """The kind of change."""
    node_id: int | None
    """The node changed."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """The fields the change set."""
    author: str
    """Who asked: human | llm:<model> | tuner."""
    round: int
    """The round it was made in."""
    reason: str = ""
    """Why, in the asker's words."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was applied."""


LLMPhase = Literal["init", "write_code", "update", "other"]


class LLMCallRecord(Strict):
    """One model call as its policy reports it: what the driver accounts."""

    phase: LLMPhase
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
    cache_read_tokens: int | None = Field(None, ge=0)
    """Of `tokens_in`, those the provider read from its prompt cache; None: it did not say."""
    cache_write_tokens: int | None = Field(None, ge=0)
    """Of `tokens_in`, those it wrote to its prompt cache at a write rate; None: it did not say."""
    cache_read_usd: float = 0.0
    """Of `cost_usd`, what the cache reads cost."""
    cache_write_usd: float = 0.0
    """Of `cost_usd`, what the cache writes cost."""


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


HANDLE_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
"""A handle: a name a caller gives an intent, unique in its search (a letter first, so it never reads as an id)."""
NODE_REF_PATTERN = r"^(#?[0-9]{1,19}|[A-Za-z][A-Za-z0-9_.-]{0,39})$"
HANDLE_HELP = (
    "a letter, then up to 39 letters, digits, '_', '.' or '-'; unique in the search. Every tool that takes a node "
    "of this search takes it in place of the id"
)
_NODE_REF_RE = re.compile(NODE_REF_PATTERN)


def _node_ref(value: object) -> int | str:
    """One check and one message for a node reference (a union would report each of its members apart)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and _NODE_REF_RE.fullmatch(value):
        return value
    raise ValueError(
        "expected a node id (a positive integer, or '#12') or a handle (a letter, then up to 39 letters, digits, "
        "'_', '.' or '-')"
    )


NodeRef = Annotated[
    int | str,
    PlainValidator(_node_ref),
    WithJsonSchema(
        {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": NODE_REF_PATTERN}]}
    ),
]
"""A node of one search: its id (12, or "#12" as the tree writes it) or the handle its proposer gave it."""


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
    parent_id: NodeRef | None = Field(
        None,
        description="Node to insert under (its id or handle, or the handle of an earlier item of the same "
        "request); the root when omitted",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Concrete settings, e.g. tunable values")
    base_attempt_id: int | None = Field(None, ge=1, description="Attempt whose code this intent starts from")
    handle: str | None = Field(
        None,
        pattern=HANDLE_PATTERN,
        description=f"A name for the new intent, chosen by the caller so later calls can name it before they "
        f"know its id: {HANDLE_HELP}",
    )


class EditSpec(Strict):
    """One change to an existing node. Results (best attempt, evaluations) are not editable.

    A field left out (or null, except `base_attempt_id` on `update`) is not changed.
    """

    op: NodeEditOp = Field(
        description=(
            "update: change the fields given below; move: put the node (with its subtree) under "
            "`parent_id`; prune: close the node and its subtree for good; reopen: a closed, failed or "
            "pruned node becomes open again; pin/unpin: a pinned open intent is selected first; "
            "veto/unveto: a vetoed node is never selected and nothing grows under it"
        )
    )
    node_id: NodeRef = Field(
        description="The node to change: an id from the tree, or the handle it was proposed with"
    )
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
    parent_id: NodeRef | None = Field(
        None,
        description="move: the new parent (an id or handle), a node of this search that is not pruned and not "
        "inside the moved subtree",
    )
    reason: str = Field("", max_length=2000, description="Why: kept in the tree's edit log")
