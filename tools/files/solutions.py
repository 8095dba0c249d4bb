"""FlashInfer-Bench Solutions at the edges of a search: a Solution file given as a candidate, and a search's
best kernel written out as a Solution (ksearch.gpu.tasks.flashinfer.solution does the conversions).

`SolutionError` (a KsearchError and a ValueError) is every refusal here: a file that is not a valid Solution
for the task, a search on another kind of task, a search without a best kernel.
"""

from __future__ import annotations

import ast
import re

from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.gpu.tasks.flashinfer.export import Identity, solution_from_candidate, solution_json
from ksearch.gpu.tasks.flashinfer.solution import SolutionError, looks_like_solution
from ksearch.tools.common import CandidateRef
from ksearch.tools.export_kernel import CPU_STATUS, exported_attempt
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import CPU_INTERPRETER

__all__ = ["SolutionError", "SolutionOut", "export_solution", "is_solution", "submitted_candidate"]


class SolutionOut(ToolModel):
    """A search's best kernel as a FlashInfer-Bench Solution."""

    search_id: int
    attempt_id: int
    """The attempt whose candidate it is (the search's best, or the attempt asked for)"""
    name: str
    """The Solution's name (an unchanged submitted Solution keeps its own)"""
    solution_json: str
    """The Solution JSON document"""


def is_solution(text: str) -> bool:
    """Whether a file's text is a FlashInfer-Bench Solution JSON (an object with `spec` and `sources`)
    rather than a Python module."""
    return looks_like_solution(text)


def submitted_candidate(text: str, language: str) -> CandidateRef:
    """A file's text as the candidate to submit: a Solution JSON (its spec gives the language; it is checked
    against the search's task when benchmarked, a SolutionError naming the bad field), else a Python module
    in `language` (triton | cuda | cpp_ext; CandidateRef refuses any other)."""
    if is_solution(text):
        return CandidateRef(solution_json=text)
    return CandidateRef(source=text, language=language)


def entry_missing(text: str, task: Task) -> str | None:
    """Why a submitted file is no candidate for `task`, or None. A file that does not even define (or assign)
    the name a candidate of its task must define (notes, a log, the wrong file) is refused before anything is
    recorded; a kernel that names it but does not compile is an attempt like any other."""
    entry = task.candidate_entry
    if is_solution(text) or re.search(
        rf"^\s*(?:class|def|async\s+def)\s+{entry}\b|^\s*{entry}\s*=", text, re.M
    ):
        return None
    solution = " or a FlashInfer-Bench Solution JSON" if task.style == "flashinfer" else ""
    return f"it defines no `{entry}`; accepted: {contract.entry_line(task)}{solution}"


def not_a_candidate(text: str, task: Task) -> str | None:
    """Why a file is no candidate for `task` even before it runs (it does not parse as Python, or defines nothing
    the task needs), or None."""
    if not is_solution(text):
        try:
            ast.parse(text)
        except SyntaxError as e:
            return f"it does not parse as Python (line {e.lineno}: {e.msg})"
    return entry_missing(text, task)


def _safe(text: str, sep: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", sep, text)


async def export_solution(ws: Workspace, search: int | str, attempt: int | None = None) -> SolutionOut:
    """The search's best kernel (or its correct attempt `attempt`) as a FlashInfer-Bench Solution JSON for the
    definition it searches on; its description says what ksearch measured of it (on a CPU: correct on the
    interpreter, never timed on a GPU).

    SolutionError when the search is not on a FlashInfer-Bench definition, has no best kernel yet (and no
    `attempt` is named), `attempt` is not a correct attempt of it, or the kernel cannot be one (e.g. it imports
    ksearch's own helpers)."""
    s = await ws.search(search)
    task = ws.search_task(s)
    if task.style != "flashinfer":
        raise SolutionError(
            f"search {s.name!r} is on {task.name!r}, a {task.style} task: a Solution JSON exists only for a "
            "FlashInfer-Bench definition (a search whose task is a definition's .json)"
        )
    store = ws.store
    a = await exported_attempt(ws, s, attempt, error=SolutionError)
    cand = await store.get_candidate(a.candidate_id)
    ev = a.evaluation
    assert ev is not None  # exported_attempt returns a correct, evaluated attempt
    device = next((t.device for t in ev.timings if t.device != CPU_INTERPRETER), None) or (
        ev.env.device if ev.env and not ev.env.cpu_mode else None
    )
    node = await store.get_node(a.node_id) if a.node_id is not None else None
    what = f" ({node.title})" if node is not None and node.kind == "intent" else ""
    if ev.cpu_interpreted:
        speed = f"; {CPU_STATUS}"
    else:
        speed = f"; {ev.speedup_vs_eager:.3f}x vs eager PyTorch on {device}" if ev.speedup_vs_eager else ""
    who = Identity(
        name=_safe(f"{task.name}_ksearch_{s.name}_a{a.id}", "_"),
        author=_safe(f"ksearch-{a.author}", "-").strip("-"),
        description=f"ksearch search {s.name!r}, attempt #{a.id}{what}{speed}",
        target_hardware=[re.sub(r"\s+", "_", device.strip()) if device else "cuda"],
    )
    sol = solution_from_candidate(cand.source, cand.language, task, who)
    return SolutionOut(search_id=s.id, attempt_id=a.id, name=sol.name, solution_json=solution_json(sol))
