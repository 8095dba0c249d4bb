"""Pieces several tools share: resolving a candidate, choosing workloads, summarising an evaluation."""

from __future__ import annotations

import ast
import secrets
from collections.abc import Awaitable, Callable

from pydantic import Field, model_validator

from ksearch.gpu.sandbox.api import Sandbox
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.tools.errors import UNPARSED, ToolFailure
from ksearch.tools.loop.call_clock import CallClock, part, took_text
from ksearch.tools.loop.protocols import protocol_line
from ksearch.tools.prompting.facts_wait import facts_for
from ksearch.tools.schema import ToolIn
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import handles
from ksearch.worldmodel.baselines import baselines_line
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import (
    Candidate,
    CompileMode,
    CompileReport,
    EvalSettings,
    Evaluation,
    Language,
    Node,
    Search,
    TimingProtocol,
    WorkloadTiming,
    compile_baseline_how,
)
from ksearch.worldmodel.render import kernel_resources

Progress = Callable[[str, float], Awaitable[None]]

MAX_SOURCE_CHARS = 200_000


class CandidateRef(ToolIn):
    """A candidate given by its source (first submission) or by the id returned then."""

    source: str | None = Field(
        None,
        max_length=MAX_SOURCE_CHARS,
        description="Python module source defining the task's entry point: ModelNew (KernelBench and "
        "native tasks), custom_kernel(data) (GPU MODE), run(...) (FlashInfer-Bench); the prompts and the task "
        "resource ksearch://tasks/{name} (its `candidate_entry`) say which. Exactly one of `source`, `candidate_id`, "
        "`seed` or "
        "`solution_json`",
    )
    candidate_id: str | None = Field(
        None,
        pattern=r"^c[0-9a-f]{15}$",
        description="Id from an earlier submission, instead of the source",
    )
    seed: bool = Field(
        False,
        description="True: the task's own seed candidate in `language` (instead of source/candidate_id)",
    )
    solution_json: str | None = Field(
        None,
        max_length=MAX_SOURCE_CHARS,
        description="A FlashInfer-Bench Solution JSON (its text) for a FlashInfer-Bench task: its Triton/Python, "
        "CUDA or C++ sources and entry point, run as a candidate (its language comes from the solution's spec)",
    )
    language: Language = Field(
        "triton", description="triton | cuda (NVRTC via ksearch.gpu.nvrtc) | cpp_ext (load_inline)"
    )

    @model_validator(mode="after")
    def _one_of(self) -> CandidateRef:
        given = (self.source is not None) + (self.candidate_id is not None) + self.seed
        if given + (self.solution_json is not None) != 1:
            raise ValueError("give exactly one of `source`, `candidate_id`, `seed: true` or `solution_json`")
        return self


class CandidateJob(ToolIn):
    """A candidate to work on, for a search or for a free-standing task (exactly one of the two)."""

    search: int | str | None = Field(None, description="Search id or name. Exactly one of `search` or `task`")
    task: str | None = Field(
        None,
        max_length=1000,
        description="Task name or path, for work outside any search. Exactly one of `search` or `task`",
    )
    candidate: CandidateRef = Field(
        description="The candidate: exactly one of its `source`, a `candidate_id` from an earlier submission, "
        "`seed: true` (the task's seed) or `solution_json`, with its `language`"
    )


class MeasuredJob(CandidateJob):
    """A candidate run on workloads with fresh random inputs."""

    workloads: list[str] | None = Field(
        None, max_length=64, description="Workload names; default: the search set"
    )
    trials: int = Field(3, ge=1, le=20, description="Fresh random inputs per workload")


async def resolve_candidate(ws: Workspace, ref: CandidateRef, task: Task | None = None) -> Candidate:
    if ref.seed:
        seed = task.seeds.get(ref.language) if task is not None else None
        if seed is None:
            have = ", ".join(sorted(task.seeds)) if task is not None else ""
            raise ToolFailure(
                f"task {task.name if task else '?'!r} has no {ref.language} seed"
                + (f"; it has: {have}" if have else ": it starts from the reference (write a kernel instead)")
            )
        return await ws.store.put_candidate(seed, ref.language)
    if ref.candidate_id is not None:
        try:
            return await ws.store.get_candidate(ref.candidate_id)
        except NotFound as e:
            # the store's own words name its Python method, which no face offers: say what a caller can send
            raise ToolFailure(
                f"no candidate {ref.candidate_id!r} in this database: send the kernel's `source` instead "
                "(compile_kernel, run_correctness and benchmark answer a source with its candidate_id, to reuse)"
            ) from e
    if ref.solution_json is not None:
        return await ws.store.put_candidate(*solution_candidate(ref.solution_json, task))
    assert ref.source is not None
    check_python_syntax(ref.source, task)
    return await ws.store.put_candidate(ref.source, ref.language)


