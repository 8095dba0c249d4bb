"""Compiling without a GPU: a second, GPU-less worker with TRITON_INTERPRET=0 dry-runs the candidate on CPU
tensors, recording its launches, and compiles its Triton kernels for the target architecture (registers,
spills, shared memory, warps, stages, occupancy, ptxas's warnings); for NVRTC launches (anywhere) it records their
block sizes. A task that needs a GPU is dry-run too, its CUDA placements read as the CPU's: its kernels are compiled
for the target all the same, and the report says that correctness and timing were not done.

A process running Triton's interpreter cannot give real JITFunctions (Triton's own library functions are
interpreted there too), hence a worker of its own, jailed like the others (see ksearch.gpu.worker.dryrun for its side).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ksearch.gpu.build import occupancy
from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.jail.limits import Limits
from ksearch.gpu.sandbox.pool import WorkerPool, WorkerProcess
from ksearch.gpu.sandbox.process import WorkerError
from ksearch.gpu.sandbox.run import diag, params_text, smoke_name, task_json
from ksearch.gpu.task import Task
from ksearch.worldmodel.models import Candidate, CompileReport, Diagnostic, KernelResources

DRYRUN_SLACK_S = 30.0  # beyond a dry run's own budget before its worker is killed


class DryRun:
    """The dry-run worker (started on first use) and the compile reports it completes."""

    def __init__(
        self,
        *,
        slot: int,
        session: Path,
        shared: Path,
        jailed: bool,
        memory_limit_bytes: int,
        gpu_mem_fraction: float,
        arch: str,
        timeout_s: float,
        limits: Limits | None = None,
    ) -> None:
        self.arch = arch
        self.timeout_s = timeout_s  # the dry run's own budget (the worker stops starting builds after it)
        # no process until the first dry run; no spare: a compile request is rare next to evaluations
        self.worker = WorkerProcess(
            slot,
            None,
            session,
            shared=shared,
            cpu_mode=True,
            gpu_mem_fraction=gpu_mem_fraction,
            memory_limit_bytes=memory_limit_bytes,
            jailed=jailed,
            extra_env={"TRITON_INTERPRET": "0"},
            limits=limits,
        )
        # its one worker, handed to one dry run at a time by a pool of one (a bounded wait that names its holder)
        self.pool = WorkerPool([self.worker])

    def triton_version(self) -> str:
        return str((self.worker.hello or {}).get("triton") or "")

    async def compile(
        self, candidate: Candidate, task: Task, static: CompileReport, needs_gpu: str | None = None
    ) -> CompileReport:
        """The static report plus what a dry run of the candidate gives: its Triton kernels compiled for
        `self.arch` (registers, spills, shared memory, warps, stages, occupancy), its NVRTC launch sizes.

        `needs_gpu` (why the task needs a GPU, on a machine without one): the dry run reads the task's CUDA
        placements as the CPU's, so its kernels are compiled for `self.arch` all the same, and the report says
        what was done and what was not (correctness and timing)."""
        if needs_gpu and candidate.language == "cpp_ext":  # its extension builds only against a CUDA torch
            return self._without_gpu(static.model_copy(deep=True), needs_gpu)
        report = await self._dry_run(candidate, task, static)
        return self._without_gpu(report, needs_gpu) if needs_gpu else report

    def _without_gpu(self, report: CompileReport, needs: str) -> CompileReport:
        """A report for a task that needs a GPU, here without one: what was compiled for `self.arch` without
        running, or why nothing was (its verdict then `not checked`); either way, not correctness nor timing."""
        names = list(dict.fromkeys(k.name for k in report.kernels))
        later = f"correctness and timing need a GPU (this task needs one: {needs})"
        if names or not report.ok:
            report.mode = f"compiled for {self.arch} without running; {later}: {report.mode}"
            if names:
                said = f"compiled for {self.arch} without running: {', '.join(names)}; not done: {later}"
                report.diagnostics.append(Diagnostic(severity="note", message=said))
            return report
        reason = report.unchecked or next(
            (
                d.message.removeprefix("static check incomplete: ")
                for d in report.diagnostics
                if d.message.startswith("static check incomplete")
            ),
            "no kernel of the candidate's own was found to compile",
        )
        report.unchecked = reason
        if not any(reason in d.message for d in report.diagnostics):
            report.diagnostics.append(Diagnostic(severity="warning", message=f"not compiled: {reason}"))
        report.mode = f"python/AST checks only; nothing compiled for {self.arch}; {later}"
        return report

    async def _dry_run(self, candidate: Candidate, task: Task, static: CompileReport) -> CompileReport:
        t0 = time.perf_counter()
        report = static.model_copy(deep=True)
        wl = smoke_name(task)
        args = {
            "task": task_json(task),
            "candidate": {"id": candidate.id, "language": candidate.language, "source": candidate.source},
            "workload": wl,
            "arch": self.arch,
            "budget_s": self.timeout_s,
        }
        lang = candidate.language
        failed: str | None = None
        res: dict[str, Any] = {}
        files = jail_view.task_paths(task) if self.worker.jailed else []
        try:
            async with self.pool.acquire(files, purpose=f"a dry run of a candidate of {task.name}") as w:
                # the worker stops starting builds once its budget is spent; this is the backstop for
                # one that never returns (a compile or host code stuck outside Python)
                reply = await w.call("dryrun", args, self.timeout_s + DRYRUN_SLACK_S)
            if reply.get("ok"):
                res = reply["result"]
            else:
                failed = f"the compile worker failed: {str(reply.get('error'))[:600]}"
        except WorkerError as e:
            failed = (
                f"the dry run and compile did not finish within {self.timeout_s + DRYRUN_SLACK_S:.0f} s"
                if e.kind == "timeout"
                else e.message
                if e.kind == "busy"
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
            found = diag(d)
            if lang != "triton" and found.severity != "error":
                found = found.model_copy(
                    update={"severity": "note"}
                )  # NVRTC host code on CPU tensors may balk
            report.diagnostics.append(found)
        where = f"workload {res.get('workload', wl)!r} ({params_text(res.get('params', {}))})"
        if res.get("cuda_as_cpu"):
            where += " with the task's CUDA placements read as the CPU's"
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
                none = f"the dry run on {where} launched no Triton kernel, so none was compiled"
                report.diagnostics.append(Diagnostic(severity="warning", message=none))
                report.unchecked = (
                    none  # the verdict is `not checked`, never a bare `ok` for nothing compiled
                )
            if res.get("kernels"):
                report.diagnostics.append(
                    Diagnostic(
                        severity="note",
                        message=f"these registers, spills and shared memory are what Triton {self.triton_version()} "
                        f"on this machine compiles for {self.arch} without a GPU; another Triton version or ptxas "
                        "(the GPU machine's) can give other figures: an evaluation on the GPU reports its own",
                    )
                )
            report.log = (report.log + "\n" + str(res.get("log", ""))).strip()[-20000:]
            report.mode = (
                f"triton {self.triton_version()} -> {self.arch} cubin (no GPU: compiled, not run; launches "
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

    async def close(self) -> None:
        await self.worker.stop()
