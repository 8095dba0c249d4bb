"""export_kernel: a search's kernel written out in its task owner's format, for the owner's own evaluator to run as it
stands: a GPU MODE folder's `submission.py` (its `eval.py` imports `custom_kernel` from it), or a KernelBench
`ModelNew` file (KernelBench's `eval_kernel_against_ref` loads it beside the problem's `Model`).

The file imports nothing of ksearch: a CUDA or C++ extension candidate gets the standalone copy of the helper it
calls written in (gpu/export/standalone.py), anything else of ksearch is refused with the line it is on. Its first lines
say which search and attempt it is and what ksearch measured of it (`exported_status`), so a kernel that is correct
on the CPU interpreter but was never timed on a GPU goes out saying so.

Which attempt: the search's best by default, the one every face names; `attempt` picks any correct one, which is
how a search run without a GPU (whose correct attempts are never timed, so never a best) gets its kernels out.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ksearch.gpu.export.standalone import StandaloneError, standalone
from ksearch.gpu.task import Task
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError, NotFound
from ksearch.worldmodel.models import CPU_INTERPRETER, Attempt, Language, Search
from ksearch.worldmodel.render import no_best

__all__ = [
    "FORMAT_OF_STYLE",
    "ExportFormat",
    "ExportKernelIn",
    "ExportedKernel",
    "export_kernel",
    "exported_attempt",
    "exported_status",
]

ExportFormat = Literal["submission", "kernelbench", "solution"]
FORMAT_OF_STYLE: dict[str, ExportFormat] = {
    "gpumode": "submission",
    "kernelbench": "kernelbench",
    "flashinfer": "solution",
}
"""The one format a task of each style exports as."""
CPU_STATUS = "correct on the CPU interpreter, never timed on a GPU"


class ExportKernelIn(ToolIn):
    """Which search's kernel to write out, in which format."""

    search: int | str = Field(description="Search id or name")
    format: ExportFormat
    """submission: a GPU MODE `submission.py` (a search on a GPU MODE folder); kernelbench: a KernelBench `ModelNew`
    file (a search on a KernelBench-format task file or a built-in task); solution: a FlashInfer-Bench Solution JSON
    (a search on a definition)"""
    attempt: int | None = Field(None, ge=1)
    """The attempt to write out (any correct one of the search); default: the search's best"""


class ExportedKernel(ToolModel):
    """A search's kernel as a file its task owner's evaluator runs unchanged."""

    search_id: int
    attempt_id: int
    format: ExportFormat
    language: Language
    """The candidate's language (triton, cuda, cpp_ext)"""
    filename: str
    """The name the file goes by: submission.py for GPU MODE; for KernelBench, one naming the task and attempt"""
    text: str
    """The file: the candidate with a comment on top saying what it is and what was measured of it"""
    status: str
    """What ksearch measured of it, as the file's comment says it"""
    helpers: list[str] = Field(default_factory=list)
    """ksearch helpers whose standalone copies were written in (nvrtc, cpp_ext)"""
    notes: list[str] = Field(default_factory=list)
    """How to run it with the owner's evaluator, what it needs there, and what changed in the source"""


def exported_status(a: Attempt, final: tuple[float, int] | None = None) -> str:
    """What ksearch measured of an attempt it writes out, in words (the attempt is correct: `exported_attempt`),
    naming the workloads each figure covers; `final`: the final evaluation's figure of it (speedup, workloads)."""
    ev = a.evaluation
    assert ev is not None and ev.status == "ok"
    if ev.cpu_interpreted:
        said = CPU_STATUS
    else:
        device = next((t.device for t in ev.timings if t.device != CPU_INTERPRETER), None)
        protocol = f" by the {ev.timing_protocol} protocol" if ev.timing_protocol else ""
        n = sum(1 for t in ev.timings if t.device != CPU_INTERPRETER)
        over = f" (geomean over {n} search workload{'s' if n != 1 else ''})" if n else ""
        speed = f": {ev.speedup_vs_eager:.3f}x vs eager PyTorch{over}" if ev.speedup_vs_eager else ""
        if final is not None:
            speed += f"; final evaluation: {final[0]:.3f}x over all {final[1]} workloads"
        said = f"correct; timed on {device}{protocol}{speed}" if device else "correct; not timed"
    if ev.pure_pytorch:
        said += "; but pure PyTorch: no kernel of its own ran in the check"
    return said


