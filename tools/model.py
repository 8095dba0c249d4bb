"""profile_model and plug_back: a whole model's hot operators as task files, and the winning kernels back in the model.

`profile_model` profiles a model (a KernelBench-style file, or `pkg.module:Class`), ranks its operators (and the
fusible pairs: a matmul with its activation, a residual add with its norm) by their share of the forward's time, and
writes the hottest ones as KernelBench-format task files with a manifest; it derives each written task's facts
(bound, bytes, FLOPs: gpu/tasks/facts.py) for the roofline, and says the `ksearch suite run` command that searches
them as a suite. `plug_back` puts each task's winning kernel in place of the operator it came from (from a suite's
searches, or a folder of ModelNew files), checks the plugged model against the original and times both.

The work runs in `python -m ksearch.gpu.model`, a process of its own: it imports torch and runs the model's code (and
the kernels), as `check_task` runs a task's reference, outside the jail: the model is the user's, the kernels what
their searches accepted or what they gave. This process (the CLI, the MCP server) never imports torch.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field

from ksearch.about import IMPORT_ROOT
from ksearch.gpu.build.procs import kill_group
from ksearch.gpu.model.report import (
    ItemReport,
    PlugReport,
    ProfileReport,
    Request,
    Timing,
    is_file_ref,
    split_ref,
)
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.facts import TaskFacts, task_facts
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound

__all__ = [
    "ModelProfileOut",
    "OpRow",
    "PlugBackIn",
    "PlugBackOut",
    "ProfileModelIn",
    "default_out",
    "plug_back",
    "profile_model",
]

PROFILE_TIMEOUT_S = 1200.0
PLUG_TIMEOUT_S = 1800.0
_MODEL = (
    "The model: a .py file defining class Model(torch.nn.Module), get_inputs() and get_init_inputs() (KernelBench "
    "style), FILE.py:Class for another class of the file, or pkg.module:Class"
)
_OUT = "The folder of the model's task files and model.json (default: MODEL-ops beside the model file, or ./CLASS-ops)"
Device = Literal["auto", "cpu", "cuda"]


class ProfileModelIn(ToolIn):
    model: str = Field(description=_MODEL, min_length=1, max_length=1000)
    out: str | None = Field(None, description=_OUT, max_length=1000)
    top: int = Field(
        5, ge=1, le=50, description="Task files to write: the hottest N operators that can be written"
    )
    iters: int | None = Field(
        None, ge=1, le=1000, description="Profiled forwards (default 10 on a GPU, 3 on a CPU)"
    )
    device: Device = Field(
        "auto", description="Where the model runs: auto (the GPU where there is one), cpu, cuda"
    )
    dtype: Literal["fp32", "fp16", "bf16"] | None = Field(
        None,
        description="Cast the model's floating-point weights and inputs to this dtype (default: as built)",
    )
    inputs: str | None = Field(
        None,
        description="MODULE:FUNCTION returning the forward's inputs (default: the model module's get_inputs)",
    )
    init_inputs: str | None = Field(
        None, description="MODULE:FUNCTION returning the constructor's arguments (default: get_init_inputs)"
    )
    suite: str | None = Field(
        None, description="The suite name in the command it suggests (default: MODEL-ops)", max_length=60
    )
    facts: bool = Field(
        True, description="Derive each written task's bound and roofline (a subprocess per task)"
    )


class OpRow(ItemReport):
    """One ranked operator, with its written task's facts where they were derived."""

    bound: str = ""
    """What bounds the task on the GPU (memory, compute, mixed; `unknown` where not derived)."""
    flops: float | None = None
    """FLOPs of one call (None: some op has no formula; `bytes` still bounds it)."""
    bytes: float | None = None
    """Minimum bytes one call moves (inputs, weights and outputs once)."""
    roofline_us: float | None = None
    """The fastest one call can be at the ceilings (`ceilings`): max(bytes / bandwidth, FLOPs / rate)."""
    headroom: float | None = None
    """Measured time per call over the roofline time: what the roofline leaves on the table (GPU only)."""


