"""A child process of a baseline worker that draws inputs straight into the draws store, in parallel with its
siblings: a slow generator (TriMul's CPU Cauchy draws, one core each) then costs the longest draw rather than
their sum. Each child builds the task's runtime once and draws what it is handed, exactly as the worker would
(the same runtime code, the same seeding), keeping nothing in memory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

_STATE: dict[str, Any] = {}


def start(store_dir: str, task: dict[str, Any]) -> None:
    """The pool's initializer: this process's store (writable) and the task's runtime."""
    import torch

    from ksearch.gpu.task import Task
    from ksearch.gpu.tasks.draws import input_cache
    from ksearch.gpu.tasks.draws.store import DrawStore
    from ksearch.gpu.tasks.rt.runtime import TaskRuntime

    input_cache.STORE = DrawStore(Path(store_dir), writable=True)
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    if device != "cpu":
        torch.cuda.set_device(0)
    rt = TaskRuntime(Task.model_validate(task))
    rt.input_cache.budget = 0  # written to the store, then dropped: the worker's process serves it from there
    _STATE.update(rt=rt, device=device)


def draw(workload: str, seed: int | None) -> dict[str, Any]:
    """Draw one (workload, seed) (None: the task's own seed); what it took and whether the store kept it."""
    rt, device = _STATE["rt"], _STATE["device"]
    store = rt.input_cache.store
    saved = store.saved
    wl = rt.task.workload(workload)
    t0 = time.perf_counter()
    data = rt.task_inputs(wl, device) if seed is None else rt.make_inputs(wl, seed, device)
    del data
    return {"seconds": time.perf_counter() - t0, "stored": store.saved > saved}