def some_ids(ids: list[int], n: int = 8, *, newest_first: bool = False) -> str:
    """`#3, #4, #9` for attempt ids, the latest `n` of them where there are more, saying so (a count of 10 beside 8
    ids read as a mistake)."""
    shown = ids[-n:][::-1] if newest_first else ids[-n:]
    listed = ", ".join(f"#{i}" for i in shown)
    return listed if len(ids) <= n else f"{listed} (the latest {n} of {len(ids)})"


def cpu_correct(attempts: list[Attempt]) -> list[int]:
    """The attempts correct on the CPU interpreter (never timed, so never a best; each can be exported)."""
    return [
        a.id
        for a in attempts
        if a.evaluation is not None and a.evaluation.status == "ok" and a.evaluation.cpu_interpreted
    ]


async def exported_attempt(
    ws: Workspace, s: Search, attempt_id: int | None, error: type[KsearchError] = ToolFailure
) -> Attempt:
    """The attempt to write out: `attempt_id` (refused unless it is a correct attempt of the search), else the
    search's best (refused when there is none, naming the correct attempts a CPU run left and how to pick one).
    Refusals are `error`s."""
    store = ws.store
    if attempt_id is not None:
        try:
            a = await store.get_attempt(attempt_id)
        except NotFound:
            a = None
        if a is None or a.search_id != s.id:
            ids = [x.id for x in await store.list_attempts(s.id)]
            have = f"its attempts are #{ids[0]}–#{ids[-1]}" if ids else "it has no attempt yet"
            raise error(f"search {s.name!r} has no attempt #{attempt_id}: {have}")
        ev = a.evaluation
        if ev is None or ev.status != "ok":
            what = "not evaluated (its evaluation was abandoned)" if ev is None else ev.status
            why = f": {ev.error.splitlines()[0][:200]}" if ev is not None and ev.error else ""
            raise error(
                f"attempt #{a.id} of search {s.name!r} is {what}{why}; only a correct attempt is written out "
                f"(its source as it is: the resource ksearch://attempts/{a.id} over MCP, or `ksearch attempt "
                f"{s.name} {a.id} -o FILE`)"
            )
        return a
    best = await store.best_attempt(s.id)
    if best is not None and best.evaluation is not None:
        return best
    attempts = await store.list_attempts(s.id)
    cpu = cpu_correct(attempts)
    if cpu:
        listed = some_ids(cpu)
        raise error(
            f"search {s.name!r} has no best kernel to export yet: {no_best(len(cpu))}; pick one with "
            f"--attempt N (attempt=N over MCP), and it goes out marked {CPU_STATUS}: {listed}"
        )
    pure = [a.id for a in attempts if _pure(a)]
    if pure:
        raise error(
            f"search {s.name!r} has no best kernel to export yet: attempt(s) {some_ids(pure)} "
            "are correct but pure PyTorch (no kernel of their own ran), which is never a best kernel; --attempt N "
            "(attempt=N over MCP) writes one out anyway, marked so"
        )
    raise error(f"search {s.name!r} has no best kernel to export yet: {no_best(0)}")


def _pure(a: Attempt) -> bool:
    ev = a.evaluation
    return ev is not None and ev.status == "ok" and ev.pure_pytorch


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


_WHAT = {
    "submission": "a GPU MODE submission.py",
    "kernelbench": "a KernelBench ModelNew file",
    "solution": "a FlashInfer-Bench Solution JSON",
}


def _fits(task: Task, fmt: ExportFormat, s: Search) -> None:
    """Refuse a format the search's task is not written for, naming the one it is."""
    fits = FORMAT_OF_STYLE[task.style]
    if fmt == fits:
        return
    on = {"submission": "GPU MODE folder", "kernelbench": "KernelBench-format task file",
          "solution": "FlashInfer-Bench definition"}  # fmt: skip
    raise ToolFailure(
        f"search {s.name!r} is on {task.name!r}, a {task.style} task; {_WHAT[fmt]} is written for a search on a "
        f"{on[fmt]}; this one exports as format {fits!r} (`ksearch export --{fits}`: {_WHAT[fits]})"
    )