class ModelProfileOut(ToolModel):
    model: str
    device: str
    timed: Literal["cuda", "cpu"]
    """cuda: ranked by the CUDA time of each operator's kernels; cpu: by CPU time (no GPU here)."""
    iters: int
    total_us: float
    """The forward's time as the profiler read it, per forward."""
    covered: float
    """The share of the forward's time inside the ranked operators."""
    dtype: str
    rows: list[OpRow]
    out_dir: str
    manifest: str
    tasks_list: str
    written: list[str]
    """The task files written, hottest first (each loads and passes `ksearch task show FILE --check`)."""
    ceilings: str
    """The ceilings bound and roofline are judged against."""
    suite_command: str
    """The `ksearch suite run` command that searches the written tasks as a suite."""
    plug_back_command: str
    notes: list[str]
    text: str
    """The ranking as `ksearch model` prints it."""
    next: str = ""


class PlugBackIn(ToolIn):
    model: str = Field(description=_MODEL, min_length=1, max_length=1000)
    kernels: str = Field(
        description="A suite's name (each task's search's best kernel; without a GPU-timed best, its latest correct "
        "attempt) or a folder of KernelBench ModelNew files named after the tasks (TASK.py, or as `ksearch suite "
        "export` writes them)",
        min_length=1,
        max_length=1000,
    )
    out: str | None = Field(None, description=_OUT, max_length=1000)
    plugged: str | None = Field(
        None, description="Where to write the plugged model's file (default: OUT/plugged.py)", max_length=1000
    )
    device: Device = Field("auto", description="Where the model runs: auto, cpu, cuda")
    timing: bool = Field(True, description="Time each plugged operator and the whole model (eager, plugged)")
    budget_s: float | None = Field(
        None, gt=0, le=120, description="Seconds per timed callable (default 5 on a GPU, 2 on a CPU)"
    )
    atol: float | None = Field(
        None, ge=0, description="Model-level atol (default 10x KernelBench's per dtype)"
    )
    rtol: float | None = Field(
        None, ge=0, description="Model-level rtol (default 10x KernelBench's per dtype)"
    )


class PlugBackOut(PlugReport):
    kernels_dir: str = ""
    """The folder the kernels were read from (for a suite: where its kernels were exported)."""
    text: str = ""
    """The result as `ksearch model --plug-back` prints it."""


def out_dir_of(model: str, out: str | None) -> Path:
    """The folder of the model's task files: `out`, or the default."""
    return Path(out).expanduser().resolve() if out else default_out(model)


def _kernels_source(kernels: str) -> Path | None:
    """The kernels' folder, or None for a suite's name (ToolFailure for a file or a folder that is not there)."""
    source = Path(kernels).expanduser()
    if source.is_dir():
        return source.resolve()
    if source.exists():
        raise ToolFailure(f"{kernels} is a file: give a folder of kernels, or a suite's name")
    if "/" in kernels or kernels.endswith(".py"):
        raise ToolFailure(f"no such folder: {kernels}; give a folder of kernels, or a suite's name")
    return None


def default_out(model: str) -> Path:
    """MODEL-ops beside a model file, or ./CLASS-ops for an import path."""
    head, attr = split_ref(model)
    if is_file_ref(head):
        p = Path(head).expanduser()
        return p.resolve().parent / f"{p.stem}-ops"
    return Path.cwd() / f"{attr or head.rpartition('.')[2]}-ops"


def _suite_name(model: str) -> str:
    head, attr = split_ref(model)
    base = Path(head).stem if is_file_ref(head) else (attr or head.rpartition(".")[2])
    return (
        "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{base}-ops").lstrip("._-")[:60]
        or "model-ops"
    )


