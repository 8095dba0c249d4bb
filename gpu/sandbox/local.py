"""The sandbox: compile, check, time and profile candidates in isolated worker processes.

`Sandbox` (gpu/sandbox/api.py) is the interface the tools and the driver use (a cluster backend can
implement it); `LocalSandbox`, here, runs one worker per visible GPU on this machine, or one CPU worker
running Triton under its interpreter when there is no GPU. Importing this module does not import torch.

Results are structured, never exceptions: a compile error, a wrong answer, a crash, a hang or a
cheat check each come back as an `Evaluation` with a status and a message a model can act on.

Its parts: the worker calls of one evaluation and the baselines (gpu/sandbox/steps.py), the assembly of
the Evaluation (gpu/sandbox/run.py), compiling without a GPU by a dry run (gpu/sandbox/dryrun.py), Nsight
Compute (gpu/sandbox/profile.py), the worker processes themselves (gpu/sandbox/pool.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ksearch.gpu.build.compiler import StaticCompiler
from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.limits import Limits
from ksearch.gpu.sandbox.api import HardwareFacts, Progress, Sandbox, SandboxError
from ksearch.gpu.sandbox.dryrun import DryRun
from ksearch.gpu.sandbox.facts import MachineFacts
from ksearch.gpu.sandbox.kvcache import JsonFileCache, KVCache
from ksearch.gpu.sandbox.machine import (
    forks_default,
    gpus_visible,
    query_gpu_facts,
    spares_default,
    sweep_dead_sessions,
    visible_gpus,
)
from ksearch.gpu.sandbox.pool import WorkerBusy, WorkerPool, WorkerProcess
from ksearch.gpu.sandbox.process import WorkerError
from ksearch.gpu.sandbox.profile import profile_on
from ksearch.gpu.sandbox.run import Run, finish, merge_compile, smoke_name, timed_names
from ksearch.gpu.sandbox.steps import BASELINE_VERSION, EvalSteps, baseline_reading, stat_of
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.gpu.worker import simulated
from ksearch.gpu.worker.faults import MAY_RUN_ON_GPU
from ksearch.worldmodel.models import (
    PROTOCOL_STATISTIC,
    BaselineReading,
    Candidate,
    CompileReport,
    Diagnostic,
    EvalSettings,
    Evaluation,
    ProfileSummary,
)

# the names callers import from here
__all__ = [
    "BASELINE_VERSION",
    "HardwareFacts",
    "LocalSandbox",
    "Progress",
    "Sandbox",
    "SandboxError",
    "gpus_visible",
    "visible_gpus",
]

log = logging.getLogger("ksearch.sandbox")


class LocalSandbox(MachineFacts, EvalSteps, Sandbox):
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
        spare_workers: bool | None = None,
        fresh_per_candidate: bool | None = None,
        limits: Limits | None = None,
        only_gpus: Sequence[str] | None = None,
        simulated_gpus: int | None = None,
    ) -> None:
        mode = isolation or os.environ.get("KSEARCH_ISOLATION", "auto")
        try:
            self.jailed, self.isolation = jail.resolve(mode)
        except (ValueError, OSError) as e:
            raise SandboxError(str(e)) from None
        if not self.jailed:
            log.warning("sandbox isolation %s", self.isolation)
        gpus, self._driver, cc = query_gpu_facts()
        try:
            # tests of the GPU's scheduling on a machine without one (gpu/worker/simulated.py); never measurements
            self.simulated = simulated.count() if simulated_gpus is None else simulated_gpus
        except ValueError as e:
            raise SandboxError(str(e)) from None
        if self.simulated:
            gpus, self._driver, cc = [f"sim{i}" for i in range(self.simulated)], None, "9.0"
        self.cpu_mode = (not gpus) if cpu_mode is None else cpu_mode
        if not self.cpu_mode and not gpus:
            raise SandboxError("GPU mode was requested but no GPU is visible (nvidia-smi lists none)")
        if only_gpus is not None and not self.cpu_mode:
            unknown = [g for g in only_gpus if g not in gpus]
            if unknown:
                raise SandboxError(
                    f"GPU {', '.join(unknown)} is not visible to this process; visible: {', '.join(gpus) or 'none'}"
                )
            gpus = [
                g for g in gpus if g in only_gpus
            ]  # a suite's slot: this sandbox's workers on these GPUs only
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
        sweep_dead_sessions(self.root / "sessions")
        self.session = self.root / "sessions" / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.session.mkdir(parents=True, exist_ok=True)
        self.shared = self.root / "shared"
        self.kernel_audit = kernel_audit  # profile one call per candidate: its own kernels must run
        # Baselines (eager, torch.compile) are measured in a fresh worker process that never ran candidate
        # code, with compiler caches no candidate can write: nothing a candidate left behind (patched
        # functions, a background thread, a planted inductor or Triton cache entry) can slow them.
        # Costs two worker restarts per new (task, workload, settings); the results are cached.
        self.clean_baselines = (not self.cpu_mode) if clean_baselines is None else clean_baselines
        # Each new candidate in a process that has run no other candidate's code: a thread, a patched module or GPU
        # work one candidate leaves behind cannot touch the next one's checks or times (the slot's spare, started
        # ahead, takes over). On a GPU by default; on the CPU, where nothing is timed and a cold start costs
        # seconds, when asked, and always after a candidate that left threads running (a worker reports them).
        self.fresh_per_candidate = (not self.cpu_mode) if fresh_per_candidate is None else fresh_per_candidate
        # The torch.compile baseline on a GPU; on the CPU only when asked (tests): a CPU-compiled reference
        # says nothing about the speed of a kernel the interpreter runs.
        # (simulated: off unless asked, inductor's CPU compile costs tens of seconds a workload)
        self.compile_baseline = (
            (not self.cpu_mode and not self.simulated) if compile_baseline is None else compile_baseline
        )
        self.call_timeout_s = call_timeout_s
        self.build_timeout_s = build_timeout_s
        if memory_limit_gb is None:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
            memory_limit_gb = max(4.0, min(64.0, 0.6 * total / len(slots)))
        self.memory_limit_gb = memory_limit_gb
        self.memory_bytes = int(memory_limit_gb * 2**30)
        self.arch = arch or (f"sm_{cc.replace('.', '')}" if cc else "sm_90")
        # what a jailed worker may use beside its host memory (memory_limit_gb): processes, scratch disk
        self.limits = limits or Limits()
        self.cache: KVCache = cache if cache is not None else JsonFileCache(self.root / "cache.json")
        self.compiler = StaticCompiler(self.root, arch=self.arch, jailed=self.jailed)
        self._ref_jobs: dict[str, asyncio.Task[dict[str, dict[str, float | None]]]] = {}
        self._machine: dict[str, Any] | None = None  # the first worker hello (device, versions): see _hello
        self.pool = WorkerPool(
            [
                WorkerProcess(
                    i,
                    g,
                    self.session,
                    shared=self.shared,
                    cpu_mode=self.cpu_mode or bool(self.simulated),
                    gpu_mem_fraction=gpu_mem_fraction,
                    memory_limit_bytes=int(memory_limit_gb * 2**30),
                    jailed=self.jailed,
                    # a process started ahead per slot, so a killed worker (a cancelled or timed-out call, a
                    # crash) costs the next caller no cold start; it never ran candidate code until it takes over
                    spare=spares_default(self.cpu_mode) if spare_workers is None else spare_workers,
                    fork=forks_default(self.cpu_mode or bool(self.simulated)),
                    limits=self.limits,
                    simulate=simulated.worker_config() if self.simulated else None,
                )
                for i, g in enumerate(slots)
            ]
        )
        self._facts: HardwareFacts | None = None
        self._ceilings: dict[str, Any] | None = None
        self._fingerprints: dict[int, str] = {}
        self._drawn_ahead: set[str] = set()
        self._quick_draws: set[str] = set()
        self._checks_s: dict[str, float] = {}
        self._filled: dict[str, Counter[str]] = {}
        # the ceilings' measurement: the job that takes a worker from the pool for it, and the measurement running
        # on a worker (waited for by later callers; see `ceilings`)
        self._ceil_job: asyncio.Task[dict[str, Any]] | None = None
        self._ceil_running: asyncio.Future[dict[str, Any]] | None = None
        # the GPU-less worker that dry-runs candidates for `compile` (gpu/sandbox/dryrun.py)
        self.dryrun_timeout_s = dryrun_timeout_s
        self.dry = DryRun(
            slot=len(slots),
            session=self.session,
            shared=self.shared,
            jailed=self.jailed,
            memory_limit_bytes=int(memory_limit_gb * 2**30),
            gpu_mem_fraction=gpu_mem_fraction,
            arch=self.arch,
            timeout_s=dryrun_timeout_s,
            limits=self.limits,
        )

    def _files(self, task: Task) -> list[str]:
        """The task's own files, which a jailed worker must be shown (jail_view.task_paths); processes
        started from now on show them, so a worker started before the first call does not restart."""
        if not self.jailed:
            return []
        files = jail_view.task_paths(task)
        self.pool.show(files)
        self.dry.worker.show(files)
        return files

    # ------------------------------------------------------------------ facts
    async def start(self) -> None:
        """Start every worker now (otherwise they start on first use)."""
        await self.pool.start()

    def show(self, task: Task) -> None:
        """Have the jailed workers started from now on show `task`'s files: call it before `start` for a task
        outside the ksearch package, or a jailed worker started without them is replaced at its first call
        for the task (a jail shows only what it was started with). Nothing to do unjailed."""
        self._files(task)

    # ------------------------------------------------------------------ compile
    async def compile(self, candidate: Candidate, task: Task) -> CompileReport:
        report = await self.compiler.compile(candidate, (task.candidate_entry,), contract.entry_line(task))
        if not report.ok:
            return report
        needs = task.extras.get("needs_gpu")
        if needs and self.cpu_mode:  # compiled all the same, the task's CUDA placements read as the CPU's
            return await self.dry.compile(candidate, task, report, needs_gpu=str(needs))
        if candidate.language == "cuda" or (candidate.language == "triton" and self.cpu_mode):
            # without a GPU (and for NVRTC launches anywhere): a dry run records the launches and
            # compiles the Triton ones for this machine's target architecture
            return await self.dry.compile(candidate, task, report)
        if candidate.language != "triton":
            return report
        # Triton compiles at its first launch: load the module and launch once on the smoke workload
        wl = smoke_name(task)
        run = Run(candidate, EvalSettings(seed=0, trials=1, workloads=[wl]), task)
        async with self.pool.acquire(self._files(task), purpose=f"compiling a candidate of {task.name}") as w:
            if await self._load(w, run, task):
                await self._correctness(w, run, task, wl)
                if run.ran:
                    await self._collect_kernels(w, run)
        return merge_compile(report, run, self.arch, judged=False)

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
        audit_unless_slower_than: dict[str, float] | None = None,
    ) -> Evaluation:
        run = Run(candidate, settings, task)
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

        files = self._files(task)
        static = asyncio.create_task(
            self.compiler.compile(candidate, (task.candidate_entry,), contract.entry_line(task))
        )
        profile: ProfileSummary | None = None
        # the compile report a GPU compile check gave instead of the static one
        judged: CompileReport | None = None
        try:
            await say("compiling", 0.0)
            # Triton's static check is AST-only (milliseconds): a syntax error needs no worker at all
            report = await static if candidate.language == "triton" else None
            if report is not None and not report.ok:
                return finish(run, report, None, self.arch, status="compile_error")
            # from here until a worker is held is waiting (for the first worker to start, or for the one worker
            # the background baselines hold): counted, and named for the baselines when they hold it
            t_wait = time.perf_counter()
            baselines_busy = any(not j.done() for j in self._ref_jobs.values())
            await say("waiting for a worker" + (" (the baselines hold it)" if baselines_busy else ""), 0.01)
            env = await self._environment()
            needs = task.extras.get("needs_gpu")
            if env.cpu_mode and needs:
                run.fail("error", f"this task needs a GPU ({needs}); this machine has none")
                return finish(run, await static, env, self.arch)
            if env.cpu_mode and candidate.language != "triton":
                report = await static
                if not report.ok:
                    return finish(run, report, env, self.arch, status="compile_error")
                run.fail(
                    "error",
                    f"this machine has no GPU: {candidate.language} candidates run only on a GPU. "
                    "Only the static nvcc compile ran (see compile); correctness and timing need a GPU.",
                )
                return finish(run, report, env, self.arch)
            what = "a benchmark" if timing else "a correctness check"
            async with self.pool.acquire(files, purpose=f"{what} of a candidate of {task.name}") as w:
                waited = time.perf_counter() - t_wait
                run.steps[
                    "wait_for_baselines" if baselines_busy and waited >= 0.05 else "wait_for_worker"
                ] = waited
                drawn, built, referenced = w.inputs_s, w.build_s, w.reference_s
                filled = Counter(w.gpu_fills)
                if timing and not env.cpu_mode:
                    with run.step("gpu_ceilings"):
                        await self._ensure_ceilings(w, env)
                await say("drawing inputs ahead", 0.02)
                await self._draw_ahead(w, run, task, names)  # a step of its own only where it draws
                await say("loading", 0.05)
                with run.step("load"):
                    loaded = await self._load(w, run, task)
                if loaded:
                    audit_later = timing and self.kernel_audit
                    with run.step("correctness"):
                        for i, wl in enumerate(names):
                            await say(f"correctness: {wl}", 0.1 + 0.4 * i / len(names))
                            await self._correctness(w, run, task, wl, audit_later)
                            if (
                                run.status in ("crash", "timeout", "interpreter_timeout")
                                or run.runtime_compile is not None
                                or not w.alive
                            ):
                                break
                        if run.ran and w.alive:
                            await self._collect_kernels(w, run)
                    if run.status is None:
                        self._checks_s[self._fingerprint(task)] = run.steps.get("correctness", 0.0)
                    if (run.runtime_compile or {}).get("interpreter") and report is not None:
                        with run.step("gpu_compile_check"):
                            judged = await self._judge_interpreter_fault(run, candidate, task, report)
                    all_ok = run.status is None and all(c.passed for c in run.correctness)
                    if timing and all_ok and w.alive:
                        ceil: dict[str, Any] = {}
                        if not env.cpu_mode:
                            await say("waiting for the GPU's ceilings", 0.5)
                            with run.step("gpu_ceilings"):
                                ceil = await self.ceilings(w)
                        timed = timed_names(task, names, settings)
                        # steps timing, audit (before the baselines may take the process over), baselines
                        audit_on = names[0] if audit_later else None
                        await self._timing(
                            w, run, task, timed, env, say, ceil, audit_on, audit_unless_slower_than
                        )
                    if profile_workload and all_ok and not env.cpu_mode and w.alive:
                        await say(f"profiling: {profile_workload}", 0.95)
                        try:
                            with run.step("profile"):
                                profile = await self._profile_on(w, candidate, task, profile_workload, None)
                        except SandboxError as e:
                            run.flag(f"note: profiling failed: {e}")
                run.steps["inputs"] = w.inputs_s - drawn
                run.steps["build"] = w.build_s - built  # torch extension builds, inside load or correctness
                # the reference's runs for the checks, inside correctness and timing (its re-checks)
                run.steps["reference"] = w.reference_s - referenced
                self._note_fills(run, task, w.gpu_fills - filled)
            report = judged or await static
            await say("done", 1.0)
            return finish(run, report, env, self.arch, profile=profile, timing=timing)
        except WorkerBusy as e:  # every worker stayed held past the bound: nothing of this candidate ran
            run.fail("error", f"{e.message}; nothing of this candidate ran: send it again")
            return finish(run, await static, None, self.arch)
        except WorkerError as e:  # the worker could not even start
            run.fail("error", f"the sandbox worker could not start: {e.message}\n{e.stderr[-2000:]}")
            return finish(run, await static, None, self.arch)
        finally:
            if not static.done():
                static.cancel()

    async def _judge_interpreter_fault(
        self, run: Run, candidate: Candidate, task: Task, static: CompileReport
    ) -> CompileReport:
        """The Triton interpreter could not run a kernel body (it runs it as Python): where the GPU compile (a dry
        run for this machine's target) builds every kernel the candidate launches, the candidate was not judged
        here (`interpreter_unsupported`, inconclusive); where it fails too, the compile error stands, with its
        diagnostics. Returns the compile report the evaluation carries."""
        dry = await self.dry.compile(candidate, task, static)
        fault = run.runtime_compile or {}
        if dry.ok and not dry.unchecked and dry.kernels:
            run.runtime_compile = None
            run.status = "interpreter_unsupported"
            run.error = (
                f"{fault.get('message', '')}\nThe GPU compile (a dry run for {self.arch}) builds this candidate's "
                "kernels: it was not judged on this machine (inconclusive, not a failure); a GPU evaluates it"
            )
            line = next((d.get("line") for d in fault.get("diagnostics", []) if d.get("line")), None)
            warn = Diagnostic(severity="warning", message=str(fault.get("message", ""))[:4000], line=line)
            # the compile step counts the static check; the dry run is this step's own (gpu_compile_check)
            return dry.model_copy(update={"diagnostics": [warn, *dry.diagnostics], "seconds": static.seconds})
        errors = [d.message for d in dry.diagnostics if d.severity == "error"]
        if errors:
            # the GPU compile answered the interpreter fault's "it may run on a GPU": no, so that hedge goes
            settled = (run.error or "").replace(MAY_RUN_ON_GPU, "")
            run.error = (
                f"{settled}\nThe GPU compile (a dry run for {self.arch}) fails too: {errors[0][:1500]}"
            )
            run.correctness = [
                c.model_copy(update={"message": c.message.replace(MAY_RUN_ON_GPU, "")})
                for c in run.correctness
            ]
            for d in [
                fault,
                *fault.get("diagnostics", []),
            ]:  # they become the compile report's (merge_compile)
                if isinstance(d.get("message"), str):
                    d["message"] = d["message"].replace(MAY_RUN_ON_GPU, "")
        return static

    # ------------------------------------------------------------------ profile
    async def profile(
        self, candidate: Candidate, task: Task, workload: str, kernel: str | None = None
    ) -> ProfileSummary:
        if self.cpu_mode:
            raise SandboxError("profiling needs a GPU; this machine has none (CPU interpreter mode)")
        task.workload(workload)  # a clear TaskError for an unknown name
        async with self.pool.acquire(self._files(task), purpose=f"profiling a candidate of {task.name}") as w:
            return await self._profile_on(w, candidate, task, workload, kernel)

    async def _profile_on(
        self, w: WorkerProcess, candidate: Candidate, task: Task, workload: str, kernel: str | None
    ) -> ProfileSummary:
        return await profile_on(
            w,
            candidate,
            task,
            workload,
            kernel,
            session=self.session,
            shared=self.shared,
            jailed=self.jailed,
            timeout_s=self.build_timeout_s,
        )

    def _reference_job(
        self, task: Task, settings: EvalSettings
    ) -> asyncio.Task[dict[str, dict[str, float | None]]]:
        """The measurement of the reference's times for these settings: started once, shared by every caller."""
        st = settings.model_copy(
            update={"seed": 0, "trials": 0, "final": False}
        )  # neither changes a baseline
        key = f"{task.name}:{self._fingerprint(task)}:{st.model_dump_json()}"
        job = self._ref_jobs.get(key)
        if job is None or (job.done() and (job.cancelled() or job.exception() is not None)):
            job = self._ref_jobs[key] = asyncio.create_task(self._reference_times(task, settings))
        return job

    def start_reference_times(self, task: Task, settings: EvalSettings) -> bool:
        """Measure the baselines in the background (a GPU only: a search's first prompt and benchmark then find
        them ready); True when a measurement is running or done."""
        if self.cpu_mode:
            return False
        self._reference_job(task, settings)
        return True

    async def reference_times(
        self, task: Task, settings: EvalSettings, *, wait: bool = True
    ) -> dict[str, dict[str, float | None]] | None:
        """The reference's eager and torch.compile times (us, the protocol's statistic) per workload, measured as
        the baselines every speedup divides by (cached per task, workload and environment). Empty without a
        GPU: interpreter-era CPU times say nothing about a kernel's GPU time. `wait=False`: None while they are
        still being measured (the measurement goes on in the background)."""
        if self.cpu_mode:
            return {}
        job = self._reference_job(task, settings)
        if not wait and not job.done():
            return None
        return await asyncio.shield(job)

    async def _reference_times(
        self, task: Task, settings: EvalSettings
    ) -> dict[str, dict[str, float | None]]:
        # the machine's facts first (a short call): a prompt asking for them meanwhile waits for these seconds,
        # not for every baseline behind them
        if not self.cpu_mode:
            await self.hardware()
        got = await self._measured_baselines(task, settings, f"the baselines of {task.name}", fresh=False)
        if got is None:
            return {}
        names, base = got
        stat = PROTOCOL_STATISTIC[settings.timing_protocol]
        return {
            wl: {kind: stat_of(v, stat)[0] if v else None for (n, kind), v in base.items() if n == wl}
            for wl in names
        }

    async def _measured_baselines(
        self, task: Task, settings: EvalSettings, purpose: str, *, fresh: bool
    ) -> tuple[list[str], dict[tuple[str, str], dict[str, Any] | None]] | None:
        """(the workloads, their baselines) measured on a worker of the pool (`fresh`: whatever the cache holds);
        None without a GPU. Measuring them for a search's first prompt (not `fresh`), the worker then draws the
        first candidate's correctness inputs ahead (its settings carry the search's seed)."""
        files = self._files(task)  # before any worker starts: none is restarted to show them
        env = await self._environment()
        if env.cpu_mode:
            return None
        names = settings.workloads or [w.name for w in task.by_split("search")]
        run = Run(Candidate.of("# baselines only\n", "triton"), settings)
        async with self.pool.acquire(files, purpose=purpose) as w:
            if not self.clean_baselines:
                await self._send_task(w, task, "the worker")
            base = await self._baselines(w, run, task, names, env, fresh=fresh)
            if not fresh:
                await self._draw_ahead(w, run, task, names)
        return names, base

    async def remeasure_baselines(
        self, task: Task, settings: EvalSettings
    ) -> dict[str, dict[str, BaselineReading | None]]:
        """Measure the baselines of `settings.workloads` anew, whatever the cache holds (a search's re-measurement,
        `ksearch baselines --remeasure`), in a fresh process as always; the cache keeps the new readings. Per workload,
        eager and (where measured) compile. Empty without a GPU."""
        got = await self._measured_baselines(
            task, settings, f"re-measuring the baselines of {task.name}", fresh=True
        )
        if got is None:
            return {}
        names, base = got
        # the prompts' reference times are read again from the cache, which now holds these
        for key in [k for k, j in self._ref_jobs.items() if j.done() and k.startswith(f"{task.name}:")]:
            del self._ref_jobs[key]
        return {
            wl: {
                kind: baseline_reading(v, "compile" if kind == "compile" else "eager", settings)
                for (n, kind), v in base.items()
                if n == wl
            }
            for wl in names
        }

    async def close(self) -> None:
        jobs = [*self._ref_jobs.values(), *([self._ceil_job] if self._ceil_job is not None else [])]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        await self.pool.close()
        await self.dry.close()
        shutil.rmtree(self.session, ignore_errors=True)