def solution_candidate(text: str, task: Task | None) -> tuple[str, Language]:
    """A FlashInfer-Bench Solution JSON as the candidate source and language the sandbox runs."""
    from ksearch.gpu.tasks.flashinfer.solution import candidate_from_solution_text

    if task is None:
        raise ToolFailure("`solution_json` needs a task: a FlashInfer-Bench Solution is for one definition")
    c = candidate_from_solution_text(text, task, "solution_json")  # a SolutionError names the bad field
    return c.source, c.language


def check_python_syntax(source: str, task: Task | None = None) -> None:
    """Refuse a source that does not parse, before anything is stored or run."""
    try:
        ast.parse(source)
    except SyntaxError as e:
        want = (
            f"Send {contract.entry_line(task)}"
            if task is not None
            else "Send a complete Python module that defines the task's entry point (ModelNew, "
            "custom_kernel or run)"
        )
        raise ToolFailure(f"{UNPARSED}: line {e.lineno}, column {e.offset}: {e.msg}. {want}.") from e


async def gpu_lacking(ws: Workspace, task: Task) -> str | None:
    """Why `task` needs a GPU (its reference or inputs pinned to CUDA) when this machine has none, else None."""
    needs = task.extras.get("needs_gpu")
    # not hardware(): it may wait a minute for the worker the background baselines hold (a prompt reads this)
    if needs and await runs_without_gpu(ws):
        return str(needs)
    return None


async def sandbox_of(ws: Workspace) -> Sandbox:
    """The workspace's sandbox; its start (the machine's GPUs and isolation probed) a named part of the call."""
    with part("sandbox_start", "starting the sandbox"):
        return await ws.sandbox()


async def runs_without_gpu(ws: Workspace) -> bool:
    """Whether candidates run in the CPU interpreter here, the sandbox's start and its answer named parts of the
    call (a cluster's sandbox may wait for its actors)."""
    sb = await sandbox_of(ws)
    with part("gpu_check", "asking the sandbox whether it has a GPU"):
        return await sb.runs_without_gpu()


async def refuse_without_gpu(ws: Workspace, task: Task) -> None:
    """A task that needs a GPU, on a machine without one: refused before anything is evaluated or recorded. No
    candidate could pass there, and a failed attempt would blame the code for the machine."""
    if needs := await gpu_lacking(ws, task):
        raise ToolFailure(
            f"this task needs a GPU ({needs}) and this machine has none: no candidate can be checked or timed "
            "here, and nothing was recorded. Run ksearch on a machine with a GPU."
        )


async def refuse_oversized(ws: Workspace, task: Task, workloads: list[str]) -> None:
    """On a machine without a GPU, a workload whose inputs and outputs alone (the candidate's and the reference's)
    exceed the host memory a worker may use is refused before it runs: it would end as a crash of the worker,
    read as the kernel's fault (a host asked for KernelBench's 6.4 GB softmax shape on the CPU)."""
    sb = await sandbox_of(ws)
    limit = getattr(sb, "memory_bytes", None)
    big = [w for w in workloads if task.workload(w).split != "smoke"]
    if not limit or not big or not await runs_without_gpu(ws):
        return
    with part("task_facts", "waiting for the task's facts"):
        facts = await facts_for(task)
    for name in big:
        wf = facts.workload(name) if facts is not None else None
        if wf is None or not wf.inputs:
            continue
        need = sum(t.bytes for t in wf.inputs) + 2 * sum(t.bytes for t in wf.outputs)
        if need > limit:
            raise ToolFailure(
                f"workload {name!r} needs at least {need / 2**30:.1f} GiB of host memory (its inputs and two outputs: "
                f"the candidate's and the reference's), and a worker on this machine, which has no GPU, may use "
                f"{limit / 2**30:.1f} GiB: nothing was run or recorded. Check it on the smoke workload here, or on a "
                "GPU machine"
            )


