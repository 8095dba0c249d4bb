"""How long a prompt waits for its task's facts and the machine's hardware facts.

A search's task facts (shapes, dtypes, bytes, FLOPs, bound: its reference run once under fake tensors, cached per
task content) are probed in the background from the search's creation. The driver's prompts wait for them. A
prompt an assistant reads (MCP) waits at most `PROMPT_WAIT_S` in all, so that reading one stays quick; when that
runs out it says the facts are being derived and the next reading has them (the probe goes on in its thread).
The hardware facts share that deadline (`within_reading`): their measured ceilings wait for a worker, which the
background baselines may hold for a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import time
from collections.abc import Awaitable, Iterator
from typing import TypeVar

from ksearch.gpu.task import Task
from ksearch.gpu.tasks.facts import TaskFacts, task_facts

T = TypeVar("T")
PROMPT_WAIT_S = 0.8
"""The longest an assistant's prompt reading waits for the task's facts."""
def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number of seconds; accepted: e.g. {default:g}") from None
    if not 0 <= value <= 600:
        raise ValueError(f"{name}={raw!r} is out of range; accepted: 0 to 600 seconds")
    return value


ANALYSE_WAIT_S = _seconds("KSEARCH_ANALYSE_WAIT_S", 15.0)
"""The longest the analyse prompt (a search's first, whose facts the first intents are planned from) waits: a task's
first facts take seconds (a subprocess runs its reference once), more on a loaded machine, and on a GPU machine the
ceilings' measurement too; a host that reads it once per round of calls plans its first intents from it."""

# the monotonic time by which a bounded reading must have its facts; None: wait for them
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "ksearch_facts_deadline", default=None
)


# a bounded reading's facts, read once per task: a second reader of the same reading (the bank's match after the task
# brief) gets what the first got, not a fresh read with the deadline spent (it read nothing, and the prompt lost the
# bank's lessons)
_read: contextvars.ContextVar[dict[str, asyncio.Future[TaskFacts]] | None] = contextvars.ContextVar(
    "ksearch_facts_read", default=None
)


@contextlib.contextmanager
def bounded(wait_s: float = PROMPT_WAIT_S) -> Iterator[None]:
    """Within this block, `facts_for` waits at most `wait_s` in all (every facts reading of one prompt shares it), and
    reads each task's facts once."""
    token = _deadline.set(time.monotonic() + wait_s)
    read = _read.set({})
    try:
        yield
    finally:
        _read.reset(read)
        _deadline.reset(token)


async def within_reading(aw: Awaitable[T]) -> T | None:
    """`aw`'s result; None when a bounded reading's deadline passes first (the work goes on, shielded, and a later
    reading finds it done). Unbounded (the driver's prompts): waits."""
    deadline = _deadline.get()
    if deadline is None:
        return await aw
    job = asyncio.ensure_future(aw)
    # a job given up on may still fail; its error is for the reading that next asks, not for the loop's log
    job.add_done_callback(lambda j: j.cancelled() or j.exception())
    left = deadline - time.monotonic()
    if left <= 0:
        # the reading's time is spent, but what is ready (cached facts) is still read: one turn of the loop lets
        # the job answer (a zero wait_for never starts it, and the facts read as pending however long they were
        # known)
        await asyncio.sleep(0)
        return job.result() if job.done() else None
    try:
        return await asyncio.wait_for(asyncio.shield(job), left)
    except TimeoutError:
        return None


async def facts_for(task: Task) -> TaskFacts | None:
    """The task's facts; None when a bounded reading ran out of time first (the same answer to every reader of it)."""
    if _deadline.get() is None:
        return await asyncio.to_thread(task_facts, task)
    read = _read.get()
    key = f"{task.name}:{task.source_path}"
    job = read.get(key) if read is not None else None
    if job is None:
        job = asyncio.ensure_future(asyncio.to_thread(task_facts, task))
        if read is not None:
            read[key] = job
    return await within_reading(job)
