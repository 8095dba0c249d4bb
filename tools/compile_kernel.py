"""compile_kernel: compile a candidate without running it (diagnostics, registers, spills, shared memory)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.common import CandidateRef, resolve_candidate, task_for
from tools.workspace import Workspace
from worldmodel.models import CompileReport


class CompileKernelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search: int | str | None = Field(None, description="Search id or name (or give `task`)")
    task: str | None = Field(
        None, max_length=1000, description="Task name or path, for a free-standing compile"
    )
    candidate: CandidateRef


class CompileOut(BaseModel):
    candidate_id: str
    report: CompileReport


async def compile_kernel(ws: Workspace, inp: CompileKernelIn) -> CompileOut:
    _, task = await task_for(ws, inp.search, inp.task)
    cand = await resolve_candidate(ws, inp.candidate)
    report = await (await ws.sandbox()).compile(cand, task)
    return CompileOut(candidate_id=cand.id, report=report)