async def task_for(ws: Workspace, search: int | str | None, task: str | None) -> tuple[Search | None, Task]:
    """The task of a search, or a free-standing task reference; exactly one must be given."""
    if (search is None) == (task is None):
        raise ToolFailure(
            "give exactly one of `search` (an id or name) or `task` (a built-in name or a path)"
        )
    with part("loading_task", "loading the task"):
        if search is not None:
            s = await ws.search(search)
            return s, ws.search_task(s)
        assert task is not None
        return None, ws.task(task)


async def node_ids_of(ws: Workspace, s: Search, refs: list[int | str]) -> list[int]:
    """The ids `refs` name in the search: ids as given (their search is checked where the node is read), handles
    looked up; a handle the search lacks is refused, naming those it has."""
    ids = [handles.as_id(ref) for ref in refs]
    if all(i is not None for i in ids):  # ids alone (every call but a batched host's): nothing to read
        return [i for i in ids if i is not None]
    out: list[int] = []
    async with ws.store.reading() as db:
        for ref in refs:
            nid = await handles.resolve(db, s.id, ref)
            if nid is None:
                why = await handles.unknown_handle(db, s.id, str(ref))
                raise ToolFailure(
                    f"{why}; accepted: a node id from the tree, or a handle given in propose_intents"
                )
            out.append(nid)
    return out


async def node_id_of(ws: Workspace, s: Search, ref: int | str) -> int:
    """The id `ref` (an id, "#12", or a handle of this search) names; see `node_ids_of`."""
    return (await node_ids_of(ws, s, [ref]))[0]


async def node_in(ws: Workspace, s: Search, ref: int | str) -> Node:
    """The node, checked to belong to the search (node ids are global: a typo can hit another search)."""
    node_id = await node_id_of(ws, s, ref)
    node = await ws.store.get_node(node_id)
    if node.search_id != s.id:
        raise ToolFailure(f"node {node_id} belongs to another search (id {node.search_id}), not {s.name!r}")
    return node


def check_workloads(t: Task, workloads: list[str] | None) -> None:
    """Refuse unknown workload names (before anything is stored or run)."""
    names = [w.name for w in t.workloads]
    unknown = [w for w in workloads or [] if w not in names]
    if unknown:
        shown = ", ".join(repr(w[:80]) for w in unknown[:5])
        raise ToolFailure(
            f"workloads: unknown workload(s) {shown} for task {t.name!r}; it has: {', '.join(names)}"
        )


async def eval_settings(
    ws: Workspace, s: Search | None, t: Task, workloads: list[str] | None, trials: int
) -> EvalSettings:
    """Settings for one evaluation: the search's secret seed and compile mode (a fresh seed for a free-standing
    task), and the workloads to run (see eval_settings_on)."""
    return await eval_settings_on(
        await sandbox_of(ws),
        t,
        workloads,
        trials,
        seed=s.config.seed if s is not None else None,
        compile_mode=s.config.compile_mode if s is not None else "default",
        timing_protocol=s.config.timing_protocol if s is not None else "ksearch",
    )


async def eval_settings_on(
    sandbox: Sandbox,
    t: Task,
    workloads: list[str] | None,
    trials: int,
    *,
    seed: int | None = None,
    compile_mode: CompileMode = "default",
    timing_protocol: TimingProtocol = "ksearch",
) -> EvalSettings:
    """Settings for one evaluation on `sandbox`, in a search or outside any (no store needed).

    Without a GPU the sandbox runs the Triton interpreter, so only the task's smoke workload is
    practical there; on a GPU the search workloads are the default (held-out ones only when named).
    `seed` None: a fresh random one.
    """
    if workloads:
        check_workloads(t, workloads)
        chosen = list(workloads)
    else:
        # not hardware(): it waits for the GPU's measured ceilings, whose worker the background baselines may hold
        # (a TriMul search's first benchmark waited 57 s here, outside every step its evaluation records)
        with part("gpu_check", "asking the sandbox whether it has a GPU"):
            cpu = await sandbox.runs_without_gpu()
        chosen = [t.smoke().name] if cpu else [w.name for w in t.by_split("search")]
    return EvalSettings(
        seed=seed if seed is not None else secrets.randbits(31),
        trials=trials,
        workloads=chosen,
        compile_mode=compile_mode,
        timing_protocol=timing_protocol,
    )


