"""Which timing protocol a search on a task uses: its owner's evaluator's by default, another only where the
task supports it.

A search optimizes the number its user is judged by. For an imported task that is the number its owner's
evaluator prints (GPU MODE's eval.py, KernelBench's evaluation, FlashInfer-Bench's runner), which can differ
from ksearch's own protocol by tens of percent on a launch-bound shape; native tasks (built-in ones, and task
files that declare ksearch's own extras) keep ksearch's protocol.
"""

from __future__ import annotations

from typing import cast

from ksearch.gpu.task import Task
from ksearch.tools.errors import ToolFailure
from ksearch.worldmodel.models import PROTOCOL_HOW, TIMING_PROTOCOLS, TimingProtocol


def is_native(task: Task) -> bool:
    """A built-in task or a task file with ksearch's own extras (WORKLOADS, TOLERANCE, META, COST)."""
    return task.builtin or (task.style == "kernelbench" and bool(task.extras.get("ksearch_extras")))


def _cudagraph_evaluator(task: Task) -> bool:
    ev = task.extras.get("evaluator") or {}
    return task.style == "gpumode" and ev.get("timer") == "cudagraph"


def unsupported(task: Task, protocol: str) -> str | None:
    """Why `task` cannot be timed by `protocol` (None: it can)."""
    if protocol == "ksearch":
        return None
    if protocol == "gpumode":
        if task.style != "gpumode":
            return "the gpumode protocol times a GPU MODE task folder's own inputs and evaluator settings"
        if _cudagraph_evaluator(task):
            return (
                "this task's eval.py times CUDA-graph replays, which ksearch does not reproduce for an arbitrary "
                "candidate"
            )
        return None
    if protocol == "kernelbench":
        return (
            None if task.style == "kernelbench" else "the kernelbench protocol times KernelBench-format tasks"
        )
    if protocol == "flashinfer":
        return (
            None
            if task.style == "flashinfer"
            else "the flashinfer protocol times FlashInfer-Bench definitions"
        )
    return f"unknown protocol {protocol!r}"


def default_protocol(task: Task) -> TimingProtocol:
    """The task's owner's protocol; ksearch's for native tasks and where the owner's cannot be reproduced."""
    if is_native(task):
        return "ksearch"
    owner = cast(TimingProtocol, task.style)  # each imported format's protocol bears its name
    return owner if unsupported(task, owner) is None else "ksearch"


def choose_protocol(task: Task, asked: str | None) -> TimingProtocol:
    """The protocol a new search on `task` uses: `asked`, or the owner's. Refused with what is accepted when the
    name is unknown or the task cannot be timed that way."""
    if asked is None:
        return default_protocol(task)
    if asked not in TIMING_PROTOCOLS:
        raise ToolFailure(f"unknown timing protocol {asked!r}; accepted: {', '.join(TIMING_PROTOCOLS)}")
    why = unsupported(task, asked)
    if why is not None:
        ok = [p for p in TIMING_PROTOCOLS if unsupported(task, p) is None]
        raise ToolFailure(
            f"timing protocol {asked!r} cannot time task {task.name!r}: {why}; accepted for this task: "
            f"{', '.join(ok)} (default: {default_protocol(task)})"
        )
    return cast(TimingProtocol, asked)


def protocol_line(protocol: str) -> str:
    """`timed: <protocol> (<how>)`, the line every face prints beside a figure."""
    return f"{protocol} ({PROTOCOL_HOW.get(protocol, 'unknown protocol')})"