async def _run(req: Request, timeout_s: float) -> str:
    """The subprocess's last stdout line (its JSON report)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ksearch.gpu.model",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,  # a cancelled call (Ctrl-C, an MCP cancel) ends the model and what it started
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(req.model_dump_json().encode()), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        kill_group(proc)
        await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            raise ToolFailure(f"the model's {req.op} took over {timeout_s:.0f} s and was stopped") from None
        raise
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.strip()]
    if not lines or not lines[-1].lstrip().startswith("{"):
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ToolFailure(f"the model's {req.op} process failed: {tail[0]}")
    return lines[-1]


# ---------------------------------------------------------------------------------------------- profile


async def _facts(path: str, ceilings: dict | None) -> TaskFacts | None:
    def derive() -> TaskFacts | None:
        try:
            return task_facts(load_task(path), ceilings)
        except TaskError:
            return None

    return await asyncio.to_thread(derive)


def _with_facts(row: OpRow, facts: TaskFacts | None, timed: str) -> None:
    if facts is None:
        row.bound = "unknown"
        return
    wf = facts.workload("default") or next(iter(facts.workloads), None)
    row.bound = facts.bound
    if wf is None:
        return
    row.flops, row.bytes = wf.flops, wf.bytes
    ceil = facts.ceilings
    flops = wf.flops if wf.flops is not None else wf.flops_counted
    t_mem = (wf.bytes or 0.0) / ceil.bandwidth_Bps
    t_comp = flops / ceil.rate(wf.compute_dtype or "float32") if flops else 0.0
    if max(t_mem, t_comp) > 0:
        row.roofline_us = max(t_mem, t_comp) * 1e6
        if timed == "cuda" and row.per_call_us > 0:
            row.headroom = row.per_call_us / row.roofline_us


async def profile_model(inp: ProfileModelIn) -> ModelProfileOut:
    """Profile the model, rank its operators, write the hottest as task files (TaskError: the model file, its
    inputs or its forward is wrong, and what is accepted)."""
    out_dir = out_dir_of(inp.model, inp.out)
    req = Request(
        op="profile",
        model=inp.model,
        inputs=inp.inputs,
        init_inputs=inp.init_inputs,
        device=inp.device,
        dtype=inp.dtype,
        out_dir=str(out_dir),
        top=inp.top,
        iters=inp.iters,
    )
    report = ProfileReport.model_validate_json(await _run(req, PROFILE_TIMEOUT_S))
    if report.error:
        raise TaskError(report.error)
    rows = [OpRow(**r.model_dump()) for r in report.items]
    if inp.facts:
        sem = asyncio.Semaphore(2)

        async def one(row: OpRow) -> None:
            async with sem:
                _with_facts(row, await _facts(row.task, report.ceilings) if row.task else None, report.timed)

        await asyncio.gather(*(one(r) for r in rows if r.task))
    suite = inp.suite or _suite_name(inp.model)
    tasks_list = report.tasks_list or ""
    suite_cmd = f"ksearch suite run {shlex.quote(tasks_list)} --name {shlex.quote(suite)}"
    model_arg = shlex.quote(inp.model)
    out_arg = "" if inp.out is None else f" --out {shlex.quote(str(out_dir))}"
    plug_cmd = f"ksearch model {model_arg}{out_arg} --plug-back {shlex.quote(suite)}"
    ceilings = (
        "measured on this GPU (its bandwidth and matmul rates)"
        if report.ceilings
        else "an H200's datasheet figures (no GPU here: the bound is the task's on an H200; no headroom without GPU "
        "timings)"
    )
    result = ModelProfileOut(
        model=report.model,
        device=report.device,
        timed=report.timed,
        iters=report.iters,
        total_us=report.total_us,
        covered=report.covered,
        dtype=report.dtype,
        rows=rows,
        out_dir=report.out_dir or str(out_dir),
        manifest=report.manifest or "",
        tasks_list=tasks_list,
        written=report.written,
        ceilings=ceilings,
        suite_command=suite_cmd,
        plug_back_command=plug_cmd,
        notes=report.notes,
        text="",
        next=(
            f"search the {len(report.written)} written tasks as a suite: `{suite_cmd}` (any policy; the kernel bank is "
            f"shared across them), then put the winners back: `{plug_cmd}` (MCP: plug_back)"
            if report.written
            else "no task was written: see each operator's not_written"
        ),
    )
    result.text = profile_text(result)
    return result


def _us(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g} us" if x < 1000 else f"{x / 1000:.3g} ms"


def _io(row: ItemReport) -> str:
    ins = ", ".join(i.split(" ")[0] + ("(strided)" if "strided" in i else "") for i in row.inputs)
    outs = ", ".join(o.split(" ")[0] for o in row.outputs)
    return f"{ins} -> {outs}"


def profile_text(r: ModelProfileOut) -> str:
    clock = (
        f"CUDA time on {r.device} (torch.profiler's CUDA activity)"
        if r.timed == "cuda"
        else "CPU time: no GPU here, so this ranks CPU time, not GPU time"
    )
    lines = [
        f"{r.model}: {len(r.rows)} operators ranked by {clock}; {r.iters} profiled forwards, {_us(r.total_us)} per "
        f"forward, {r.covered:.0%} of it in the operators below",
        f"bound and roofline: {r.ceilings}",
        f"  {'#':>2} {'share':>6} {'calls':>5} {'per call':>9}  {'operator':<22} {'shapes (in -> out)':<50} "
        f"{'dtype':<9} {'bound':<7} {'roofline':>9} {'headroom':>8}  task",
    ]
    for row in r.rows:
        task = Path(row.task).name if row.task else f"not written: {row.not_written}"
        head = f"{row.headroom:.1f}x" if row.headroom is not None else "-"
        lines.append(
            f"  {row.rank:>2} {row.share:>6.1%} {row.calls:>5} {_us(row.per_call_us):>9}  {row.label[:22]:<22} "
            f"{_io(row)[:50]:<50} {row.dtype[:9]:<9} {(row.bound or '-')[:7]:<7} {_us(row.roofline_us):>9} "
            f"{head:>8}  {task}"
        )
    lines += [f"note: {n}" for n in r.notes]
    if r.written:
        lines += [
            f"wrote {len(r.written)} task file{'' if len(r.written) == 1 else 's'} to {r.out_dir} ({Path(r.tasks_list).name} lists them; "
            f"{Path(r.manifest).name} is what plug-back reads)",
            f"search them as a suite: {r.suite_command}",
            f"then plug the winners back: {r.plug_back_command}",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- plug back


async def _suite_kernels(ws: Workspace, ref: str, out_dir: Path) -> tuple[Path, list[str]]:
    """The suite's kernels exported into OUT/kernels-SUITE (its searches' bests; without one, the latest correct
    attempt), and what was said of each task."""
    import json

    from ksearch.tools.export_kernel import ExportKernelIn, export_kernel
    from ksearch.tools.suites.suite import get_suite
    from ksearch.worldmodel.errors import KsearchError

    try:
        suite = await get_suite(ws, ref)
    except NotFound:
        raise NotFound(
            f"no suite named {ref!r} in this database, and no such folder: --plug-back takes a suite's name (`ksearch "
            "suite list`) or a folder of kernels (`ksearch suite export SUITE FOLDER` writes one)"
        ) from None
    manifest = out_dir / "model.json"
    stems = set()
    if manifest.is_file():
        stems = {t["task"] for t in json.loads(manifest.read_text()).get("tasks", [])}
    folder = out_dir / f"kernels-{suite.name}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.py"):
        old.unlink()
    notes: list[str] = []
    for t in suite.tasks:
        stem = Path(t.task).stem
        if stems and stem not in stems:
            notes.append(f"suite task {stem} is not one of the model's tasks")
            continue
        if t.search_id is None:
            notes.append(f"{stem}: not searched ({t.status}{': ' + t.error if t.error else ''})")
            continue
        attempt = None
        if await ws.records.best_attempt(t.search_id) is None:
            correct = [
                a
                for a in await ws.records.list_attempts(t.search_id)
                if a.evaluation is not None and a.evaluation.correct
            ]
            if not correct:
                notes.append(f"{stem}: its search has no correct kernel")
                continue
            attempt = correct[-1].id
            notes.append(
                f"{stem}: no GPU-timed best (searched without a GPU): its latest correct attempt #{attempt}, correct "
                "on the CPU interpreter, never timed on a GPU"
            )
        try:
            k = await export_kernel(
                ws, ExportKernelIn(search=t.search_id, format="kernelbench", attempt=attempt)
            )
        except KsearchError as e:
            notes.append(f"{stem}: {e}")
            continue
        (folder / f"{t.idx:03d}-{k.filename}").write_text(k.text)
    return folder, notes


async def plug_back(inp: PlugBackIn, ws: Workspace | None = None) -> PlugBackOut:
    """The model with the kernels in place, checked and timed. Kernels from a folder, or from a suite (needs `ws`).
    Raises for what is wrong before anything is plugged (no manifest, no such suite or folder, a model that does
    not load); a refused kernel or a failed model-level check is in the answer (`ok` false, the reasons)."""
    out_dir = out_dir_of(inp.model, inp.out)
    if not (out_dir / "model.json").is_file():
        raise ToolFailure(
            f"no model.json in {out_dir}: run `ksearch model {inp.model}"
            + (f" --out {out_dir}" if inp.out else "")
            + "` first (MCP: profile_model); it writes the task files and the manifest plug-back reads"
        )
    notes: list[str] = []
    source = _kernels_source(inp.kernels)
    if source is not None:
        folder = source
    elif ws is None:
        raise ToolFailure(
            f"{inp.kernels!r} is no folder here; as a suite's name it needs the project's database (--db)"
        )
    else:
        folder, notes = await _suite_kernels(ws, inp.kernels, out_dir)
    req = Request(
        op="plug",
        model=inp.model,
        device=inp.device,
        out_dir=str(out_dir),
        kernels=str(folder),
        plugged=str(out_dir_of(inp.model, inp.plugged)) if inp.plugged else None,
        timing=inp.timing,
        budget_s=inp.budget_s,
        atol=inp.atol,
        rtol=inp.rtol,
    )
    report = PlugReport.model_validate_json(await _run(req, PLUG_TIMEOUT_S))
    if report.error and not report.tasks:
        raise TaskError(report.error)
    out = PlugBackOut(**report.model_dump(), kernels_dir=str(folder))
    out.notes = notes + out.notes
    out.text = plug_text(out)
    return out


def _t(t: Timing | None) -> str:
    if t is None:
        return "-"
    return f"{_us(t.median_us)} [{_us(t.ci_low_us)}-{_us(t.ci_high_us)}] n={t.n}"


def plug_text(r: PlugBackOut) -> str:
    plugged = [t for t in r.tasks if t.status == "plugged"]
    where = f" -> {r.plugged_file}" if r.plugged_file else ": nothing written"
    lines = [
        f"plugged {len(plugged)} of {len(r.tasks)} tasks into {r.model}{where} (kernels from {r.kernels_dir})"
    ]
    for t in r.tasks:
        if t.status == "plugged":
            sp = (
                f"; {t.speedup.ratio:.3g}x [{t.speedup.ci_low:.3g}-{t.speedup.ci_high:.3g}] ({t.speedup.verdict})"
                if t.speedup
                else ""
            )
            lines.append(
                f"  {t.task}: plugged {Path(t.kernel or '').name} at {t.sites} site(s), {t.hits} calls answered, "
                f"{t.fallbacks} fell back; max abs {t.max_abs:.3g} (atol = rtol {t.atol:.3g}); original "
                f"{_t(t.original)}, kernel {_t(t.kernel_timing)}{sp}"
            )
        else:
            lines.append(f"  {t.task}: {t.status.replace('_', ' ')}: {t.reason}")
    if r.check is not None:
        lines.append(
            f"model check: {'ok' if r.check.ok else 'FAILED'}: max abs {r.check.max_abs:.3g}, relative L2 "
            f"{r.check.rel_l2:.3g}, {r.check.over} of {r.check.numel} elements outside; rule: {r.check.rule}"
        )
    if r.eager is not None and r.plugged is not None and r.vs_eager is not None:
        lines.append(
            f"whole model: eager {_t(r.eager)}; plugged {_t(r.plugged)}: {r.vs_eager.ratio:.3g}x "
            f"[{r.vs_eager.ci_low:.3g}-{r.vs_eager.ci_high:.3g}] ({r.vs_eager.verdict})"
        )
    if r.compiled is not None and r.vs_compile is not None:
        lines.append(
            f"torch.compile of the whole model {_t(r.compiled)}: plugged is {r.vs_compile.ratio:.3g}x "
            f"[{r.vs_compile.ci_low:.3g}-{r.vs_compile.ci_high:.3g}] ({r.vs_compile.verdict})"
        )
    if r.timing_note:
        lines.append(f"timing: {r.timing_note}")
    lines += [f"note: {n}" for n in r.notes]
    if r.unused_kernels:
        lines.append(f"note: kernels matching no task: {', '.join(r.unused_kernels)}")
    if r.error:
        lines.append(f"error: {r.error}")
    return "\n".join(lines)
