"""What a worker holds between requests (task runtime, loaded candidate) and its operations.

Every call into candidate code happens under torch.no_grad(). Candidate exceptions become structured
results (never an exception out of `handle`); a CUDA error that poisons the context sets `fatal`, and the
worker exits after replying.

The state and the calls into candidate code: gpu/worker_core.py; the operations: correctness
(gpu/worker_checks.py, with the kernel audit of gpu/worker_audit.py) and benchmark (gpu/worker_timing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksearch.gpu import hardware
from ksearch.gpu.worker_checks import CorrectnessChecks
from ksearch.gpu.worker_timing import Timing


class WorkerState(CorrectnessChecks, Timing):
    """A worker's state and the operations its requests name."""

    @property
    def inputs_s(self) -> float:
        """Host seconds this worker's task runtimes have spent drawing inputs, across tasks."""
        return float(getattr(self.rt, "inputs_s", 0.0)) + self._inputs_before

    def handle(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "ping": lambda a: {"pong": True},
            "load": self.load,
            "task": self.set_task,
            "correctness": self.correctness,
            "benchmark": self.benchmark,
            "hardware": lambda a: hardware.measure_ceilings(self.device),
            "kernels": lambda a: {"kernels": self.kernel_resources()},
            "dryrun": self.dryrun,
            "draw": self.draw,
        }
        if op not in ops:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(ops)}")
        if self.watch is not None:
            self.watch.begin_call()
        return ops[op](args)

    def draw(self, args: dict[str, Any]) -> dict[str, Any]:
        """Draw ahead the inputs an evaluation will ask for: a workload's `seeds` and, with `own`, the task's own
        seed. Slow draws are kept, and written to the draws store when this process may write it (a baseline
        worker: it never runs candidate code). A format whose draws are quick keeps none: nothing is drawn."""
        assert self.task is not None, "set the task first"
        cache = self.rt.input_cache
        if cache is None:
            return {"kept": False, "drawn": 0}
        wl = self.task.workload(args["workload"])
        store = cache.store
        saved, loaded = (store.saved, store.loaded) if store is not None else (0, 0)
        drawn = 0
        for seed in args.get("seeds", []):
            self.rt.make_inputs(wl, int(seed), self.device)  # dropped at once: the cache keeps the host copy
            drawn += 1
        if args.get("own"):
            self.rt.task_inputs(wl, self.device)
            drawn += 1
        self._sync()
        return {
            "kept": True,
            "drawn": drawn,
            "stored": (store.saved - saved) if store is not None else 0,
            "from_store": (store.loaded - loaded) if store is not None else 0,
            "store_refused": list(store.refused[-5:]) if store is not None else [],
        }

    def dryrun(self, args: dict[str, Any]) -> dict[str, Any]:
        """Record the candidate's launches on CPU tensors and compile its Triton kernels for a GPU target
        (a worker started with TRITON_INTERPRET=0 and no GPU; see ksearch.gpu.dryrun)."""
        from ksearch.gpu import dryrun

        return dryrun.run(
            self,
            args["task"],
            args["candidate"],
            args["workload"],
            args.get("arch", "sm_90"),
            float(args.get("budget_s", 120.0)),
        )
