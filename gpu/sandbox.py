"""The sandbox: compile, check, time and profile candidates in isolated worker processes.

`Sandbox` is the interface the tools and the driver use (a cluster backend can implement it);
`LocalSandbox` runs one worker per visible GPU on this machine, or one CPU worker running Triton
under its interpreter when there is no GPU. Importing this module does not import torch.

Results are structured, never exceptions: a compile error, a wrong answer, a crash, a hang or a
cheat check each come back as an `Evaluation` with a status and a message a model can act on.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpu import interp_watch, jail, ncu, occupancy
from gpu.compiler import StaticCompiler
from gpu.kvcache import JsonFileCache, KVCache
from gpu.pool import WorkerError, WorkerPool, WorkerProcess, compiler_cache_env
from gpu.procs import communicate_or_kill
from gpu.scrub import scrubbed_env
from gpu.stats import geomean
from gpu.task import Task, TaskError
from worldmodel.models import (
    Candidate,
    CompileReport,
    Diagnostic,
    Environment,
    EvalSettings,
    Evaluation,
    KernelResources,
    ProfileSummary,
    WorkloadCorrectness,
    WorkloadTiming,
)

Progress = Callable[[str, float], Awaitable[None]]
log = logging.getLogger("ksearch.sandbox")
CACHE_VERSION = "v2"
# v3: the torch.compile baseline is compiled static and fresh per workload, and its key names the mode
# (before, one compile served every workload: dynamically shaped after the first)
BASELINE_VERSION = "v3"
DRYRUN_SLACK_S = 30.0  # beyond a dry run's own budget before its worker is killed
PROFILED_CALLS = 5  # ncu's duration is the median of this many profiled calls (one alone varies ~4%)
# Flags that describe the task or the measurement, not a cheat: they never change the status.
_NOTE_PREFIXES = ("note:", "degenerate_reference:")


class SandboxError(RuntimeError):
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
    ) -> Evaluation:
        """Compile, check and (if `timing`) time. Status "ok" only if compiled, correct everywhere and timed."""

    @abc.abstractmethod
    async def profile(
        self, candidate: Candidate, task: Task, workload: str, kernel: str | None = None
    ) -> ProfileSummary:
        """Nsight Compute on one workload. Raises SandboxError when it cannot run (no GPU, no ncu)."""

    @abc.abstractmethod
    async def hardware(self) -> HardwareFacts:
        """The device, versions and measured ceilings (cached per environment)."""

    @abc.abstractmethod
    async def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------- helpers


def _query_gpus() -> tuple[list[str], str | None, str | None]:
    """(visible GPU ids, driver version, compute capability) from nvidia-smi; ([], None, None) without one."""
    if os.environ.get("KSEARCH_CPU_MODE") == "1":
        return [], None, None
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], None, None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,driver_version,compute_cap", "--format=csv,noheader"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return [], None, None
    rows = [[c.strip() for c in ln.split(",")] for ln in out.splitlines() if ln.strip()]
    if not rows:
        return [], None, None
    ids = [r[0] for r in rows]
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        wanted = [x.strip() for x in cvd.split(",") if x.strip()]
        ids = [] if (not wanted or wanted[0].startswith("-")) else wanted
    driver = rows[0][1] if len(rows[0]) > 1 else None
    cc = rows[0][2] if len(rows[0]) > 2 else None
    return ids, driver, cc


def _task_fingerprint(task: Task) -> str:
    h = hashlib.sha256(
        task.model_dump_json(exclude={"seeds", "description", "title", "source_path"}).encode()
    )
    p = Path(task.source_path)
    files = (
        [p]
        if p.is_file()
        else sorted(q for q in p.rglob("*") if q.is_file() and q.stat().st_size < 4 << 20)
        if p.is_dir()
        else []
    )
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:20]


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "no parameters"


def _timing_s(st: EvalSettings) -> float:
    """The most one benchmark call's timing loop may take: the `gpumode` protocol follows the evaluator's own
    limits (its loop stops after 120 s; in final mode each call also draws and checks fresh inputs)."""
    if st.timing_protocol == "gpumode":
        return 250.0 if st.final else 130.0
    return (8 if st.final else 3) * st.time_budget_s


def _is_note(flag: str) -> bool:
    return flag.startswith(_NOTE_PREFIXES)


def _diag(d: dict[str, Any]) -> Diagnostic:
    sev = d.get("severity", "error")
    return Diagnostic(
        severity=sev if sev in ("error", "warning", "note") else "error",
        message=str(d.get("message", ""))[:4000],
        line=d.get("line"),
    )


class _Run:
    """The state of one evaluation while it is assembled."""

    def __init__(self, candidate: Candidate, settings: EvalSettings, task: Task | None = None) -> None:
        self.candidate = candidate
        self.settings = settings
        self.task = task
        self.t0 = time.perf_counter()
        self.correctness: list[WorkloadCorrectness] = []
        self.timings: list[WorkloadTiming] = []
        self.flags: list[str] = []
        self.status: str | None = None
        self.error: str | None = None
        self.runtime_compile: dict[str, Any] | None = None  # fault of kind "compile" from the worker
        self.runtime_kernels: list[dict[str, Any]] = []
        self.ran = False  # the candidate was loaded and called at least once
        self.pure_pytorch = False  # the kernel audit saw no kernel of the candidate's own run

    def flag(self, *flags: str) -> None:
        for f in flags:
            if f not in self.flags:
                self.flags.append(f)

    def fail(self, status: str, error: str) -> None:
        if self.status is None:
            self.status, self.error = status, error


# ---------------------------------------------------------------------------------------------- local


def _ceilings_key(env: Environment) -> str:
    return f"ceilings:{CACHE_VERSION}:{env.key()}"


def _task_json(task: Task) -> dict[str, Any]:
    """The task as the worker receives it (plain JSON data)."""
    return json.loads(task.model_dump_json())


def _sweep_dead_sessions(sessions: Path) -> None:
    """Remove the session directories of processes that are gone (a SIGKILLed driver cannot clean
    up after itself). A directory is named `<pid>-<token>`; a live or unknown owner keeps it."""
    if not sessions.is_dir():
        return
    for d in sessions.iterdir():
        pid = d.name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (PermissionError, OverflowError):
            continue  # someone else's process: not ours to judge


class LocalSandbox(Sandbox):
    """Worker processes on this machine: one per visible GPU, or one CPU (Triton interpreter) worker."""

    def __init__(
        self,
        n_workers: int | None = None,
        scratch_dir: Path | str | None = None,
        *,
        call_timeout_s: float = 120.0,
        build_timeout_s: float = 900.0,
        memory_limit_gb: float | None = None,
        gpu_mem_fraction: float = 0.9,
        cache: KVCache | None = None,
        cpu_mode: bool | None = None,
        arch: str | None = None,
        kernel_audit: bool = True,
        isolation: str | None = None,
        clean_baselines: bool | None = None,
        dryrun_timeout_s: float = 120.0,
        compile_baseline: bool | None = None,
        spare_workers: bool = True,
    ) -> None:
        mode = isolation or os.environ.get("KSEARCH_ISOLATION", "auto")
        try:
            self.jailed, self.isolation = jail.resolve(mode)
        except (ValueError, OSError) as e:
            raise SandboxError(str(e)) from None
        if not self.jailed:
            log.warning("sandbox isolation %s", self.isolation)
        gpus, self._driver, cc = _query_gpus()
        self.cpu_mode = (not gpus) if cpu_mode is None else cpu_mode
        if not self.cpu_mode and not gpus:
            raise SandboxError("GPU mode was requested but no GPU is visible (nvidia-smi lists none)")
        slots: list[str | None] = [None] if self.cpu_mode else list(gpus)
        if n_workers is not None:
            if n_workers < 1:
                raise SandboxError(f"n_workers must be >= 1, got {n_workers}")
            slots = slots[:n_workers] if not self.cpu_mode else [None] * n_workers
        root = (
            Path(scratch_dir)
            if scratch_dir
            else Path(tempfile.gettempdir()) / f"ksearch-sandbox-{os.getuid()}"
        )
        self.root = root.resolve()  # caches shared by every sandbox that uses this directory
        # this sandbox's own worker scratch space: several sandboxes may share `root` at once
        _sweep_dead_sessions(self.root / "sessions")
        self.session = self.root / "sessions" / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.session.mkdir(parents=True, exist_ok=True)
        self.shared = self.root / "shared"
        self.kernel_audit = kernel_audit  # profile one call per candidate: its own kernels must run
        # Baselines (eager, torch.compile) are measured in a fresh worker process that never ran candidate
        # code, with compiler caches no candidate can write: nothing a candidate left behind (patched
        # functions, a background thread, a planted inductor or Triton cache entry) can slow them.
        # Costs two worker restarts per new (task, workload, settings); the results are cached.
        self.clean_baselines = (not self.cpu_mode) if clean_baselines is None else clean_baselines
        # The torch.compile baseline on a GPU; on the CPU only when asked (tests): a CPU-compiled reference
        # says nothing about the speed of a kernel the interpreter runs.
        self.compile_baseline = (not self.cpu_mode) if compile_baseline is None else compile_baseline
        self.call_timeout_s = call_timeout_s
        self.build_timeout_s = build_timeout_s
        if memory_limit_gb is None:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
            memory_limit_gb = max(4.0, min(64.0, 0.6 * total / len(slots)))
        self.memory_limit_gb = memory_limit_gb
        self.arch = arch or (f"sm_{cc.replace('.', '')}" if cc else "sm_90")
        self.cache: KVCache = cache if cache is not None else JsonFileCache(self.root / "cache.json")
        self.compiler = StaticCompiler(self.root, arch=self.arch, jailed=self.jailed)
        self.pool = WorkerPool(
            [
                WorkerProcess(
                    i,
                    g,
                    self.session,
                    shared=self.shared,
                    cpu_mode=self.cpu_mode,
                    gpu_mem_fraction=gpu_mem_fraction,
                    memory_limit_bytes=int(memory_limit_gb * 2**30),
                    jailed=self.jailed,
                    # a process started ahead per slot, so a killed worker (a cancelled or timed-out call, a
                    # crash) costs the next caller no cold start; it never ran candidate code until it takes over
                    spare=spare_workers,
                )
                for i, g in enumerate(slots)
            ]
        )
        self._facts: HardwareFacts | None = None
        self._ceilings: dict[str, Any] | None = None
        self._fingerprints: dict[int, str] = {}
        self._hw_lock = asyncio.Lock()
        # Compiling Triton kernels without a GPU needs real JITFunctions, which a process running the
        # interpreter cannot give (Triton's own library functions are interpreted there too): a second,
        # GPU-less worker with TRITON_INTERPRET=0 dry-runs candidates for `compile`, jailed like the others.
        self.dryrun_timeout_s = dryrun_timeout_s
        self._dry: WorkerProcess | None = None
        self._dry_lock = asyncio.Lock()
        self._dry_args = {
            "slot": len(slots),
            "memory_limit_bytes": int(memory_limit_gb * 2**30),
            "gpu_mem_fraction": gpu_mem_fraction,
        }

    # ------------------------------------------------------------------ facts
    async def start(self) -> None:
        """Start every worker now (otherwise they start on first use)."""
        await self.pool.start()

    async def _hello(self) -> dict[str, Any]:
        w = self.pool.workers[0]
        if w.hello is None:
            async with self.pool.acquire() as w2:
                return dict(w2.hello or {})
        return dict(w.hello)

    async def _environment(self) -> Environment:
        h = await self._hello()
        return Environment(
            device=h.get("device", "unknown"),
            cpu_mode=bool(h.get("cpu_mode", self.cpu_mode)),
            sm_count=h.get("sm_count"),
            driver=self._driver,
            cuda=h.get("cuda"),
            torch=h.get("torch"),
            triton=h.get("triton"),
            python=h.get("python"),
        )

    async def ceilings(self, held: WorkerProcess | None = None) -> dict[str, Any]:
        """Measured copy bandwidth and matmul rates, cached per environment ({} in CPU mode).

        `held`: a worker the caller already holds, measured on directly; acquiring another from the
        pool while holding one would wait forever when every worker is held (a one-GPU machine)."""
        if self._ceilings is not None:
            return self._ceilings
        async with self._hw_lock:
            if self._ceilings is not None:
                return self._ceilings
            env = await self._environment()
            if env.cpu_mode:
                self._ceilings = {}
                return self._ceilings
            key = _ceilings_key(env)
            hit = await self.cache.get(key)
            if hit is None:
                if held is not None:
                    reply = await held.call("hardware", {}, timeout_s=600.0)
                else:
                    async with self.pool.acquire() as w:
                        reply = await w.call("hardware", {}, timeout_s=600.0)
                if not reply.get("ok"):
                    raise SandboxError(f"measuring the GPU's ceilings failed: {reply.get('error')}")
                hit = reply["result"]
                await self.cache.put(key, hit)
            self._ceilings = hit
            return hit

    async def _ensure_ceilings(self, w: WorkerProcess, env: Environment) -> None:
        """Measure the ceilings (once per environment) in a process that has run no candidate, so
        nothing a candidate left running can lower them (they bound the roofline check)."""
        if self._ceilings is not None:
            return
        if self.clean_baselines and w.ran_candidate and await self.cache.get(_ceilings_key(env)) is None:
            await w.restart("candidate")
        await self.ceilings(w)

    async def hardware(self) -> HardwareFacts:
        if self._facts is not None:
            return self._facts
        h = await self._hello()
        ceil = await self.ceilings()
        bw = ceil.get("copy_bandwidth_Bps")
        best = ceil.get("bandwidth_Bps")
        self._facts = HardwareFacts(
            device=h.get("device", "unknown"),
            cpu_mode=bool(h.get("cpu_mode", self.cpu_mode)),
            workers=len(self.pool.workers),
            sm_count=h.get("sm_count"),
            compute_capability=h.get("compute_capability"),
            memory_gb=h.get("memory_gb"),
            l2_bytes=h.get("l2_bytes"),
            copy_bandwidth_gbps=round(bw / 1e9, 1) if bw else None,
            bandwidth_gbps=round(best / 1e9, 1) if best else None,
            matmul_tflops={k: round(v / 1e12, 1) for k, v in (ceil.get("matmul_flops") or {}).items()},
            driver=self._driver,
            cuda=h.get("cuda"),
            torch=h.get("torch"),
            triton=h.get("triton"),
            python=h.get("python"),
            nvcc=self.compiler.nvcc is not None,
            ncu=ncu.find_ncu() is not None,
            isolation=self.isolation,
        )
        return self._facts

    def _fingerprint(self, task: Task) -> str:
        key = id(task)
        if key not in self._fingerprints:
            self._fingerprints[key] = _task_fingerprint(task)
        return self._fingerprints[key]

    # ------------------------------------------------------------------ compile
    async def compile(self, candidate: Candidate, task: Task) -> CompileReport:
        report = await self.compiler.compile(candidate, (task.candidate_entry,))
        if not report.ok:
            return report
        if candidate.language == "cuda" or (candidate.language == "triton" and self.cpu_mode):
            # without a GPU (and for NVRTC launches anywhere): a dry run records the launches and
            # compiles the Triton ones for this machine's target architecture
            return await self._compile_dry(candidate, task, report)
        if candidate.language != "triton":
            return report
        # Triton compiles at its first launch: load the module and launch once on the smoke workload
        try:
            wl = task.smoke().name
        except TaskError:
            wl = task.workloads[0].name
        run = _Run(candidate, EvalSettings(seed=0, trials=1, workloads=[wl]), task)
        async with self.pool.acquire() as w:
            if await self._load(w, run, task):
                await self._correctness(w, run, task, wl)
                if run.ran:
                    await self._collect_kernels(w, run)
        return self._merge_compile(report, run, judged=False)

    def _smoke_name(self, task: Task) -> str:
        try:
            return task.smoke().name
        except TaskError:
            return task.workloads[0].name

    async def _dryrun_worker(self) -> WorkerProcess:
        if self._dry is None:
            self._dry = WorkerProcess(
                int(self._dry_args["slot"]),
                None,
                self.session,
                shared=self.shared,
                cpu_mode=True,
                gpu_mem_fraction=float(self._dry_args["gpu_mem_fraction"]),
                memory_limit_bytes=int(self._dry_args["memory_limit_bytes"]),
                jailed=self.jailed,
                extra_env={"TRITON_INTERPRET": "0"},
            )
        await self._dry.ensure_started()
        return self._dry

    async def _compile_dry(self, candidate: Candidate, task: Task, static: CompileReport) -> CompileReport:
        """The static report plus what a dry run of the candidate gives: its Triton kernels compiled for
        `self.arch` (registers, spills, shared memory, warps, stages, occupancy), its NVRTC launch sizes."""
        t0 = time.perf_counter()
        report = static.model_copy(deep=True)
        wl = self._smoke_name(task)
        args = {
            "task": _task_json(task),
            "candidate": {"id": candidate.id, "language": candidate.language, "source": candidate.source},
            "workload": wl,
            "arch": self.arch,
            "budget_s": self.dryrun_timeout_s,
        }
        lang = candidate.language
        failed: str | None = None
        res: dict[str, Any] = {}
        async with self._dry_lock:
            try:
                w = await self._dryrun_worker()
                # the worker stops starting builds once its budget is spent; this is the backstop for
                # one that never returns (a compile or host code stuck outside Python)
                reply = await w.call("dryrun", args, self.dryrun_timeout_s + DRYRUN_SLACK_S)
                if reply.get("ok"):
                    res = reply["result"]
                else:
                    failed = f"the compile worker failed: {str(reply.get('error'))[:600]}"
            except WorkerError as e:
                failed = (
                    f"the dry run and compile did not finish within "
                    f"{self.dryrun_timeout_s + DRYRUN_SLACK_S:.0f} s"
                    if e.kind == "timeout"
                    else f"the compile worker {e.kind}: {e.message}"
                )
        seconds = time.perf_counter() - t0
        report.seconds += seconds
        if failed is not None:
            sev = "warning" if lang == "triton" else "note"
            report.diagnostics.append(Diagnostic(severity=sev, message=f"static check incomplete: {failed}"))
            if lang == "triton":
                report.mode = f"python/AST checks; Triton compile for {self.arch} not completed ({failed})"
            return report
        for d in res.get("diagnostics", []):
            diag = _diag(d)
            if lang != "triton" and diag.severity != "error":
                diag = diag.model_copy(update={"severity": "note"})  # NVRTC host code on CPU tensors may balk
            report.diagnostics.append(diag)
        where = f"workload {res.get('workload', wl)!r} ({_params_text(res.get('params', {}))})"
        if lang == "triton":
            # the static check's "known after their first launch on a GPU" is answered (or refuted) now
            report.diagnostics = [
                d for d in report.diagnostics if not d.message.startswith("Triton kernels:")
            ]
            for k in res.get("kernels", []):
                grid = k.get("grid")
                cfg = "; ".join(
                    x for x in (k.get("config"), f"grid {tuple(grid)}" if grid else None, f"on {where}") if x
                )
                kr, notes = occupancy.annotate(
                    KernelResources(
                        **{f: v for f, v in k.items() if f in KernelResources.model_fields and f != "config"},
                        config=cfg,
                    ),
                    self.arch,
                )
                report.kernels.append(kr)
                report.diagnostics += [d.model_copy(update={"line": k.get("line")}) for d in notes]
            if not res.get("kernels") and not any(d.severity == "error" for d in report.diagnostics):
                report.diagnostics.append(
                    Diagnostic(
                        severity="warning",
                        message=f"the dry run on {where} launched no Triton kernel, so none was compiled",
                    )
                )
            report.log = (report.log + "\n" + str(res.get("log", ""))).strip()[-20000:]
            report.mode = (
                f"triton {self._triton_version()} -> {self.arch} cubin (no GPU: compiled, not run; launches "
                f"recorded by a CPU dry run on {where}, specialised for its arguments)"
            )
        else:
            self._apply_cuda_launches(report, res.get("cuda_launches", []), where)
        report.ok = not any(d.severity == "error" for d in report.diagnostics)
        return report

    def _apply_cuda_launches(self, report: CompileReport, launches: list[dict[str, Any]], where: str) -> None:
        """nvcc's kernels at the block sizes the dry run launched them with (their occupancy needs it)."""
        if not launches:
            return
        kernels: list[KernelResources] = []
        redone: set[str] = set()
        for k in report.kernels:
            mine = [c for c in launches if c["name"] in (k.name, k.name.split("::")[-1])]
            if not mine:
                kernels.append(k)
                continue
            redone.add(k.name)
            for c in mine:
                dyn = int(c.get("dynamic_shared", 0))
                cfg = (
                    f"block {tuple(c['block'])}"
                    + (f", {dyn} B dynamic shared" if dyn else "")
                    + f"; on {where}"
                )
                kr, notes = occupancy.annotate(
                    k.model_copy(
                        update={
                            "threads_per_block": int(c["threads"]),
                            "shared_bytes": (k.shared_bytes or 0) + dyn,
                            "config": cfg,
                            "occupancy": None,
                        }
                    ),
                    self.arch,
                )
                kernels.append(kr)
                line = next((d.line for d in report.diagnostics if d.kernel == k.name), None)
                report.diagnostics += [d.model_copy(update={"line": line}) for d in notes]
        # the by-block-size tables of the kernels whose launch is now known are superseded
        report.diagnostics = [
            d
            for d in report.diagnostics
            if not (d.kernel in redone and d.severity == "note" and "block size set at launch" in d.message)
        ]
        report.kernels = kernels
        report.mode += f"; block sizes from a CPU dry run on {where}"

    def _triton_version(self) -> str:
        h = (self._dry.hello if self._dry else None) or self.pool.workers[0].hello or {}
        return str(h.get("triton") or "")

    # ------------------------------------------------------------------ evaluate
    async def correctness(self, candidate: Candidate, task: Task, settings: EvalSettings) -> Evaluation:
        return await self.evaluate(candidate, task, settings, timing=False)

    async def evaluate(
        self,
        candidate: Candidate,
        task: Task,
        settings: EvalSettings,
        *,
        timing: bool = True,
        profile_workload: str | None = None,
        progress: Progress | None = None,
    ) -> Evaluation:
        run = _Run(candidate, settings, task)
        names = settings.workloads or [w.name for w in task.by_split("search")]
        known = {w.name for w in task.workloads}
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            return Evaluation(
                status="error",
                settings=settings,
                seconds=time.perf_counter() - run.t0,
                error=f"unknown workload(s) {unknown} for task {task.name!r}; it has: "
                f"{', '.join(sorted(known))}"
                if unknown
                else "no workload to evaluate",
            )

        async def say(msg: str, frac: float) -> None:
            if progress is not None:
                await progress(msg, frac)

        static = asyncio.create_task(self.compiler.compile(candidate, (task.candidate_entry,)))
        profile: ProfileSummary | None = None
        try:
            await say("compiling", 0.0)
            # Triton's static check is AST-only (milliseconds): a syntax error needs no worker at all
            report = await static if candidate.language == "triton" else None
            if report is not None and not report.ok:
                return self._finish(run, report, None, status="compile_error")
            env = await self._environment()
            needs = task.extras.get("needs_gpu") if task.style == "gpumode" else None
            if env.cpu_mode and needs:
                run.fail("error", f"this task needs a GPU ({needs}); this machine has none")
                return self._finish(run, await static, env)
            if env.cpu_mode and candidate.language != "triton":
                report = await static
                if not report.ok:
                    return self._finish(run, report, env, status="compile_error")
                run.fail(
                    "error",
                    f"this machine has no GPU: {candidate.language} candidates run only on a GPU. "
                    "Only the static nvcc compile ran (see compile); correctness and timing need a GPU.",
                )
                return self._finish(run, report, env)
            async with self.pool.acquire() as w:
                if timing and not env.cpu_mode:
                    await self._ensure_ceilings(w, env)
                await say("loading", 0.05)
                if await self._load(w, run, task):
                    for i, wl in enumerate(names):
                        await say(f"correctness: {wl}", 0.1 + 0.4 * i / len(names))
                        await self._correctness(w, run, task, wl)
                        if (
                            run.status in ("crash", "timeout", "interpreter_timeout")
                            or run.runtime_compile is not None
                            or not w.alive
                        ):
                            break
                    if run.ran and w.alive:
                        await self._collect_kernels(w, run)
                    all_ok = run.status is None and all(c.passed for c in run.correctness)
                    if timing and all_ok and w.alive:
                        await self._timing(w, run, task, names, env, say)
                    if profile_workload and all_ok and not env.cpu_mode and w.alive:
                        await say(f"profiling: {profile_workload}", 0.95)
                        try:
                            profile = await self._profile_on(w, candidate, task, profile_workload, None)
                        except SandboxError as e:
                            run.flag(f"note: profiling failed: {e}")
            report = await static
            await say("done", 1.0)
            return self._finish(run, report, env, profile=profile, timing=timing)
        except WorkerError as e:  # the worker could not even start
            run.fail("error", f"the sandbox worker could not start: {e.message}\n{e.stderr[-2000:]}")
            return self._finish(run, await static, None)
        finally:
            if not static.done():
                static.cancel()

    async def _load(self, w: WorkerProcess, run: _Run, task: Task) -> bool:
        timeout = self.build_timeout_s if run.candidate.language == "cpp_ext" else self.call_timeout_s
        args = {
            "task": _task_json(task),
            "candidate": {
                "id": run.candidate.id,
                "language": run.candidate.language,
                "source": run.candidate.source,
            },
        }
        w.ran_candidate = True
        reply = await self._call(w, run, "load", args, timeout, "loading the candidate module")
        if reply is None:
            return False
        res = reply["result"]
        if not res.get("ok"):
            fault = res["fault"]
            if fault["kind"] == "compile":
                run.runtime_compile = fault
                run.fail("compile_error", fault["message"])
            else:
                kind = {"cuda": "crash", "oom": "error"}.get(fault["kind"], "error")
                run.fail(kind, f"importing the candidate module failed: {fault['message']}")
            return False
        run.flag(*res.get("flags", []))
        return w.alive  # a worker that retired itself (tampering at import) runs nothing more

    async def _call(
        self,
        w: WorkerProcess,
        run: _Run,
        op: str,
        args: dict[str, Any],
        timeout_s: float,
        what: str,
        workload: str | None = None,
        *,
        about: str | None = None,
    ) -> dict[str, Any] | None:
        """One worker call; a dead/hung worker or a harness error is recorded on `run` (None returned).

        `workload`: record a failed correctness entry for it; `about`: the workload a message names."""
        try:
            reply = await w.call(op, args, timeout_s)
        except WorkerError as e:
            slow = self._interpreter_too_slow(w, run, what, workload or about, timeout_s, e)
            if slow is not None:
                if workload is not None:
                    run.correctness.append(
                        WorkloadCorrectness(
                            workload=workload,
                            passed=False,
                            kind="interpreter_timeout",
                            trials=0,
                            message=slow[:4000],
                        )
                    )
                run.fail("interpreter_timeout", slow)
                return None
            status = "timeout" if e.kind == "timeout" else "crash"
            detail = f"\nlast worker output:\n{e.stderr[-1500:]}" if e.stderr.strip() else ""
            msg = (
                f"{e.message} while {what}."
                + (
                    " The candidate probably hangs (an infinite loop, a deadlock, or a kernel that never finishes)."
                    if e.kind == "timeout"
                    else ""
                )
                + detail
            )
            if workload is not None:
                run.correctness.append(
                    WorkloadCorrectness(
                        workload=workload,
                        passed=False,
                        kind="timeout" if e.kind == "timeout" else "crash",
                        trials=0,
                        message=msg[:4000],
                    )
                )
            run.fail(status, msg)
            return None
        if not reply.get("ok"):
            run.fail("error", f"sandbox harness error while {what}: {reply.get('error')}")
            run.flag(f"note: harness trace: {str(reply.get('trace', ''))[-1500:]}")
            return None
        if reply.get("fatal"):
            run.flag(f"note: worker replaced after this call: {str(reply['fatal'])[:300]}")
        return reply

    def _interpreter_too_slow(
        self, w: WorkerProcess, run: _Run, what: str, workload: str | None, timeout_s: float, e: WorkerError
    ) -> str | None:
        """The message for a timeout that the Triton CPU interpreter's slowness explains, else None.

        The killed worker's record (gpu.interp_watch) says whether its time went into interpreted kernels;
        a candidate whose own host code loops forever still gets "timeout"."""
        if e.kind != "timeout" or not self.cpu_mode or run.candidate.language != "triton":
            return None
        st = interp_watch.read(w.scratch)
        if st is None or not st.interpreter_bound:
            return None
        size = ""
        if workload is not None and run.task is not None:
            try:
                size = f" ({_params_text(run.task.workload(workload).params)})"
            except TaskError:
                size = ""
        name = f"workload {workload!r}{size}" if workload else "this workload"
        return (
            f"interpreter too slow, not a hang: the Triton CPU interpreter did not finish {name} within the "
            f"{timeout_s:.0f} s limit while {what}; {st.interpreting_s:.0f} of {st.elapsed_s:.0f} s went into "
            f"interpreted kernels ({st.progress()}). Without a GPU every program of a grid runs its tensor "
            "operations in NumPy, one program after another, orders of magnitude slower than on a GPU: this "
            "says nothing about the kernel's correctness or speed, and the attempt does not count as a failed "
            f"implementation. To check kernels on this machine, give the task a smoke workload (split 'smoke') "
            f"smaller than {name}, or raise the sandbox's per-call limit (call_timeout_s); on a GPU the same "
            "workload runs normally."
        )

    async def _correctness(self, w: WorkerProcess, run: _Run, task: Task, wl: str) -> None:
        first = not run.correctness
        timeout = self.call_timeout_s * max(1.0, run.settings.trials / 3)
        if first and run.candidate.language == "cpp_ext":
            timeout += self.build_timeout_s
        args = {
            "workload": wl,
            "seed": run.settings.seed,
            "trials": run.settings.trials,
            "audit": self.kernel_audit,
        }
        reply = await self._call(
            w, run, "correctness", args, timeout, f"checking correctness on workload {wl!r}", wl
        )
        if reply is None:
            return
        res = reply["result"]
        run.ran = True
        c = res["correctness"]
        fault = res.get("fault")
        if fault and fault.get("kind") == "compile":
            run.runtime_compile = fault
            run.fail("compile_error", fault["message"])
        run.correctness.append(
            WorkloadCorrectness(**{k: v for k, v in c.items() if k in WorkloadCorrectness.model_fields})
        )
        run.flag(*res.get("flags", []), *res.get("notes", []))
        if res.get("pure_pytorch"):
            run.pure_pytorch = True
        if fault and fault.get("kind") != "compile":
            status = {"cuda": "crash"}.get(fault["kind"], "error")
            what = {
                "oom": "ran out of GPU memory",
                "cuda": "hit a fatal CUDA error",
                "exception": "raised an exception",
            }.get(fault["kind"], "failed")
            run.fail(status, f"the candidate {what} on workload {wl!r}: {fault['message']}")

    async def _collect_kernels(self, w: WorkerProcess, run: _Run) -> None:
        try:
            reply = await w.call("kernels", {}, timeout_s=60.0)
        except WorkerError:
            return
        if reply.get("ok"):
            run.runtime_kernels = reply["result"].get("kernels", [])

    def _baseline_key(self, task: Task, wl: str, kind: str, env: Environment, st: EvalSettings) -> str:
        # the eager baseline has no mode: every compile mode shares it
        how = f"compile[{st.compile_mode}]" if kind == "compile" else kind
        protocol = "" if st.timing_protocol == "ksearch" else f":protocol={st.timing_protocol}"
        return (
            f"baseline:{BASELINE_VERSION}:{how}:{task.name}:{self._fingerprint(task)}:{wl}:{env.key()}:"
            f"flush={st.flush_l2}:sets={st.input_sets}:budget={st.time_budget_s}{protocol}"
        )

    async def _measure_baseline(
        self, w: WorkerProcess, run: _Run, wl: str, kind: str, key: str
    ) -> dict[str, Any] | None:
        st = run.settings
        base_settings = st.model_copy(update={"final": False})
        timeout = (
            self.build_timeout_s if kind == "compile" else self.call_timeout_s + _timing_s(base_settings)
        )
        try:
            reply = await w.call(
                "benchmark", {"workload": wl, "settings": base_settings.model_dump(), "which": kind}, timeout
            )
        except WorkerError as e:
            run.flag(f"note: the {kind} baseline for {wl} could not be measured ({e.kind}: {e.message})")
            return None
        if not reply.get("ok"):
            value: dict[str, Any] = {"error": str(reply.get("error"))[:2000]}
            run.flag(f"note: the {kind} baseline for {wl} failed: {value['error'][:300]}")
        else:
            value = reply["result"]
        await self.cache.put(key, value)
        return value if "median_us" in value else None

    async def _baselines(
        self, w: WorkerProcess, run: _Run, task: Task, names: list[str], env: Environment
    ) -> dict[tuple[str, str], dict[str, Any] | None]:
        """(workload, kind) -> the baseline's timing (None if it could not be measured)."""
        kinds = ["eager", "compile"] if self.compile_baseline else ["eager"]
        out: dict[tuple[str, str], dict[str, Any] | None] = {}
        missing: list[tuple[str, str, str]] = []
        for wl in names:
            for kind in kinds:
                key = self._baseline_key(task, wl, kind, env, run.settings)
                hit = await self.cache.get(key)
                if hit is None:
                    missing.append((wl, kind, key))
                else:
                    out[(wl, kind)] = hit if "median_us" in hit else None
        if not missing:
            return out
        if self.clean_baselines:
            await w.restart("baseline")
            reply = await w.call("task", {"task": _task_json(task)}, self.call_timeout_s)
            if not reply.get("ok"):
                raise SandboxError(f"the baseline worker could not set up the task: {reply.get('error')}")
        try:
            for wl, kind, key in missing:
                out[(wl, kind)] = await self._measure_baseline(w, run, wl, kind, key)
        finally:
            if self.clean_baselines:
                await w.restart("candidate")
        return out

    async def _timing(
        self,
        w: WorkerProcess,
        run: _Run,
        task: Task,
        names: list[str],
        env: Environment,
        say: Callable[[str, float], Awaitable[None]],
    ) -> None:
        st = run.settings
        ceil = await self.ceilings(w) if not env.cpu_mode else {}
        measured: list[tuple[str, dict[str, Any]]] = []
        for i, wl in enumerate(names):
            await say(f"timing: {wl}", 0.5 + 0.4 * i / len(names))
            timeout = self.call_timeout_s + _timing_s(st)
            reply = await self._call(
                w,
                run,
                "benchmark",
                {"workload": wl, "settings": st.model_dump(), "ceilings": ceil, "which": "candidate"},
                timeout,
                f"timing workload {wl!r}",
                about=wl,
            )
            if reply is None:
                return
            res = reply["result"]
            if "fault" in res:
                f = res["fault"]
                status = {"cuda": "crash"}.get(f["kind"], "error")
                run.fail(status, f"the candidate failed while being timed on {wl!r}: {f['message']}")
                return
            measured.append((wl, res))
        base = await self._baselines(w, run, task, names, env)
        for wl, res in measured:
            eager, comp = base.get((wl, "eager")), base.get((wl, "compile"))
            med = res["median_us"]
            t = WorkloadTiming(
                workload=wl,
                device=res["device"],
                median_us=med,
                mean_us=res.get("mean_us"),
                iqr_us=res["iqr_us"],
                ci_low_us=res["ci_low_us"],
                ci_high_us=res["ci_high_us"],
                n=res["n"],
                host_median_us=res.get("host_median_us"),
                eager_median_us=eager["median_us"] if eager else None,
                compile_median_us=comp["median_us"] if comp else None,
                compile_mode=comp.get("compile_mode") if comp else None,
                speedup_vs_eager=eager["median_us"] / med if eager and med > 0 else None,
                speedup_vs_compile=comp["median_us"] / med if comp and med > 0 else None,
                roofline_fraction=res.get("roofline_fraction"),
                flags=list(res.get("flags", [])),
            )
            run.timings.append(t)
            run.flag(*res.get("flags", []))

    # ------------------------------------------------------------------ assembly
    def _merge_compile(self, static: CompileReport, run: _Run, judged: bool = True) -> CompileReport:
        report = static.model_copy(deep=True)
        if run.runtime_compile is not None:
            diags = [_diag(d) for d in run.runtime_compile.get("diagnostics", [])]
            if not any(d.severity == "error" for d in diags):
                diags.append(Diagnostic(severity="error", message=run.runtime_compile["message"][:4000]))
            seen = {(d.line, d.message) for d in diags}  # nvcc and NVRTC often say the same thing
            report.diagnostics = diags + [d for d in report.diagnostics if (d.line, d.message) not in seen]
            report.ok = False
            report.log = (run.runtime_compile["message"] + "\n" + report.log)[-20000:]
            report.mode = (report.mode + "; " if report.mode else "") + "run-time compile in the worker"
        elif run.ran and not static.ok and static.language in ("cuda", "cpp_ext"):
            # nvcc disagreed with the run-time compiler that actually built and ran the kernels
            report.diagnostics = [
                d.model_copy(
                    update={
                        "severity": "warning",
                        "message": "nvcc static check (the run-time compiler accepted this): " + d.message,
                    }
                )
                if d.severity == "error"
                else d
                for d in report.diagnostics
            ]
            report.ok = True
        if run.runtime_kernels:
            rk = [
                KernelResources(**{k: v for k, v in k_.items() if k in KernelResources.model_fields})
                for k_ in run.runtime_kernels
            ]
            rnames = {k.name for k in rk}
            static_measured = [k for k in report.kernels if k.registers is not None and k.name not in rnames]
            annotated = []
            for k in rk:
                if k.num_warps is not None:  # a Triton build: its block size is known, so its occupancy
                    k, notes = occupancy.annotate(k, self.arch)
                    report.diagnostics += notes
                annotated.append(k)
            report.kernels = static_measured + annotated
            if static.language == "triton":
                report.mode += (
                    "; Triton kernels compiled by their first launch (resources from Triton's metadata)"
                )
        if not judged and run.correctness and not run.correctness[0].passed and run.runtime_compile is None:
            c = run.correctness[0]
            if c.kind in ("exception", "crash", "timeout", "interpreter_timeout"):
                report.diagnostics.append(
                    Diagnostic(
                        severity="warning",
                        message=f"the warm launch on {c.workload} failed ({c.kind}): {c.message[:1500]}",
                    )
                )
        return report

    def _finish(
        self,
        run: _Run,
        static: CompileReport,
        env: Environment | None,
        *,
        status: str | None = None,
        profile: ProfileSummary | None = None,
        timing: bool = True,
    ) -> Evaluation:
        report = self._merge_compile(static, run)
        for d in static.diagnostics:
            if d.severity == "warning" and d.message.startswith("suspicious:"):
                run.flag(f"tamper_suspect: line {d.line}: {d.message.removeprefix('suspicious: ')}")
        if status is None:
            if not report.ok:
                status = "compile_error"
                errs = [
                    f"line {d.line}: {d.message}" if d.line else d.message
                    for d in report.diagnostics
                    if d.severity == "error"
                ]
                run.error = run.error if run.status == "compile_error" and run.error else "; ".join(errs[:5])
            elif run.status is not None:
                status = run.status
            elif any(not _is_note(f) for f in run.flags):
                status = "flagged"
                run.error = "cheat checks tripped: " + "; ".join(f for f in run.flags if not _is_note(f))
            elif not run.correctness or not all(c.passed for c in run.correctness):
                status = "incorrect"
                bad = next((c for c in run.correctness if not c.passed), None)
                run.error = (
                    f"wrong result on workload {bad.workload!r}: {bad.kind}: {bad.message}"
                    if bad
                    else "no correctness result"
                )
            elif timing and len(run.timings) < len(run.correctness):
                status = "error"
                run.error = run.error or "timing did not complete"
            else:
                status = "ok"
        elif status == "compile_error":
            errs = [
                f"line {d.line}: {d.message}" if d.line else d.message
                for d in report.diagnostics
                if d.severity == "error"
            ]
            run.error = "; ".join(errs[:5])
        sp_e = geomean([t.speedup_vs_eager for t in run.timings if t.speedup_vs_eager])
        sp_c = geomean([t.speedup_vs_compile for t in run.timings if t.speedup_vs_compile])
        roof = geomean([t.roofline_fraction for t in run.timings if t.roofline_fraction])
        if run.timings and run.timings[0].device == "cpu-interpreter":
            run.flag(
                "note: timings are from the Triton CPU interpreter: functional only, never comparable with "
                "GPU timings"
            )
        return Evaluation(
            status=status,
            compile=report,
            correctness=run.correctness,
            timings=run.timings,  # type: ignore[arg-type]
            speedup_vs_eager=sp_e,
            speedup_vs_compile=sp_c,
            roofline_fraction=roof,
            profile=profile,
            env=env,
            settings=run.settings,
            flags=run.flags,
            error=run.error[:6000] if run.error else None,
            seconds=time.perf_counter() - run.t0,
            pure_pytorch=run.pure_pytorch,
        )

    # ------------------------------------------------------------------ profile
    async def profile(
        self, candidate: Candidate, task: Task, workload: str, kernel: str | None = None
    ) -> ProfileSummary:
        if self.cpu_mode:
            raise SandboxError("profiling needs a GPU; this machine has none (CPU interpreter mode)")
        task.workload(workload)  # a clear TaskError for an unknown name
        async with self.pool.acquire() as w:
            return await self._profile_on(w, candidate, task, workload, kernel)

    async def _profile_on(
        self, w: WorkerProcess, candidate: Candidate, task: Task, workload: str, kernel: str | None
    ) -> ProfileSummary:
        """Run ncu while holding worker `w`, so nothing else runs on its GPU meanwhile."""
        exe = ncu.find_ncu()
        if exe is None:
            raise SandboxError(
                "Nsight Compute (ncu) is not installed on this machine: install the CUDA toolkit's "
                "nsight-compute or put ncu on PATH; timing and correctness work without it"
            )
        work = self.session / f"profile{w.slot}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        spec = {
            "task": _task_json(task),
            "workload": workload,
            "seed": 0,
            "calls": PROFILED_CALLS,
            "candidate": {"id": candidate.id, "language": candidate.language, "source": candidate.source},
        }
        (work / "spec.json").write_text(json.dumps(spec))
        import sys

        report = str(work / "profile.ncu-rep")
        cmd = ncu.ncu_command(
            exe, [sys.executable, "-m", "gpu.profile_driver", str(work / "spec.json")], report, kernel
        )
        if self.jailed:  # the candidate runs under ncu here: the same walls as in a worker
            self.shared.mkdir(parents=True, exist_ok=True)
            cmd = jail.wrap(cmd, [work, self.shared])
        env = scrubbed_env(
            home=work,
            extra={"CUDA_VISIBLE_DEVICES": str(w.gpu), **compiler_cache_env(self.shared)},
        )
        rc, text = await self._run_tool(cmd, work, env)
        if rc == 3 or "candidate failed under the profiler" in text:
            msg = next((ln for ln in text.splitlines() if "candidate failed" in ln), text[-800:])
            raise SandboxError(f"the candidate failed while being profiled: {msg}")
        _, details = await self._run_tool(ncu.import_command(exe, report, "details"), work, env)
        _, raw = await self._run_tool(ncu.import_command(exe, report, "raw"), work, env)
        try:
            return ncu.parse_details(details, workload, kernel, raw_text=raw)
        except ncu.ProfileError as e:
            raise SandboxError(f"{e}{ncu.explain(text)}") from None

    async def _run_tool(self, cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
        """Run a tool in its own process group with the build timeout; (exit status, stdout + stderr)."""
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,  # never the MCP host's pipe
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out = await communicate_or_kill(proc, self.build_timeout_s)  # cancelled: the group is killed
        except TimeoutError:
            raise SandboxError(
                f"{Path(cmd[0]).name} did not finish within {self.build_timeout_s:.0f} s"
            ) from None
        return proc.returncode or 0, out.decode(errors="replace")

    async def reference_times(self, task: Task, settings: EvalSettings) -> dict[str, dict[str, float | None]]:
        """The reference's eager and torch.compile medians (us) per workload, measured exactly as the
        baselines every speedup divides by (cached per task, workload and environment). Empty without a
        GPU: interpreter-era CPU times say nothing about a kernel's GPU time."""
        env = await self._environment()
        if env.cpu_mode:
            return {}
        names = settings.workloads or [w.name for w in task.by_split("search")]
        run = _Run(Candidate.of("# reference times only\n", "triton"), settings)
        async with self.pool.acquire() as w:
            if not self.clean_baselines:
                reply = await w.call("task", {"task": _task_json(task)}, self.call_timeout_s)
                if not reply.get("ok"):
                    raise SandboxError(f"the worker could not set up the task: {reply.get('error')}")
            base = await self._baselines(w, run, task, names, env)
        return {
            wl: {kind: (v or {}).get("median_us") for (n, kind), v in base.items() if n == wl} for wl in names
        }

    async def close(self) -> None:
        await self.pool.close()
        if self._dry is not None:
            await self._dry.stop()
        shutil.rmtree(self.session, ignore_errors=True)
