"""compile_kernel: compile a candidate without running it (diagnostics, registers, spills, shared memory)."""

from __future__ import annotations

from ksearch.tools.common import CandidateJob, resolve_candidate, sandbox_of, task_for
from ksearch.tools.loop.call_clock import part
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import CompileReport


class CompileKernelIn(CandidateJob):
    """Compile a candidate (nothing runs)."""


class CompileOut(ToolModel):
    candidate_id: str
    report: CompileReport


async def compile_kernel(ws: Workspace, inp: CompileKernelIn) -> CompileOut:
    _, task = await task_for(ws, inp.search, inp.task)
    cand = await resolve_candidate(ws, inp.candidate, task)
    sb = await sandbox_of(ws)
    # the sandbox reports no phases here: a wait for a worker is inside this part
    with part("compile", "compiling"):
        report = await sb.compile(cand, task)
    return CompileOut(candidate_id=cand.id, report=report)