def _notes(fmt: ExportFormat, language: str, helpers: list[str], s: Search) -> list[str]:
    notes: list[str] = []
    if fmt == "submission":
        notes.append(
            "GPU MODE: save it as the task folder's submission.py; the folder's eval.py imports custom_kernel from it"
        )
    elif language == "triton":
        notes.append(
            "KernelBench: evaluate it with backend='triton' (KernelBench imports a Triton file from a file of its "
            "own; with backend='cuda' it exec()s the text, which Triton's JIT does not accept)"
        )
    else:
        notes.append("KernelBench: evaluate it with backend='cuda'")
    if "nvrtc" in helpers:
        notes.append(
            "its CUDA kernels compile with NVRTC through CuPy, as in ksearch (the launcher is written in): the "
            "evaluator's environment needs CuPy (cupy-cuda12x, or cupy-cuda13x to match the driver)"
        )
        if fmt == "kernelbench":
            notes.append(
                "KernelBench's optional static check (run_and_check.py's check_kernel) with backend='cuda' asks for "
                "load_inline or cpp_extension, which an NVRTC kernel does not use: run it with check_kernel=False"
            )
    if "cpp_ext" in helpers:
        notes.append(
            "its C++ extension builds with torch's load_inline, as in ksearch (the loader is written in): the "
            "evaluator's machine needs nvcc and ninja"
        )
    if fmt == "kernelbench":
        p = s.config.precision
        notes.append(
            f"the search ran it at KernelBench precision {p} (inputs and weights cast to it, its tolerance): "
            f"evaluate with precision={p}"
            if p
            else "the search ran the file's inputs as drawn, judged by the task's tolerance for each output's "
            "dtype (a KernelBench file's: KernelBench's); KernelBench's evaluation casts inputs and weights to its "
            "`precision` (default fp32)"
        )
    return notes


async def export_kernel(ws: Workspace, inp: ExportKernelIn) -> ExportedKernel:
    """The search's kernel (its best, or `inp.attempt`) as a file in `inp.format`. ToolFailure when the format does
    not fit the search's task or the attempt is not a correct one; StandaloneError when the candidate needs
    something of ksearch that cannot be written in."""
    s = await ws.search(inp.search)
    task = ws.search_task(s)
    _fits(task, inp.format, s)
    if inp.format == "solution":
        return await _as_solution(ws, s, inp.attempt)
    a = await exported_attempt(ws, s, inp.attempt)
    cand = await ws.store.get_candidate(a.candidate_id)
    verdict = await ws.store.final_verdict(s.id)
    status = exported_status(a, verdict.final_figure(a.id) if verdict is not None else None)
    rechecked = [o.attempt_id for o in verdict.outcomes] if verdict is not None else []
    if (
        rechecked and a.id not in rechecked
    ):  # the final evaluation chose others: its figures say nothing of this one
        status += f"; not among the attempts the final evaluation re-checked ({', '.join(f'#{i}' for i in rechecked)})"
    node = await ws.store.get_node(a.node_id) if a.node_id is not None else None
    what = f" ({node.title})" if node is not None and node.kind == "intent" else ""
    kind = "GPU MODE submission" if inp.format == "submission" else "KernelBench ModelNew file"
    header = [
        f"{task.name}: a {kind} written by ksearch from search {s.name!r}, attempt #{a.id}{what}",
        f"{cand.language} candidate {cand.id}; status: {status}",
        "",
    ]
    try:
        out = standalone(cand.source, header=header, drop_future=inp.format == "kernelbench")
    except StandaloneError as e:
        raise StandaloneError(f"attempt #{a.id} of search {s.name!r} cannot be written out: {e}") from None
    filename = (
        "submission.py"
        if inp.format == "submission"
        else f"{_safe(task.name)}_ksearch_{_safe(s.name)}_a{a.id}.py"
    )
    return ExportedKernel(
        search_id=s.id,
        attempt_id=a.id,
        format=inp.format,
        language=cand.language,
        filename=filename,
        text=out.text,
        status=status,
        helpers=out.helpers,
        notes=[*_notes(inp.format, cand.language, out.helpers, s), *out.notes],
    )


async def _as_solution(ws: Workspace, s: Search, attempt: int | None) -> ExportedKernel:
    """The Solution JSON export in the same shape as the file formats' (one tool for all three)."""
    from ksearch.tools.files.solutions import export_solution  # it builds on this module's exported_attempt

    sol = await export_solution(ws, s.id, attempt)
    a = await ws.store.get_attempt(sol.attempt_id)
    cand = await ws.store.get_candidate(a.candidate_id)
    return ExportedKernel(
        search_id=s.id,
        attempt_id=a.id,
        format="solution",
        language=cand.language,
        filename=f"{sol.name}.json",
        text=sol.solution_json,
        status=exported_status(a),
        notes=[
            "FlashInfer-Bench loads it as a Solution (e.g. `Solution.model_validate_json`) and runs it with its "
            "benchmark on the definition it names; `ksearch submit SEARCH FILE.json` takes one back"
        ],
    )
