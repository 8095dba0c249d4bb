"""The worker calls one evaluation is made of: load the candidate, check it per workload, read its
kernels' resources, time it and measure the baselines it is compared with. Each failure is recorded on the
evaluation's `Run` (a status and a message a model can act on), never raised.

`EvalSteps` is a base class of `ksearch.gpu.sandbox.local.LocalSandbox`, which sets the attributes it declares.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ksearch.gpu.sandbox.api import SandboxError
from ksearch.gpu.sandbox.kvcache import KVCache
from ksearch.gpu.sandbox.pool import WorkerProcess
from ksearch.gpu.sandbox.process import WorkerError
from ksearch.gpu.sandbox.run import Run, params_text, task_json, timed_names
from ksearch.gpu.task import Task, TaskError
from ksearch.gpu.tasks import facts
from ksearch.gpu.tasks.draws import seeds as draw_seeds
from ksearch.gpu.timing.stats import unsteady
from ksearch.gpu.worker import interp_watch
from ksearch.worldmodel.models import (
    CPU_INTERPRETER,
    PROTOCOL_STATISTIC,
    BaselineKind,
    BaselineReading,
    Environment,
    EvalSettings,
    TimingStatistic,
    WorkloadCorrectness,
    WorkloadTiming,
)

# v3: the torch.compile baseline is compiled static and fresh per workload, and its key names the mode
# (before, one compile served every workload: dynamically shaped after the first); v4: the torch.compile baseline
# carries the check of its output by the rule a candidate must meet; v5: a reading carries when and on which GPU it
# was measured, and a noisy first reading is measured again
BASELINE_VERSION = "v5"
# a bimodal or wide baseline reading is measured up to this many more times; the tightest is kept
REMEASURES = 2
# a slot's next spare starts at a takeover only where the task's last checks took at least this many process starts
# (they hide it: the timing after them need not wait); else behind the reply, while the model reads it
SPARE_HIDDEN = 1.0
FACTS_WAIT_S = 30.0  # how long drawing ahead waits for a task's facts (their input sizes) still being probed


def task_fingerprint(task: Task) -> str:
    """What a baseline depends on in a task: its definition and its source files (part of its key)."""
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


def stat_of(res: dict[str, Any], stat: TimingStatistic) -> tuple[float, float, float]:
    """(value, CI low, CI high) of a worker's timing in the protocol's statistic. A mean with no CI (a single
    call) is bounded by the calls' range, as the median's is."""
    if stat == "mean" and res.get("mean_us") is not None:
        lo, hi = res.get("mean_ci_low_us"), res.get("mean_ci_high_us")
        if lo is None or hi is None:
            lo, hi = res["ci_low_us"], res["ci_high_us"]
        return float(res["mean_us"]), float(lo), float(hi)
    return float(res["median_us"]), float(res["ci_low_us"]), float(res["ci_high_us"])


def _unsteady_of(res: dict[str, Any], stat: TimingStatistic) -> str | None:
    v, lo, hi = stat_of(res, stat)
    return unsteady(v, float(res["median_us"]), res.get("mean_us"), lo, hi)


def _rel_ci(res: dict[str, Any], stat: TimingStatistic) -> float:
    v, lo, hi = stat_of(res, stat)
    return max(v - lo, hi - v) / v if v > 0 else float("inf")


def baseline_reading(
    value: dict[str, Any] | None, kind: BaselineKind, st: EvalSettings
) -> BaselineReading | None:
    """A worker's baseline result as the record of it (None where it could not be measured)."""
    if not value or "median_us" not in value:
        return None
    stat = PROTOCOL_STATISTIC[st.timing_protocol]
    v, lo, hi = stat_of(value, stat)
    return BaselineReading(
        kind=kind,
        time_us=v,
        statistic=stat,
        ci_low_us=lo,
        ci_high_us=hi,
        n=int(value["n"]),
        median_us=float(value["median_us"]),
        mean_us=value.get("mean_us"),
        protocol=st.timing_protocol,
        compile_mode=value.get("compile_mode") if kind == "compile" else None,
        measured_at=value.get("measured_at"),
        device=str(value.get("device", "")),
        gpu_uuid=value.get("gpu_uuid"),
        env_key=value.get("env_key"),
        remeasured=str(value.get("remeasured", "")),
    )


