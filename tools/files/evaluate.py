"""evaluate_file: compile, check and (optionally) time a candidate file on a task, outside any search.

The same settings and sandbox call as run_correctness and benchmark (tools/common.py: check_workloads,
eval_settings_on), with no store: nothing is recorded, and the sandbox caches in its own scratch directory.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ksearch.gpu.sandbox.api import Sandbox
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks.kernelbench_rules import with_precision
from ksearch.tools.common import Progress, check_workloads, eval_settings_on, summarize
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.candidate import CandidateFileIn, read_candidate_file
from ksearch.tools.loop.protocols import choose_protocol
from ksearch.tools.schema import ToolModel
from ksearch.worldmodel.models import (
    TIMING_PROTOCOLS,
    EvalSettings,
    Evaluation,
    KernelBenchPrecision,
    Language,
    TimingProtocol,
)


class EvaluateFileIn(CandidateFileIn):
    """Evaluate a candidate file on a task: nothing is recorded."""

    workloads: list[str] | None = Field(
        None,
        max_length=64,
        description="Workload names; default: the search workloads (the smoke one without a GPU)",
    )
    trials: int = Field(3, ge=1, le=20, description="Fresh random inputs per workload")
    seed: int | None = Field(None, description="Seed of the inputs; default: a fresh random one")
    timing: bool = Field(True, description="False: check correctness only")
    profile: bool = Field(False, description="Also run Nsight Compute on the first workload (GPU only)")
    timing_protocol: TimingProtocol | None = Field(
        None,
        description="ksearch | gpumode | kernelbench | flashinfer; default: the task's owner's (as a search on it "
        "is timed: gpumode for a GPU MODE folder, kernelbench for a plain KernelBench file, flashinfer for a "
        "FlashInfer-Bench definition, ksearch for a native task)",
    )

    precision: KernelBenchPrecision | None = Field(
        None,
        description="Only for a KernelBench problem file: KernelBench's precision (fp32 | fp16 | bf16): inputs and "
        "weights cast to that dtype as KernelBench's evaluation casts them, judged by its tolerance for it; default: "
        "the file's inputs as drawn",
    )

    @field_validator("timing_protocol", mode="before")
    @classmethod
    def _known_protocol(cls, v: object) -> object:
        if isinstance(v, str) and v not in TIMING_PROTOCOLS:
            raise ValueError(f"unknown timing protocol {v!r}; accepted: {', '.join(TIMING_PROTOCOLS)}")
        return v


class EvaluateFileOut(ToolModel):
    candidate_id: str = Field(description="The candidate's id (the hash of its source and language)")
    language: Language = Field(description="The language it ran as (detected, given, or a Solution's spec)")
    note: str | None = Field(None, description="How a FlashInfer-Bench Solution was turned into a candidate")
    summary: str = Field(description="The evaluation in a few lines: status, errors, numbers")
    evaluation: Evaluation
    settings: EvalSettings = Field(description="The settings it ran with: seed, trials, workloads, protocol")
    isolation: str = Field(description="How the candidate was kept from other processes and the filesystem")


async def evaluate_file(
    inp: EvaluateFileIn, *, sandbox: Sandbox | None = None, progress: Progress | None = None
) -> EvaluateFileOut:
    """Evaluate `inp.path` on `inp.task`; without `sandbox`, on a LocalSandbox of its own, closed after."""
    cf = read_candidate_file(inp)
    try:
        task = with_precision(cf.task, inp.precision)
    except TaskError as e:
        raise ToolFailure(str(e)) from None
    check_workloads(task, inp.workloads)  # before any worker starts
    sb = sandbox if sandbox is not None else LocalSandbox()
    try:
        protocol = choose_protocol(task, inp.timing_protocol)
        settings = await eval_settings_on(
            sb, task, inp.workloads, inp.trials, seed=inp.seed, timing_protocol=protocol
        )
        ev = await sb.evaluate(
            cf.candidate,
            task,
            settings,
            timing=inp.timing,
            profile_workload=settings.workloads[0] if inp.profile else None,
            progress=progress,
        )
        # LocalSandbox knows its isolation; any other sandbox says it in its facts
        isolation = sb.isolation if isinstance(sb, LocalSandbox) else (await sb.hardware()).isolation
    finally:
        if sandbox is None:
            await sb.close()
    return EvaluateFileOut(
        candidate_id=cf.candidate.id,
        language=cf.candidate.language,
        note=cf.note,
        summary=summarize(ev),
        evaluation=ev,
        settings=settings,
        isolation=isolation,
    )
