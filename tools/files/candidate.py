"""A candidate given as a file, outside any search: its task, its language, and a Solution JSON's conversion.

Shared by evaluate_file and compile_file. Nothing here opens the store: a file measured on its own is not
recorded, so its candidate is built in memory (`Candidate.of`), not put in a database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ksearch.gpu.task import Task
from ksearch.gpu.tasks.flashinfer.solution import candidate_from_solution_text, looks_like_solution
from ksearch.tools.common import check_python_syntax
from ksearch.tools.errors import ToolFailure
from ksearch.tools.schema import ToolIn
from ksearch.tools.tasks import load_with_workloads
from ksearch.worldmodel.models import LANGUAGES, Candidate, Language

LanguageChoice = Literal["auto", "triton", "cuda", "cpp_ext"]


def detect_language(source: str) -> Language:
    """cpp_ext if the file builds a torch extension, cuda if it uses ksearch.gpu.nvrtc, else triton."""
    if re.search(r"\bload_inline\b|\bcpp_ext\b", source):
        return "cpp_ext"
    if re.search(r"\bnvrtc\b", source):
        return "cuda"
    return "triton"


class CandidateFileIn(ToolIn):
    """A candidate file and the task it is for."""

    task: str = Field(min_length=1, max_length=1000, description="Built-in task name or a task path")
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="The candidate file: a Python module defining the task's entry point (ModelNew; "
        "custom_kernel(data) for a GPU MODE task; run(...) for a FlashInfer-Bench one) in Triton, CUDA through "
        "ksearch.gpu.nvrtc or a C++ extension, or a FlashInfer-Bench Solution JSON",
    )
    workloads_file: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="For a FlashInfer-Bench definition whose workloads are not beside it: the workloads JSONL "
        "(default: the one found beside the definition or in its dataset)",
    )
    language: LanguageChoice = Field(
        "auto",
        description="triton | cuda | cpp_ext | auto (cpp_ext when the source mentions load_inline or "
        "cpp_ext, cuda when it mentions nvrtc, else triton); a Solution JSON's own spec decides for it",
    )

    @field_validator("language", mode="before")
    @classmethod
    def _known_language(cls, v: object) -> object:
        if isinstance(v, str) and v not in ("auto", *LANGUAGES):
            raise ValueError(f"unknown language {v!r}; accepted: auto, {', '.join(LANGUAGES)}")
        return v


@dataclass(frozen=True)
class CandidateFile:
    """A candidate file read and resolved: what the sandbox runs, for which task."""

    task: Task
    candidate: Candidate
    note: str | None
    """How a Solution JSON was turned into a candidate (None for a plain source file)."""


def read_candidate_file(inp: CandidateFileIn, *, check_syntax: bool = False) -> CandidateFile:
    """Load the task, read the file and resolve its language (a Solution JSON is converted).

    `check_syntax`: refuse a Python source that does not parse, as compile_kernel does; an evaluation
    instead reports it as the candidate's compile error.
    """
    task = load_with_workloads(inp.task, inp.workloads_file)  # a TaskError says why it cannot be loaded
    try:
        source = Path(inp.path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ToolFailure(f"cannot read {inp.path}: {why}") from None
    if looks_like_solution(source):
        # a FlashInfer-Bench Solution: its spec says the language, its entry point what `run` calls
        converted = candidate_from_solution_text(source, task, inp.path)  # SolutionError names the field
        return CandidateFile(task, Candidate.of(converted.source, converted.language), converted.how)
    if check_syntax:
        check_python_syntax(source, task)
    language = detect_language(source) if inp.language == "auto" else inp.language
    return CandidateFile(task, Candidate.of(source, language), None)
