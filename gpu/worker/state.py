"""What a worker holds between requests (task runtime, loaded candidate) and its operations.

Every call into candidate code happens under torch.no_grad(). Candidate exceptions become structured
results (never an exception out of `handle`); a CUDA error that poisons the context sets `fatal`, and the
worker exits after replying.

The state and the calls into candidate code: gpu/worker/core.py; the operations: correctness
(gpu/worker/checks.py, with the kernel audit of gpu/worker/audit.py) and benchmark (gpu/worker/timing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksearch.gpu.timing import hardware
from ksearch.gpu.worker import simulated
from ksearch.gpu.worker.checks import CorrectnessChecks
from ksearch.gpu.worker.timing import Timing


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
            "audit": self.audit,
            "benchmark": self.benchmark,
            "hardware": lambda a: (
                simulated.ceilings(self.cfg["simulate"])
                if self.cfg.get("simulate")
                else hardware.measure_ceilings(self.device)
            ),
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
        """Draw ahead the inputs an evaluation will ask for: `pairs` of (workload, seed), a None seed for the
        task's own. Slow draws are kept and, where this process may write the draws store (a baseline worker: it
        never runs candidate code), written there. The first draw of each workload is made here; once a workload
        is known to be slow, its other draws go to up to `parallel` child processes (gpu/tasks/draws/child.py),
        fewer when its draws are large for `memory_bytes`. `sizes` (bytes of each workload's inputs, where known)
        sends the large workloads' draws to the children from the start. A format whose draws are quick keeps
        none: nothing is drawn."""
        assert self.task is not None, "set the task first"
        cache = self.rt.input_cache
        if cache is None:
            return {"kept": False, "drawn": 0}
        from ksearch.gpu.tasks.draws.ahead import DrawAhead

        ahead = DrawAhead(self, cache, int(args.get("parallel", 1)), int(args.get("memory_bytes", 0)))
        try:
            ahead.run(
                [(str(w), None if s is None else int(s)) for w, s in args.get("pairs", [])],
                {str(w): int(b) for w, b in (args.get("sizes") or {}).items()},
            )
        finally:
            ahead.close()
        self._sync()
        return {"kept": True, **ahead.summary()}

    def dryrun(self, args: dict[str, Any]) -> dict[str, Any]:
        """Record the candidate's launches on CPU tensors and compile its Triton kernels for a GPU target
        (a worker started with TRITON_INTERPRET=0 and no GPU; see ksearch.gpu.worker.dryrun)."""
        from ksearch.gpu.worker import dryrun

        return dryrun.run(
            self,
            args["task"],
            args["candidate"],
            args["workload"],
            args.get("arch", "sm_90"),
            float(args.get("budget_s", 120.0)),
        )
