"""What to make fast: the Task description (pure data; importing this needs no torch).

A task is loaded from a KernelBench-style Python file (the native format), a FlashInfer-Bench
definition + workloads, or a GPU MODE task folder (see `gpu/tasks/`). Running a task (making
inputs, building the reference and a candidate) lives in `gpu/tasks/rt/runtime.py`, which needs torch and
only ever runs inside a sandbox worker or a test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ksearch.worldmodel.errors import KsearchError

TaskStyle = Literal["kernelbench", "flashinfer", "gpumode"]
Split = Literal["search", "heldout", "smoke"]
Bound = Literal["memory", "compute", "mixed", "unknown"]
"""What limits the reference at its workloads' sizes (declared by the task, else derived)."""


class TaskError(ValueError, KsearchError):
    """A task file or folder is malformed. The message names the file and the field."""


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    params: dict[str, Any] = Field(default_factory=dict)  # shapes / scalars for this workload
    split: Split = "search"
    # Module-level constants of a native task file replaced for this workload (`batch_size = 16` ->
    # 2): how a smoke workload is made small for a KernelBench file whose sizes are constants.
    constants: dict[str, Any] = Field(default_factory=dict)


class Tolerance(BaseModel):
    """Correctness rule: |got - ref| <= atol + rtol * |ref| elementwise, per output dtype."""

    model_config = ConfigDict(extra="forbid")

    atol: dict[str, float] = Field(
        default_factory=lambda: {
            "float32": 1e-4,
            "float16": 1e-2,
            "bfloat16": 2e-2,
            "float8_e4m3fn": 1e-1,
            "float8_e5m2": 2e-1,
        }
    )
    rtol: dict[str, float] = Field(
        default_factory=lambda: {
            "float32": 1e-4,
            "float16": 1e-2,
            "bfloat16": 2e-2,
            "float8_e4m3fn": 1e-1,
            "float8_e5m2": 2e-1,
        }
    )
    mismatch_ratio: float = Field(0.0, ge=0.0, le=0.1)  # fraction of elements allowed outside

    def for_dtype(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol) for an output dtype name like 'float32'; exact for integer/bool outputs."""
        return self.atol.get(dtype, 0.0), self.rtol.get(dtype, 0.0)


class Cost(BaseModel):
    """Work one call must do: for the roofline (achieved vs attainable)."""

    model_config = ConfigDict(extra="forbid")

    flops: float = 0.0
    bytes: float = 0.0  # minimum bytes moved through device memory (inputs read once, outputs written once)
    dtype: str = "float32"  # the matmul-rate ceiling to use for flops


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    op: str = ""  # short op family, e.g. "softmax", "gemm"
    dtype: str = "float32"
    bound: Bound = "unknown"
    # Which of op / dtype / bound / title the task stated itself (the others are defaults, and facts
    # derived by running the reference may replace them: gpu/tasks/facts.py).
    declared: list[str] = Field(default_factory=list)
    style: TaskStyle = "kernelbench"
    source_path: Path  # the file (or folder) it came from
    workloads: list[Workload]
    tolerance: Tolerance = Field(default_factory=Tolerance)
    builtin: bool = False
    # Seed candidates, by language: source text of a correct, deliberately plain implementation.
    seeds: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    # What a candidate module must define: `ModelNew` (native/KernelBench), `run` (FlashInfer-Bench),
    # `custom_kernel` (GPU MODE).
    candidate_entry: str = "ModelNew"
    # True when the task gave no smoke workload and one was derived (it may be slow on the CPU).
    smoke_derived: bool = False
    has_cost: bool = False  # a cost model (FLOPs, bytes) exists for the roofline
    # Format-specific facts the runtime needs (FlashInfer axes/tensors/reference, GPU MODE files/ranking).
    extras: dict[str, Any] = Field(default_factory=dict)

    def by_split(self, split: Split) -> list[Workload]:
        return [w for w in self.workloads if w.split == split]

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        names = ", ".join(w.name for w in self.workloads)
        raise TaskError(f"task {self.name!r} has no workload {name!r}; it has: {names}")

    def smoke(self) -> Workload:
        s = self.by_split("smoke")
        if not s:
            raise TaskError(f"task {self.name!r} has no smoke workload")
        return s[0]
