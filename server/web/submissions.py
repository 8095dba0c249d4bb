"""Kernels submitted from the page: each runs ksearch.tools.submit_kernel (what `ksearch submit` runs) as a job of
the app, which the page polls for its progress and then opens the attempt it recorded.

An evaluation takes seconds to minutes, longer than a request should wait, so a submission is checked at once
(a refusal is the POST's answer, nothing recorded) and then evaluated in the background; its steps (the seed
measured first, the intent claimed, compiling, correctness, timing) are kept for the page to show.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ksearch.server.cli.words import cli_words
from ksearch.tools.files.candidate import LanguageChoice
from ksearch.tools.submit_kernel import MAX_SOURCE_BYTES, SubmitKernelIn, check_submission, submit_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError

log = logging.getLogger("ksearch.ui")

KEEP = 50  # finished jobs kept for the page to read (the oldest go first)
MAX_BODY = 6 * MAX_SOURCE_BYTES + 64 * 1024  # JSON escapes a control character in 6 bytes


class SubmitIn(BaseModel):
    """What the page's "Submit a kernel" form sends."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    node_id: int | None = Field(None, ge=1)
    """The root or the intent it implements (an open one is claimed); None: the search, no node"""
    source: str
    """The kernel's source (pasted, or a file's text)"""
    language: LanguageChoice = "auto"
    """auto (detected from the source, as the command line detects it) | triton | cuda | cpp_ext"""
    name: str = Field("the pasted source", min_length=1, max_length=300)
    """What to call it in messages: the uploaded file's name"""


class JobView(BaseModel):
    """A submission as the page polls it."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    id: str
    state: Literal["running", "done", "refused", "failed"]
    """running; done (an attempt is recorded, whatever its status); refused (nothing recorded); failed (the
    server could not finish it: see `error`)"""
    node_id: int | None
    steps: list[str] = Field(default_factory=list)
    """What it did so far, in order"""
    fraction: float = 0.0
    """How far the evaluation is (0 to 1)"""
    seconds: float = 0.0
    """Since it started"""
    attempt_id: int | None = None
    status: str | None = None
    """The evaluation's status (ok, compile_error, incorrect, ...)"""
    summary: str = ""
    is_best: bool = False
    language: str | None = None
    error: str = ""
    problems: list[str] = Field(default_factory=list)


class _Job:
    def __init__(self, search_id: int, search: str, node_id: int | None) -> None:
        self.view = JobView(id=secrets.token_hex(8), state="running", node_id=node_id)
        self.search_id = search_id
        self.search = search
        self.started = time.monotonic()
        self.task: asyncio.Task[None] | None = None

    def snapshot(self) -> JobView:
        end = self.view.seconds if self.view.state != "running" else time.monotonic() - self.started
        return self.view.model_copy(update={"seconds": round(end, 1)})


class Submissions:
    """The app's submission jobs, by id."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    async def start(self, ws: Workspace, search_id: int, search_name: str, body: SubmitIn) -> JobView:
        """Check the submission (a refusal is raised: nothing recorded) and evaluate it in the background."""
        inp = SubmitKernelIn(
            search=search_id, source=body.source, name=body.name, node_id=body.node_id, language=body.language
        )
        await check_submission(ws, inp)
        job = _Job(search_id, search_name, body.node_id)
        self._jobs[job.view.id] = job
        self._forget_old()
        job.task = asyncio.create_task(self._run(ws, job, inp))
        return job.snapshot()

    def get(self, search_id: int, job_id: str) -> JobView | None:
        """The submission to this search with this id, if this server holds it."""
        job = self._jobs.get(job_id)
        return job.snapshot() if job is not None and job.search_id == search_id else None

    async def _run(self, ws: Workspace, job: _Job, inp: SubmitKernelIn) -> None:
        v = job.view

        async def note(text: str) -> None:
            v.steps.append(cli_words(text, job.search))

        async def progress(message: str, fraction: float) -> None:
            v.steps.append(message)
            v.fraction = fraction

        try:
            out = await submit_kernel(ws, inp, progress, note)
        except KsearchError as e:  # refused after the checks (e.g. another intent is being refined)
            first, *_ = str(e).split("\n", 1)
            v.error, v.problems, v.state = (
                cli_words(first, job.search),
                list(getattr(e, "problems", [])),
                "refused",
            )
        except Exception as e:
            log.exception("a submission to search %s failed", job.search)
            v.error, v.state = f"the ksearch ui server failed: {type(e).__name__}: {e}", "failed"
        else:
            v.attempt_id, v.status, v.summary = out.attempt_id, out.evaluation.status, out.summary
            v.is_best, v.language, v.fraction, v.state = out.is_best, out.language, 1.0, "done"
        finally:
            v.seconds = time.monotonic() - job.started

    def _forget_old(self) -> None:
        done = [k for k, j in self._jobs.items() if j.view.state != "running"]
        for k in done[: max(0, len(self._jobs) - KEEP)]:
            del self._jobs[k]

    async def close(self) -> None:
        """Cancel the evaluations still running (the server is stopping) and wait for them to end."""
        running = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for t in running:
            t.cancel()
        for t in running:
            with contextlib.suppress(asyncio.CancelledError):
                await t
