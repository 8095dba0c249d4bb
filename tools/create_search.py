"""create_search: start a search on a task."""

from __future__ import annotations

import re
import secrets

from pydantic import Field

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks.facts import probe_in_background
from ksearch.gpu.tasks.kernelbench_rules import with_precision
from ksearch.tools.common import baseline_settings
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.call_clock import part
from ksearch.tools.loop.protocols import choose_protocol
from ksearch.tools.schema import ToolIn
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import (
    Budgets,
    CompileMode,
    KernelBenchPrecision,
    Language,
    Search,
    SearchConfig,
)


class CreateSearchIn(ToolIn):
    task: str = Field(
        min_length=1,
        max_length=1000,
        description="Built-in task name (bmm, causal_attention, conv2d, cross_entropy, fused_add_rmsnorm, "
        "gemm_bf16, gemm_bias_gelu, gemm_fp32, layernorm, rmsnorm, row_sum, softmax, swiglu) or the path of "
        "a task file (KernelBench format), GPU MODE folder or FlashInfer-Bench definition",
    )
    name: str | None = Field(
        None,
        min_length=1,
        max_length=80,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Unique name; defaults to '<task>-<n>'",
    )
    language: Language = Field("triton", description="Language candidates are written in")
    policy: str = Field(
        "tuner",
        max_length=40,
        description="Only for run_search / `ksearch run`: the policy the built-in driver uses "
        "(anthropic|openai|tuner|replay); irrelevant while you drive the search yourself",
    )
    model: str | None = Field(None, max_length=120, description="Only for run_search: the policy's model")
    rounds: int | None = Field(10, ge=1, le=10_000, description="Round budget: rounds that may start")
    stagnation: int = Field(
        5, ge=1, le=100, description="Attempts without a significant gain before refine stops"
    )
    max_attempts_per_intent: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="The attempt cap of one refine phase, held for every driver (`ksearch run --max-attempts`); "
        "default 8",
    )
    seed: int | None = Field(None, ge=0, lt=2**31, description="Input seed; a secret random one by default")
    compile_mode: CompileMode = Field(
        "default",
        description="torch.compile mode of the baseline speedups are reported against (always static, "
        "compiled per workload); max-autotune is the stronger baseline, its compile paid once and cached",
    )
    timing_protocol: str | None = Field(
        None,
        max_length=40,
        description="How candidates are timed: ksearch | gpumode | kernelbench | flashinfer. Default: the task's "
        "owner's (GPU MODE folder: gpumode, KernelBench problem: kernelbench, FlashInfer-Bench definition: "
        "flashinfer, built-in task or a task file with ksearch's own WORKLOADS, TOLERANCE, META or COST (KernelBench "
        "format or not): ksearch); fixed once the search exists",
    )
    precision: KernelBenchPrecision | None = Field(
        None,
        description="Only for a KernelBench problem file: KernelBench's precision setting (fp32 | fp16 | bf16): "
        "inputs and weights cast to that dtype as KernelBench's evaluation casts them, judged by KernelBench's "
        "tolerance for it (fp32 1e-4, fp16 and bf16 1e-2); default: the file's inputs as drawn, judged per output "
        "dtype; fixed once the search exists",
    )


class DriverSettings(ToolIn):
    """How the built-in driver runs a search, set when `ksearch run` creates it (hosts drive it themselves)."""

    max_attempts_per_intent: int = Field(8, ge=1, description="Attempts of one refine phase")
    branching: int = Field(1, ge=1, description="Implementations written at once per intent")
    base_url: str | None = Field(None, description="An OpenAI-compatible server's URL, for the openai policy")
    replay: str | None = Field(None, description="The JSONL file the replay policy plays back")
    record: str | None = Field(None, description="The JSONL file the policy's answers are appended to")


async def create_search(ws: Workspace, inp: CreateSearchIn, driver: DriverSettings | None = None) -> Search:
    """The new search, with `driver`'s settings when given (else SearchConfig's defaults), in one write."""
    with part("loading_task", "loading the task"):
        task = ws.task(inp.task)
        try:
            task = with_precision(task, inp.precision)
        except TaskError as e:
            raise ToolFailure(str(e)) from None
    if inp.language not in task.seeds and task.seeds:
        have = ", ".join(sorted(task.seeds))
        raise ToolFailure(f"task {task.name!r} has no {inp.language} seed candidate; it has: {have}")
    protocol = choose_protocol(task, inp.timing_protocol)
    name = inp.name or await _free_name(ws, task.name)
    existing = {s.name for s in await ws.store.list_searches()}
    if name in existing:
        raise ToolFailure(f"a search named {name!r} already exists; pick another name or use it by that name")
    ref = task.name if task.builtin else str(task.source_path.resolve())
    config = SearchConfig(
        language=inp.language,
        policy=inp.policy,
        model=inp.model,
        seed=inp.seed if inp.seed is not None else secrets.randbits(31),
        stagnation=inp.stagnation,
        budgets=Budgets(rounds=inp.rounds),
        compile_mode=inp.compile_mode,
        timing_protocol=protocol,
        precision=inp.precision,
    )
    if inp.max_attempts_per_intent is not None:
        config = config.model_copy(update={"max_attempts_per_intent": inp.max_attempts_per_intent})
    if driver is not None:
        config = config.model_copy(update=driver.model_dump())
    with part("recording", "recording the search"):
        s = await ws.store.create_search(name, ref, config)
    # on a GPU the baselines are measured from now on, in the background: the first prompt never waits for
    # them, and the first benchmark finds them measured (or waits for the rest)
    with part("sandbox_start", "starting the sandbox"):
        start = getattr(await ws.gpu_sandbox(), "start_reference_times", None)
    with part("background_start", "starting the baselines and the task's facts in the background"):
        if start is not None and start(task, baseline_settings(task, s)):
            # with them the task's facts (one run of the reference under fake tensors, seconds on a first reading
            # of a task such as TriMul), which the first prompt shows: it then waits for neither
            probe_in_background(task)
    return s


async def _free_name(ws: Workspace, base: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "-", base)[:60] or "search"
    taken = {s.name for s in await ws.store.list_searches()}
    n = 1
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"