def timing_text(tm: WorkloadTiming) -> str:
    """The protocol's statistic with its noise: "median 12.3 us (IQR .., 95% CI .., n=..)", or for a protocol
    that reports a mean, "mean 12.6 us (95% CI .., median 12.3 us, n=..)"."""
    ci = f"95% CI {tm.ci_low_us:.1f}-{tm.ci_high_us:.1f}"
    if tm.statistic == "mean" and tm.mean_us is not None:
        return f"mean {tm.mean_us:.1f} us ({ci}, median {tm.median_us:.1f}, n={tm.n})"
    return f"median {tm.median_us:.1f} us (IQR {tm.iqr_us:.1f}, {ci}, n={tm.n})"


# seconds spent inside the other steps (not added to them): drawing inputs, running the reference for the checks,
# building torch extensions at run time
INSIDE_STEPS = {
    "inputs": "drawing inputs",
    "reference": "running the reference",
    "build": "building torch extensions",
}


SECONDS_NAMED = (
    4  # at most this many steps named in the line, each at least SECONDS_SHARE of the whole; the rest
)
SECONDS_SHARE = 0.1  # summed as "other" where they add up to that share (the record has every step)
BRIEF_S = 1.0  # an evaluation quicker than this, with no builds or draws inside, says only how long it took


def seconds_text(ev: Evaluation, call: CallClock | None = None) -> str:
    """ "took 14.2 s: correctness 6.1, timing 5.2, baselines 2.0 (drawing inputs 0.4 of them)", largest first.
    With `call`, the clock of the tool call that ran the evaluation: the whole call's seconds, its waits outside
    the evaluation (for a worker, the task's facts, the sandbox's start...) named beside the evaluation's steps."""
    inside = [
        f"{what} {ev.seconds_by_step[k]:.1f}"
        for k, what in INSIDE_STEPS.items()
        if ev.seconds_by_step.get(k, 0.0) >= 0.05
    ]
    of_them = f"{', '.join(inside)} of them" if inside else ""
    if call is not None:
        outer = {k: v for k, v in ev.seconds_by_step.items() if k not in INSIDE_STEPS}
        return took_text(call, outer, of_them)
    inside_any = bool(inside)
    # where a quick evaluation's seconds went is not worth reading
    if ev.seconds < BRIEF_S and not inside_any:
        return f"took {ev.seconds:.1f} s"
    least = max(0.05, SECONDS_SHARE * ev.seconds)
    steps = sorted(
        ((k, v) for k, v in ev.seconds_by_step.items() if k not in INSIDE_STEPS), key=lambda kv: -kv[1]
    )
    shown = [(k, v) for k, v in steps if v >= least][:SECONDS_NAMED]
    named = [f"{k.replace('_', ' ')} {v:.1f}" for k, v in shown]
    rest = sum(v for _, v in steps) - sum(v for _, v in shown)
    if rest >= least:
        named.append(f"other {rest:.1f}")
    parts = ", ".join(named)
    return f"took {ev.seconds:.1f} s" + (f": {parts}" + (f" ({of_them})" if of_them else "") if parts else "")


def baseline_settings(task: Task, s: Search) -> EvalSettings:
    """The settings a search's baselines are measured with (its search workloads, compile mode, protocol)."""
    return EvalSettings(
        seed=s.config.seed,
        workloads=[w.name for w in task.by_split("search")],
        compile_mode=s.config.compile_mode,
        timing_protocol=s.config.timing_protocol,
    )


def failed_label(status: str) -> str:
    """The label of a workload the candidate failed on, matching the evaluation's status: INCORRECT only for
    wrong values; a compile error, crash or timeout says so ("INCORRECT on smoke" under `status: compile_error`
    read as two verdicts)."""
    return "INCORRECT" if status in ("incorrect", "ok") else status.upper().replace("_", " ")


COMPILER_WARNINGS = 3  # ptxas's warnings shown in an evaluation's lines; the rest are counted


