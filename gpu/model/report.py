"""What `python -m ksearch.gpu.model` reports (its wire format: pydantic, no torch), and the manifest it writes.

The subprocess prints one JSON object (a ProfileReport or a PlugReport) as its last line; tools/model.py reads it.
The manifest (`model.json` beside the task files) is what plug-back reads: the model, how it was built, and per task
its sites in the plan format of gpu/model/runtime.py's `plug`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MANIFEST = "model.json"
TASKS_LIST = "tasks.txt"
MANIFEST_VERSION = 1


def split_ref(ref: str) -> tuple[str, str | None]:
    """(module part, attribute) of `FILE.py[:Name]` or `pkg.module:Name`."""
    if ":" in ref:
        head, _, attr = ref.rpartition(":")
        if head and attr.isidentifier():
            return head, attr
    return ref, None


def is_file_ref(head: str) -> bool:
    """Whether the module part of a reference names a file (else an importable module)."""
    return head.endswith(".py") or "/" in head or Path(head).is_file()


class _Doc(BaseModel):
    """A report part: each field's docstring is its description (as the tools' models)."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Request(BaseModel):
    """What the subprocess is asked to do."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["profile", "plug"]
    model: str
    inputs: str | None = None
    init_inputs: str | None = None
    device: str = "auto"
    dtype: str | None = None
    seed: int = 0
    out_dir: str
    top: int = 5
    iters: int | None = None
    kernels: str | None = None  # plug: the folder of kernels
    plugged: str | None = None  # plug: where to write the plugged model
    timing: bool = True
    budget_s: float | None = None  # plug: seconds per timed thing
    atol: float | None = None
    rtol: float | None = None


class ItemReport(_Doc):
    """One operator of the model (a site alone or a fused pair, with every call of it in one forward)."""

    rank: int
    label: str
    """`Linear`, `RMSNorm`, `matmul`, `Linear + GELU` (a fused pair), `add + RMSNorm`."""
    kind: Literal["module", "function", "linear_act", "add_norm"]
    sites: list[str]
    """Where the model calls it: module paths, or `PATH|FUNCTION|K` for a function called in PATH's forward."""
    calls: int
    """Calls per forward."""
    total_us: float
    """Its time per forward (all its calls)."""
    per_call_us: float
    share: float
    """Its share of the forward's time (0-1)."""
    inputs: list[str]
    """Each tensor input: shape and dtype (`4x128x512 float32`), `(strided)` when not contiguous."""
    outputs: list[str]
    dtype: str
    task: str | None = None
    """The task file written for it (None: not written, see `not_written`)."""
    not_written: str | None = None
    """Why no task file was written for it (beyond --top, or what a task file cannot hold)."""
    faithful_max_abs: float | None = None
    """The written task's Model, with the model's weights, on the inputs the model passed: its largest difference
    from what the model computed there (0 when the same ops ran)."""


class ProfileReport(_Doc):
    model: str
    device: str
    """cpu, or the GPU's name."""
    timed: Literal["cuda", "cpu"] = "cpu"
    """cuda: the CUDA time of each operator's kernels (torch.profiler's CUDA activity); cpu: CPU time, no GPU here."""
    iters: int = 0
    total_us: float = 0.0
    """The forward's time, per forward, as the profiler read it (CUDA or CPU time)."""
    covered: float = 0.0
    """The share of the forward's time inside the ranked operators (the rest: views, Python, the hooks)."""
    dtype: str = ""
    items: list[ItemReport] = Field(default_factory=list)
    out_dir: str | None = None
    manifest: str | None = None
    tasks_list: str | None = None
    written: list[str] = Field(default_factory=list)
    ceilings: dict[str, Any] | None = None
    """The GPU's measured ceilings (bandwidth, matmul rates), for the roofline; None without a GPU."""
    notes: list[str] = Field(default_factory=list)
    error: str | None = None


class Timing(_Doc):
    """Repeated timings of one callable: the median with its 95% CI (distribution-free) and the number of calls."""

    median_us: float
    ci_low_us: float
    ci_high_us: float
    n: int
    clock: str
    """cuda-events (a GPU: L2 flushed before each call) or cpu-wall (perf_counter on the host: a CPU figure, with
    Triton kernels in the interpreter where there is no GPU)."""
    flags: list[str] = Field(default_factory=list)
    """What the GPU timing noticed (a launch-bound call: its time is the host's)."""


class Ratio(_Doc):
    """How many times faster the second is than the first (>1: faster), with a 95% CI from both timings' CIs."""

    ratio: float
    ci_low: float
    ci_high: float
    verdict: str
    """`faster beyond noise` (CI above 1 and at least 2%), `slower beyond noise`, `not beyond noise`, or `CPU timing:
    never called a speedup`."""


class PlugTask(_Doc):
    task: str
    label: str = ""
    status: Literal["plugged", "refused", "no_kernel"]
    kernel: str | None = None
    """The kernel file plugged (or refused)."""
    reason: str = ""
    """Why it was refused, or why there is no kernel."""
    sites: int = 0
    hits: int = 0
    """Calls its kernel answered in the model-level check's forward."""
    fallbacks: int = 0
    """Calls of its sites that ran the original instead (other shapes or arguments than the task's)."""
    max_abs: float | None = None
    """At its sites, on the inputs the model passed: the kernel's largest difference from the original."""
    atol: float | None = None
    rtol: float | None = None
    original: Timing | None = None
    kernel_timing: Timing | None = None
    speedup: Ratio | None = None


class ModelCheck(_Doc):
    ok: bool
    rule: str
    """The model-level tolerance, in words."""
    atol: float
    rtol: float
    max_abs: float
    rel_l2: float
    """||plugged - original|| / ||original|| over every output element."""
    over: int
    """Elements outside the tolerance."""
    numel: int


class PlugReport(_Doc):
    model: str
    device: str = ""
    ok: bool = False
    plugged_file: str | None = None
    tasks: list[PlugTask] = Field(default_factory=list)
    check: ModelCheck | None = None
    eager: Timing | None = None
    plugged: Timing | None = None
    compiled: Timing | None = None
    """torch.compile of the whole original model (on a GPU)."""
    vs_eager: Ratio | None = None
    vs_compile: Ratio | None = None
    timing_note: str = ""
    unused_kernels: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