def timing_s(st: EvalSettings) -> float:
    """The most one benchmark call's timing loop may take: the owners' protocols follow their evaluators' own
    counts (GPU MODE's loop stops after 120 s, and in final mode each call also draws and checks fresh inputs;
    the kernelbench and flashinfer loops stop at 60 s and 90 s)."""
    if st.timing_protocol == "gpumode":
        return 250.0 if st.final else 130.0
    if st.timing_protocol in ("kernelbench", "flashinfer"):  # their loops stop themselves at 60 s / 90 s
        return 120.0
    return (8 if st.final else 3) * st.time_budget_s


async def _input_sizes(task: Task) -> dict[str, int]:
    """Bytes of each workload's inputs, from the task's facts (its reference probed under fake tensors, cached per
    content, usually probed when the search was created); {} where the probe has none."""
    try:
        probe = await asyncio.wait_for(asyncio.to_thread(facts.probe_task, task), FACTS_WAIT_S)
    except TimeoutError:  # the probe goes on in its thread; drawing ahead does without the sizes
        return {}
    return {p.workload: sum(t.bytes for t in p.inputs) for p in probe.workloads if p.inputs}


def _slower_everywhere(
    measured: list[tuple[str, dict[str, Any]]], than: dict[str, float] | None, st: EvalSettings
) -> bool:
    """Whether the candidate's timings are each slower than `than`'s time for their workload (every timed workload
    has one): such a candidate can become no best, so its kernel audit may wait until an attempt could."""
    if not than or not measured:
        return False
    stat = PROTOCOL_STATISTIC[st.timing_protocol]
    return all(wl in than and stat_of(res, stat)[0] > than[wl] for wl, res in measured)


def _draw_notes(res: dict[str, Any]) -> list[str]:
    """What drawing ahead did, said on the evaluation when it drew something slow or failed in part."""
    if not res.get("kept") or not (res.get("stored") or res.get("errors")):
        return []
    where = (
        f"; {res['in_children']} of them in {res['children']} processes at once"
        if res.get("children")
        else ""
    )
    off = (
        f"; {res['called_off']} more draws called off (their workloads drew quickly: nothing to keep)"
        if res.get("called_off")
        else ""
    )
    out = [
        f"note: inputs drawn ahead: {res['drawn']} draws in {res['seconds']:.1f} s{where}, {res['stored']} slow "
        f"ones kept in the machine's draws store for every later evaluation{off}"
    ]
    if res.get("errors"):
        out.append(
            f"note: some draws ahead failed ({'; '.join(res['errors'][:2])}); the candidate's worker draws them"
        )
    return out


# Past this much output in one call, a timeout is the printing's, not a hang's: a pipe takes a few hundred MB/s at most
FLOOD_BYTES = 64 * 2**20


def _timeout_cause(e: WorkerError) -> str:
    """What a timed-out call was most likely doing: flooding its output, or else hanging."""
    if e.kind != "timeout":
        return ""
    if e.output_bytes >= FLOOD_BYTES:
        return (
            f" The candidate was flooding its output: it printed {e.output_bytes / 2**20:.0f} MiB before the call "
            "timed out, and writing that much is what took the time; remove its prints."
        )
    return " The candidate probably hangs (an infinite loop, a deadlock, or a kernel that never finishes)."