def compile_fact_lines(report: CompileReport) -> list[str]:
    """What the compiler said of the kernels that a kernel writer acts on: ptxas's warnings (a coded performance
    warning such as C7515 "wgmma ... serialized"), each once, and the bytes spilled per thread, saying what that
    figure counts (ptxas's static count, not the run-time spill traffic a profiler counts)."""
    lines = []
    warned = list(
        dict.fromkeys(
            d.message + (f" [{d.kernel}]" if d.kernel and f"'{d.kernel}'" not in d.message else "")
            for d in report.diagnostics
            if d.severity == "warning" and d.message.startswith("ptxas")
        )
    )
    lines += [f"compiler warning: {_clip_line(w, 240)}" for w in warned[:COMPILER_WARNINGS]]
    if len(warned) > COMPILER_WARNINGS:
        lines.append(f"  +{len(warned) - COMPILER_WARNINGS} more compiler warning(s) in the compile report")
    spilling = {k.name: k for k in report.kernels if k.spill_stores_bytes or k.spill_loads_bytes}
    if spilling:
        said = ", ".join(f"{n} {k.spill_stores_bytes or 0} B/thread" for n, k in list(spilling.items())[:3])
        # short: a benchmark's text stays under 800 bytes; the compile report's note says it whole (SPILL_MEANING:
        # ptxas's static spill stores per thread, not the run-time spill traffic a profiler counts)
        lines.append(f"spills: {said} (ptxas)")
    # a build whose spills nobody counted (Triton's after a launch on a GPU): its local memory per thread
    local = {
        k.name: k.stack_bytes
        for k in report.kernels
        if k.stack_bytes and k.spill_stores_bytes is None and k.name not in spilling
    }
    if local:
        said = ", ".join(f"{n} {b} B per thread" for n, b in list(local.items())[:3])
        lines.append(
            f"local memory: {said} (spilled registers or local arrays; static; run-time traffic is profile_ncu's)"
        )
    return lines


