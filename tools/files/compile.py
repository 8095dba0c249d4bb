"""compile_file: compile a candidate file for a task without running it, outside any search.

compile_kernel's work without a store: the source is refused when it does not parse, a Solution JSON is
converted, and the sandbox's compile answers (on a machine without a GPU, Triton and CUDA are compiled for
sm_90 from a dry run; see gpu/sandbox/dryrun.py).
"""

from __future__ import annotations

from pydantic import Field

from ksearch.gpu.sandbox.api import Sandbox
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.tools.files.candidate import CandidateFileIn, read_candidate_file
from ksearch.tools.schema import ToolModel
from ksearch.worldmodel.models import CompileReport


class CompileFileIn(CandidateFileIn):
    """Compile a candidate file (nothing runs on the task's inputs, nothing is recorded)."""


class CompileFileOut(ToolModel):
    candidate_id: str = Field(description="The candidate's id (the hash of its source and language)")
    note: str | None = Field(None, description="How a FlashInfer-Bench Solution was turned into a candidate")
    report: CompileReport


async def compile_file(inp: CompileFileIn, *, sandbox: Sandbox | None = None) -> CompileFileOut:
    """Compile `inp.path` for `inp.task`; without `sandbox`, on a LocalSandbox of its own, closed after."""
    cf = read_candidate_file(inp, check_syntax=True)
    sb = sandbox if sandbox is not None else LocalSandbox()
    try:
        report = await sb.compile(cf.candidate, cf.task)
    finally:
        if sandbox is None:
            await sb.close()
    return CompileFileOut(candidate_id=cf.candidate.id, note=cf.note, report=report)