class EvalSteps:
    """The steps of an evaluation on a worker the caller holds."""

    cpu_mode: bool
    call_timeout_s: float
    build_timeout_s: float
    kernel_audit: bool  # profile one call per candidate: its own kernels must run
    clean_baselines: bool
    fresh_per_candidate: bool  # a new candidate never shares a process with another one's code
    compile_baseline: bool
    cache: KVCache
    _fingerprints: dict[int, str]
    _drawn_ahead: set[str]  # (task, workloads, seeds) whose slow draws a clean process already made
    _quick_draws: set[
        str
    ]  # tasks whose every workload a draw ahead found quick to draw: none is drawn ahead again
    memory_bytes: int  # host memory a worker's jail may use (its children's draws included)
    _filled: dict[str, Counter[str]]  # per task: its input fills made on the GPU in this sandbox, by op
    _checks_s: dict[str, float]  # per task: the seconds of its last evaluation's correctness step

    def _fingerprint(self, task: Task) -> str:
        key = id(task)
        if key not in self._fingerprints:
            self._fingerprints[key] = task_fingerprint(task)
        return self._fingerprints[key]

    # ------------------------------------------------------------------ inputs drawn ahead
    async def _draw_ahead(self, w: WorkerProcess, run: Run, task: Task, names: list[str]) -> None:
        """Draw the inputs a GPU MODE evaluation will ask for in a baseline-mode process (it never runs candidate
        code and alone may write the machine's draws store), before the candidate's process starts: a generator
        that takes seconds per draw (TriMul's CPU Cauchy draws) then costs them once per (workload, seed) on this
        machine, however often workers are restarted. Once per task, workloads and seeds in this sandbox; with
        clean baselines only (the default on a GPU: the clean process is what makes the store trustworthy)."""
        st = run.settings
        if not self.clean_baselines or task.style != "gpumode":
            return
        timed = set(timed_names(task, names, st))
        pairs: list[tuple[str, int | None]] = []
        for wl in names:
            pairs += [(wl, s) for s in draw_seeds.gpumode_seeds(st.seed, st.trials, st.final, wl in timed)]
            if wl in timed and not st.final:
                pairs.append((wl, None))  # the task's own seed, which its benchmark mode times
        key = f"{self._fingerprint(task)}:{pairs}"
        if key in self._drawn_ahead or self._fingerprint(task) in self._quick_draws:
            return
        note = None
        with run.step("draw_ahead"):
            await w.restart("baseline")
            try:
                reply = await w.call("task", {"task": task_json(task)}, self.call_timeout_s)
                if reply.get("ok"):
                    args = {
                        "pairs": pairs,
                        "sizes": await _input_sizes(task),
                        "parallel": draw_seeds.parallel_draws(),
                        "memory_bytes": self.memory_bytes,
                    }
                    reply = await w.call("draw", args, self.call_timeout_s * max(4, len(pairs)))
                if reply.get("ok"):
                    res = reply["result"]
                    run.flag(*_draw_notes(res))
                    if (
                        res.get("kept")
                        and not res.get("stored")
                        and set(names) <= set(res.get("quick_workloads", []))
                    ):
                        # a restart and a draw of each workload for nothing (TriMul with its fills kept on the GPU:
                        # 24 s of a final evaluation's 76): quick draws stay quick for other seeds
                        self._quick_draws.add(self._fingerprint(task))
                if not reply.get("ok"):
                    note = str(reply.get("error"))[:300]
            except WorkerError as e:
                note = f"{e.kind}: {e.message[:300]}"
            finally:
                await w.restart("candidate")
        if note is not None:
            run.flag(
                f"note: drawing the inputs ahead failed ({note}); the candidate's worker draws them itself"
            )
            return
        self._drawn_ahead.add(key)

    def _note_fills(self, run: Run, task: Task, made: Counter[str]) -> None:
        """Say, on every evaluation of a task whose draws had CPU-generator fills made on the GPU (gpu/tasks/
        gpu_fills.py), that its inputs are so made: a later one may find them all kept and draw nothing."""
        seen = self._filled.setdefault(self._fingerprint(task), Counter())
        seen.update(made)
        if seen:
            ops = ", ".join(sorted(seen))
            run.flag(
                f"note: inputs: the generator's fills of CPU tensors from torch's global CPU generator ({ops}) are "
                "drawn on the GPU, seeded by the trial's seed; GPU MODE's evaluator draws them from its unseeded "
                "CPU generator: the same distribution, values no function of the seed there either"
            )

    # ------------------------------------------------------------------ load & check
    async def _load(self, w: WorkerProcess, run: Run, task: Task) -> bool:
        timeout = self.build_timeout_s if run.candidate.language == "cpp_ext" else self.call_timeout_s
        args = {
            "task": task_json(task),
            "candidate": {
                "id": run.candidate.id,
                "language": run.candidate.language,
                "source": run.candidate.source,
            },
        }
        fresh = self.fresh_per_candidate or w.stray_threads
        if fresh and w.ran_candidate and w.candidate_id != run.candidate.id:
            # the next spare at once where this task's checks outlast a start (so a timing will not wait for
            # it, and a back-to-back next candidate finds it ready), else behind this call's reply
            checks = self._checks_s.get(self._fingerprint(task), 0.0)
            early = w.start_s is not None and checks >= SPARE_HIDDEN * w.start_s
            with run.step("fresh_worker"):
                await w.restart("candidate", next_spare=early)
        w.ran_candidate = True
        w.candidate_id = run.candidate.id
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
        run: Run,
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
            msg = f"{e.message} while {what}." + _timeout_cause(e) + detail
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
        self, w: WorkerProcess, run: Run, what: str, workload: str | None, timeout_s: float, e: WorkerError
    ) -> str | None:
        """The message for a timeout that the Triton CPU interpreter's slowness explains, else None.

        The killed worker's record (ksearch.gpu.worker.interp_watch) says whether its time went into interpreted kernels;
        a candidate whose own host code loops forever still gets "timeout"."""
        if e.kind != "timeout" or not self.cpu_mode or run.candidate.language != "triton":
            return None
        st = interp_watch.read(w.scratch)
        if st is None or not st.interpreter_bound:
            return None
        size = ""
        if workload is not None and run.task is not None:
            try:
                size = f" ({params_text(run.task.workload(workload).params)})"
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

    async def _correctness(
        self, w: WorkerProcess, run: Run, task: Task, wl: str, audit_later: bool = False
    ) -> None:
        """Check `wl`; `audit_later`: the kernel audit is asked for after timing (`_audit`), not with the check."""
        first = not run.correctness
        timeout = self.call_timeout_s * max(1.0, run.settings.trials / 3)
        if first and run.candidate.language == "cpp_ext":
            timeout += self.build_timeout_s
        args = {
            "workload": wl,
            "seed": run.settings.seed,
            "trials": run.settings.trials,
            "audit": self.kernel_audit and not audit_later,
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

    async def _audit(self, w: WorkerProcess, run: Run, wl: str) -> None:
        """The kernel audit after timing: its profiler session would have slowed the timed calls' issue."""
        args = {"workload": wl, "seed": run.settings.seed}
        what = f"auditing the candidate's kernels on workload {wl!r}"
        reply = await self._call(w, run, "audit", args, self.call_timeout_s, what, about=wl)
        if reply is None:
            return
        res = reply["result"]
        if res.get("fault"):
            run.fail("error", f"the candidate failed while {what}: {res['fault'].get('message', '')}")
        run.flag(*res.get("flags", []))
        if res.get("pure_pytorch"):
            run.pure_pytorch = True

    async def _collect_kernels(self, w: WorkerProcess, run: Run) -> None:
        try:
            reply = await w.call("kernels", {}, timeout_s=60.0)
        except WorkerError:
            return
        if reply.get("ok"):
            run.runtime_kernels = reply["result"].get("kernels", [])

    # ------------------------------------------------------------------ baselines & timing
    def _baseline_key(self, task: Task, wl: str, kind: str, env: Environment, st: EvalSettings) -> str:
        # the eager baseline has no mode: every compile mode shares it
        how = f"compile[{st.compile_mode}]" if kind == "compile" else kind
        protocol = "" if st.timing_protocol == "ksearch" else f":protocol={st.timing_protocol}"
        return (
            f"baseline:{BASELINE_VERSION}:{how}:{task.name}:{self._fingerprint(task)}:{wl}:{env.key()}:"
            f"flush={st.flush_l2}:sets={st.input_sets}:budget={st.time_budget_s}{protocol}"
        )

    async def _read_baseline(
        self, w: WorkerProcess, run: Run, wl: str, kind: str, env: Environment
    ) -> dict[str, Any] | None:
        """One reading of a baseline, stamped with when and on which GPU (None: the worker failed)."""
        st = run.settings
        base_settings = st.model_copy(update={"final": False})
        timeout = self.build_timeout_s if kind == "compile" else self.call_timeout_s + timing_s(base_settings)
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
            return value
        return {
            **reply["result"],
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "gpu_uuid": (w.hello or {}).get("gpu_uuid"),
            "env_key": env.key(),
        }

    async def _measure_baseline(
        self, w: WorkerProcess, run: Run, wl: str, kind: str, key: str, env: Environment
    ) -> dict[str, Any] | None:
        """Measure a baseline; a bimodal or wide reading (stats.unsteady) is measured up to REMEASURES more times
        and the tightest reading kept, saying so: every later speedup of a search divides by what is kept."""
        stat = PROTOCOL_STATISTIC[run.settings.timing_protocol]
        readings: list[dict[str, Any]] = []
        first_why = ""
        value: dict[str, Any] | None = None
        for _ in range(1 + REMEASURES):
            value = await self._read_baseline(w, run, wl, kind, env)
            if value is None or "median_us" not in value:
                break
            readings.append(value)
            # the interpreter's CPU times rank nothing: never worth a second reading
            why = None if value.get("device") == CPU_INTERPRETER else _unsteady_of(value, stat)
            if why is None:
                break
            first_why = first_why or why
        if len(readings) > 1 or (readings and value is not readings[-1]):
            # steady readings first, then the narrowest CI
            i = min(
                range(len(readings)),
                key=lambda j: (_unsteady_of(readings[j], stat) is not None, _rel_ci(readings[j], stat)),
            )
            kept = readings[i]
            label = "torch.compile" if kind == "compile" else "eager"
            said = (
                f"first reading {first_why}; read {len(readings)} times "
                f"({', '.join(f'{stat_of(r, stat)[0]:.1f}' for r in readings)} us), kept reading {i + 1} "
                f"(95% CI ±{100 * _rel_ci(kept, stat):.1f}%)"
            )
            if _unsteady_of(kept, stat) is not None:
                said += ", still noisy: its speedups are less certain than their CI says"
            value = {**kept, "remeasured": said}
            run.flag(f"note: {label} baseline for {wl} re-measured: {said}")
        if value is None:
            return None
        await self.cache.put(key, value)
        return value if "median_us" in value else None

    async def _send_task(self, w: WorkerProcess, task: Task, who: str) -> None:
        """Set the worker up for `task` (a process that draws no candidate's inputs first: baselines)."""
        reply = await w.call("task", {"task": task_json(task)}, self.call_timeout_s)
        if not reply.get("ok"):
            raise SandboxError(f"{who} could not set up the task: {reply.get('error')}")

    async def _baselines(
        self,
        w: WorkerProcess,
        run: Run,
        task: Task,
        names: list[str],
        env: Environment,
        *,
        fresh: bool = False,
    ) -> dict[tuple[str, str], dict[str, Any] | None]:
        """(workload, kind) -> the baseline's timing (None if it could not be measured). `fresh`: measured anew
        whatever the cache holds (a search's re-measurement); the cache then keeps the new readings."""
        kinds = ["eager", "compile"] if self.compile_baseline else ["eager"]
        out: dict[tuple[str, str], dict[str, Any] | None] = {}
        missing: list[tuple[str, str, str]] = []
        for wl in names:
            for kind in kinds:
                key = self._baseline_key(task, wl, kind, env, run.settings)
                hit = None if fresh else await self.cache.get(key)
                if hit is None:
                    missing.append((wl, kind, key))
                else:
                    out[(wl, kind)] = hit if "median_us" in hit else None
        if not missing:
            return out
        if self.clean_baselines:
            await w.restart("baseline")
            await self._send_task(w, task, "the baseline worker")
        try:
            await w.settle()  # no spare starting under the baselines' timing either
            for wl, kind, key in missing:
                out[(wl, kind)] = await self._measure_baseline(w, run, wl, kind, key, env)
        finally:
            if self.clean_baselines:
                await w.restart("candidate")
        return out

    async def _timing(
        self,
        w: WorkerProcess,
        run: Run,
        task: Task,
        names: list[str],
        env: Environment,
        say: Callable[[str, float], Awaitable[None]],
        ceil: dict[str, Any],
        audit_on: str | None = None,
        audit_unless_slower_than: dict[str, float] | None = None,
    ) -> None:
        """Time the candidate on every workload (`ceil`: the GPU's ceilings, {} without one), then (`audit_on`: a
        workload) audit its kernels while its process still holds it, then give each timing its baselines (which
        may take the process over: a clean baseline process, then a fresh candidate one)."""
        st = run.settings
        measured: list[tuple[str, dict[str, Any]]] = []
        settled = await w.settle()  # a spare started at this call's takeover is not starting under the timing
        if settled >= 0.05:
            run.steps["wait_for_spare"] = settled
        t_timing = time.perf_counter()
        for i, wl in enumerate(names):
            await say(f"timing: {wl}", 0.5 + 0.4 * i / len(names))
            timeout = self.call_timeout_s + timing_s(st)
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
        run.steps["timing"] = run.steps.get("timing", 0.0) + time.perf_counter() - t_timing
        if audit_on is not None and _slower_everywhere(measured, audit_unless_slower_than, st):
            run.audited = False
            run.flag(
                "note: the kernel audit was left out: slower beyond noise than its node's best on every workload, "
                "this attempt can become no best (the final evaluation audits every row)"
            )
        elif audit_on is not None:
            await say(f"kernel audit: {audit_on}", 0.9)
            with run.step("audit"):
                await self._audit(w, run, audit_on)
            run.audited = True
            if not w.alive:
                return
        await say(f"baselines: {', '.join(names)}", 0.92)
        with run.step("baselines"):
            base = await self._baselines(w, run, task, names, env)
        protocol = st.timing_protocol
        stat = PROTOCOL_STATISTIC[protocol]
        for wl, res in measured:
            eager, comp = base.get((wl, "eager")), base.get((wl, "compile"))
            check = (comp or {}).get("output_check") or {}
            if check and not check.get("passed"):
                run.flag(
                    f"note: torch.compile's own output fails the correctness rule a candidate must meet on {wl} "
                    f"({check.get('kind')}: {check.get('message', '')[:200]}): the speedup vs torch.compile is "
                    "against a baseline that would not pass"
                )
            val, lo, hi = stat_of(res, stat)
            e_us = stat_of(eager, stat)[0] if eager else None
            c_us = stat_of(comp, stat)[0] if comp else None
            # the interpreter's time against a CPU run of the reference is no speedup: none is stated
            ratio = res["device"] != CPU_INTERPRETER and val > 0
            t = WorkloadTiming(
                workload=wl,
                device=res["device"],
                median_us=res["median_us"],
                mean_us=res.get("mean_us"),
                protocol=protocol,
                statistic=stat,
                iqr_us=res["iqr_us"],
                ci_low_us=lo,
                ci_high_us=hi,
                n=res["n"],
                host_median_us=res.get("host_median_us"),
                eager_us=e_us,
                compile_us=c_us,
                compile_mode=comp.get("compile_mode") if comp else None,
                eager_baseline=baseline_reading(eager, "eager", st),
                compile_baseline=baseline_reading(comp, "compile", st),
                gpu_uuid=(w.hello or {}).get("gpu_uuid"),
                speedup_vs_eager=e_us / val if e_us and ratio else None,
                speedup_vs_compile=c_us / val if c_us and ratio else None,
                roofline_fraction=res.get("roofline_fraction"),
                flags=list(res.get("flags", [])),
            )
            run.timings.append(t)
            run.flag(*res.get("flags", []))