def _clip_line(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def summarize(ev: Evaluation, call: CallClock | None = None) -> str:
    """A few lines a model (or a person) can act on; numbers say what they are and how noisy. `call`: the clock of
    the tool call it answers, whose whole seconds the took line then accounts for (`seconds_text`)."""
    lines = [f"status: {ev.status}"]
    if ev.pure_pytorch:
        lines.append(
            "kernel: PURE PYTORCH: no kernel of the candidate's own (Triton, NVRTC or extension) ran during "
            "the check; it computes with PyTorch ops. Its numbers are kept for reference, but it is never a "
            "node's or the search's best: write the kernel itself"
        )
    if ev.error:
        lines.append(f"error: {ev.error}")
    if ev.compile is not None:
        c = ev.compile
        lines.append(f"compile: {c.verdict()} in {c.seconds:.2f}s ({c.mode or c.language})")
        # errors and warnings (ptxas's among them) before notes, so that the cut never hides them
        rank = {"error": 0, "warning": 1}
        for d in sorted(c.diagnostics, key=lambda d: rank.get(d.severity, 2))[:10]:
            where = f"line {d.line}: " if d.line else ""
            lines.append(f"  {d.severity}: {where}{d.message}")
        for k in c.kernels:
            lines.append(f"  kernel {k.name}: {kernel_resources(k)}")
    for r in ev.correctness:
        if r.passed:
            lines.append(
                f"correct on {r.workload} ({r.trials} trials"
                f"{errors_text(r.max_abs_err, r.max_rel_err, r.tolerance_used)})"
            )
        else:
            lines.append(f"{failed_label(ev.status)} on {r.workload}: {r.kind}: {r.message}")
            if r.first_mismatch_index is not None:
                lines.append(
                    f"  first mismatch at {r.first_mismatch_index}: expected {r.expected_at_first}, "
                    f"got {r.got_at_first}; {r.mismatches}/{r.numel} elements off; max abs err {r.max_abs_err}"
                )
    protocols = sorted({tm.protocol for tm in ev.timings if tm.device != "cpu-interpreter"})
    lines.extend(f"timed: {protocol_line(p)}" for p in protocols)
    for tm in ev.timings:
        parts = [f"{tm.workload} on {tm.device}: {timing_text(tm)}"]
        if tm.device == "cpu-interpreter":  # an interpreted call's time is no speed: no ratio is stated
            base = [f"eager {tm.eager_us:.1f} us"] if tm.eager_us is not None else []
            if tm.compile_us is not None:
                how = compile_baseline_how(tm.compile_mode)
                base.append(f"torch.compile ({how + '; ' if how else ''}{tm.compile_us:.1f} us)")
            said = f"; baselines on the CPU: {', '.join(base)}" if base else ""
            lines.append(parts[0] + "; speed not measured (CPU interpreter)" + said)
            lines.extend(f"  flag: {f}" for f in tm.flags)
            continue
        if tm.speedup_vs_eager is not None:
            parts.append(f"{tm.speedup_vs_eager:.3f}x vs eager ({tm.eager_us:.1f} us)")
        if tm.speedup_vs_compile is not None:
            how = compile_baseline_how(tm.compile_mode)
            us = f"{how}; {tm.compile_us:.1f} us" if how else f"{tm.compile_us:.1f} us"
            parts.append(f"{tm.speedup_vs_compile:.3f}x vs torch.compile ({us})")
        if tm.roofline_fraction is not None:
            parts.append(f"{100 * tm.roofline_fraction:.0f}% of roofline (at this GPU's measured ceilings)")
        lines.append("; ".join(parts))
        lines.extend(f"  flag: {f}" for f in tm.flags)
    if ev.speedup_vs_eager is not None and not any(tm.device == "cpu-interpreter" for tm in ev.timings):
        lines.append(f"geomean speedup vs eager: {ev.speedup_vs_eager:.3f}x")
    if (measured := baselines_line(ev)) is not None:  # when and on which GPU the baselines were measured
        lines.append(measured)
    interpreted = bool(ev.timings) and ev.timings[0].device == "cpu-interpreter"
    if interpreted and not any(
        "CPU interpreter" in f for f in ev.flags
    ):  # said once: the record's flag, if any
        lines.append("note: CPU interpreter timings: functional only, not comparable with GPU timings")
    if ev.profile is not None:
        p = ev.profile
        lines.append(
            f"profile ({p.kernel}): {p.duration_us} us (median of {p.launches} profiled calls), DRAM {p.dram_throughput_pct}%, SM {p.sm_throughput_pct}%, "
            f"occupancy {p.achieved_occupancy_pct}%, regs {p.registers_per_thread}"
        )
        lines.extend(f"  stall {n}: {v}" for n, v in p.top_stalls[:4])
        lines.extend(f"  ncu: {a}" for a in p.advice[:4])
    lines.extend(f"flag: {f}" for f in ev.flags)
    lines.append(seconds_text(ev, call))
    return "\n".join(lines)


def why_failed(ev: Evaluation) -> str:
    """What made a candidate fail (its first failing workload, or its status and error), in a few words."""
    bad = next((c for c in ev.correctness if not c.passed), None)
    if bad is not None:
        return f"{bad.workload}: {bad.kind}" + (f", {bad.message[:160]}" if bad.message else "")
    if ev.status == "ok" and ev.pure_pytorch:
        return "no kernel of its own ran"
    return f"{ev.status}: {(ev.error or ', '.join(ev.flags))[:200]}"


LOOSE_REL = 0.01  # a passing output this far off in relative terms passed by the absolute tolerance


def errors_text(
    max_abs_err: float | None, max_rel_err: float | None, tolerance_used: float | None = None
) -> str:
    """A passing check's errors and its margin (how much of its tolerance the worst element used: what a model can
    act on); a large relative error said plainly: the outputs are then of the order of the absolute tolerance, and a
    kernel that is visibly wrong in relative terms still passes the rule."""
    out = f", max abs err {max_abs_err:.3g}" if max_abs_err is not None else ""
    if tolerance_used is not None:  # the worst element's |got - ref| / (atol + rtol * |ref|)
        out += f", {100 * tolerance_used:.2g}% of tolerance used"
    if max_rel_err is None:
        return out
    if max_rel_err <= LOOSE_REL:  # small: the margin says what it would (where there is one)
        return out if tolerance_used is not None else out + f", max rel err {max_rel_err:.2g}"
    return (
        out
        + f", max rel err {100 * max_rel_err:.3g}% on elements above the absolute tolerance: the rule accepts it "
        "by its absolute tolerance alone, which is of the order of these outputs"
    )
