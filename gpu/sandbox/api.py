"""The sandbox's interface: what the tools and the driver call (`Sandbox`), the facts it gives about the
machine it measures on (`HardwareFacts`) and the error for a request it cannot serve (`SandboxError`).

A cluster backend can implement `Sandbox`; `ksearch.gpu.sandbox.local.LocalSandbox` is the one on this machine.
Importing this module does not import torch.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

from ksearch.gpu.task import Task
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import (
    Candidate,
    CompileReport,
    Environment,
    EvalSettings,
    Evaluation,
    ProfileSummary,
)

Progress = Callable[[str, float], Awaitable[None]]


class SandboxError(RuntimeError, KsearchError):
    """A request the sandbox cannot serve (bad workload name, no ncu, ...); the message says why."""


class HardwareFacts(BaseModel):
    """What the evaluations run on, and its measured ceilings (None in CPU mode)."""

    model_config = ConfigDict(extra="forbid")

    device: str
    cpu_mode: bool
    workers: int
    sm_count: int | None = None
    compute_capability: str | None = None
    memory_gb: float | None = None
    l2_bytes: int | None = None
    copy_bandwidth_gbps: float | None = None  # measured device-to-device copy, read + write
    bandwidth_gbps: float | None = None  # best measured of copy, pure read, pure write: the roofline's
    matmul_tflops: dict[str, float] = Field(default_factory=dict)  # measured n=8192 matmul per dtype
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    nvcc: bool = False
    ncu: bool = False
    isolation: str = ""  # how candidates are kept from other processes and the filesystem

    def environment(self) -> Environment:
        return Environment(
            device=self.device,
            cpu_mode=self.cpu_mode,
            sm_count=self.sm_count,
            driver=self.driver,
            cuda=self.cuda,
            torch=self.torch,
            triton=self.triton,
            python=self.python,
        )


class Sandbox(abc.ABC):
    """Where candidates are compiled, checked, timed and profiled."""

    @abc.abstractmethod
    async def compile(self, candidate: Candidate, task: Task) -> CompileReport:
        """Compile without judging: diagnostics mapped to candidate lines, per-kernel resources."""

    @abc.abstractmethod
    async def correctness(self, candidate: Candidate, task: Task, settings: EvalSettings) -> Evaluation:
        """Compile and check against the reference (no timing). Status "ok" means compiled and correct."""

    @abc.abstractmethod
    async def evaluate(
        self,
        candidate: Candidate,
        task: Task,
        settings: EvalSettings,
        *,
        timing: bool = True,
        profile_workload: str | None = None,
        progress: Progress | None = None,
        audit_unless_slower_than: dict[str, float] | None = None,
    ) -> Evaluation:
        """Compile, check and (if `timing`) time. Status "ok" only if compiled, correct everywhere and timed.
        `audit_unless_slower_than`: per workload, a time (us, the protocol's statistic) a candidate must be slower than
        on every timed workload for its kernel audit to be left out (the upper end of the confidence interval of
        its node's best: slower than that everywhere, it can become no best); None: always audit."""

    @abc.abstractmethod
    async def profile(
        self, candidate: Candidate, task: Task, workload: str, kernel: str | None = None
    ) -> ProfileSummary:
        """Nsight Compute on one workload. Raises SandboxError when it cannot run (no GPU, no ncu)."""

    @abc.abstractmethod
    async def hardware(self) -> HardwareFacts:
        """The device, versions and measured ceilings (cached per environment)."""

    async def runs_without_gpu(self) -> bool:
        """Whether candidates run without a GPU (the CPU interpreter). A sandbox that knows it from its start says
        so at once; this default asks `hardware()`, which may wait for a worker to measure the GPU's ceilings."""
        return (await self.hardware()).cpu_mode

    @abc.abstractmethod
    async def close(self) -> None: ...
