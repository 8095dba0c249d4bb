"""The worker's state between requests and what every operation builds on: the task's runtime, the loaded
candidate, the reference, the harness fingerprint and numeric settings, and `_call`, the one way into
candidate code (under torch.no_grad(); its exceptions become a CandidateFailure carrying a Fault).

A CUDA error that poisons the context sets `fatal`, and the worker exits after replying. The operations
are added by gpu/worker/audit.py, gpu/worker/checks.py and gpu/worker/timing.py; gpu/worker/state.py puts
them together.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.checks import guard
from ksearch.gpu.checks import outputs as checking
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.gpu.tasks.rt import interp_bf16, interp_pace
from ksearch.gpu.timing import hardware
from ksearch.gpu.timing import measure as timing
from ksearch.gpu.worker import faults, simulated
from ksearch.worldmodel.errors import KsearchError


def precision_snapshot() -> dict[str, Any]:
    snap: dict[str, Any] = {"default_dtype": str(torch.get_default_dtype())}
    with contextlib.suppress(Exception):
        snap["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    for name, getter in (
        ("cuda.matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
        ("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
        (
            "cuda.matmul.allow_fp16_reduced_precision_reduction",
            lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        ),
        (
            "cuda.matmul.allow_bf16_reduced_precision_reduction",
            lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        ),
    ):
        with contextlib.suppress(Exception):
            snap[name] = getter()
    return snap


def restore_precision(snap: dict[str, Any]) -> None:
    torch.set_default_dtype(getattr(torch, snap["default_dtype"].removeprefix("torch.")))
    with contextlib.suppress(Exception):
        torch.set_float32_matmul_precision(snap["float32_matmul_precision"])
    targets = {
        "cuda.matmul.allow_tf32": (torch.backends.cuda.matmul, "allow_tf32"),
        "cudnn.allow_tf32": (torch.backends.cudnn, "allow_tf32"),
        "cuda.matmul.allow_fp16_reduced_precision_reduction": (
            torch.backends.cuda.matmul,
            "allow_fp16_reduced_precision_reduction",
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": (
            torch.backends.cuda.matmul,
            "allow_bf16_reduced_precision_reduction",
        ),
    }
    for key, (obj, attr) in targets.items():
        if key in snap:
            with contextlib.suppress(Exception):
                setattr(obj, attr, snap[key])


class CandidateFailure(KsearchError):
    """Candidate code raised; `fault` says what, in terms a model can act on."""

    def __init__(self, fault: faults.Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class WorkerCore:
    """The state a worker keeps between requests and the calls every operation makes."""

    def __init__(self, device: torch.device, cfg: dict[str, Any]) -> None:
        self.device = device
        self.cpu_mode = device.type != "cuda"
        self.cfg = cfg
        self.fatal: str | None = None
        self._task_key: str | None = None
        self.task: Task | None = None
        self.rt: Any = None
        self._inputs_before = 0.0  # input-drawing seconds of earlier tasks' runtimes
        self.reference_s = (
            0.0  # host seconds spent running the reference for the checks (its GPU work waited for)
        )
        self._cand_id: str | None = None
        self.module: Any = None
        self._source = ""
        self._files: set[str] = set()
        self._cand_fns: dict[str, Callable[[list[Any]], Any]] = {}
        self._ref_fns: dict[str, Callable[[list[Any]], Any]] = {}
        self._compiled_refs: dict[tuple[str, str], Callable[[list[Any]], Any]] = {}  # by (workload, mode)
        self._preambles: dict[bool, timing.Preamble] = {}  # by "flush L2"
        self._unloads = 0
        # taken without torch._dynamo loaded: the wrappers it installs on first use are told apart (gpu/checks/guard.py)
        self._harness = guard.fingerprint()
        self._precision = precision_snapshot()
        # the kernel audit of the loaded candidate: (flags, whether only PyTorch ran), once per candidate
        self._audit_result: tuple[list[str], bool | None] | None = None
        self.watch: Any = None
        if self.cpu_mode:
            interp_bf16.install()  # a bf16 tl.dot is judged by its values, not its bits
            interp_pace.install()  # the interpreter's builtins listed once, not before every helper call
        if self.cpu_mode and "slot" in cfg:  # a pool's worker, in its scratch directory
            self._watch_interpreter()
        self._own_threads = {t.ident for t in threading.enumerate()}

    def stray_threads(self) -> list[str]:
        """Names of live threads started since the worker came up, once candidate code has run here. Candidate
        code starts them (a library it calls may too): the head then gives the next candidate a fresh process,
        which costs a start and is never wrong."""
        if self._cand_id is None:
            return []
        return [t.name for t in threading.enumerate() if t.ident not in self._own_threads][:8]

    def _watch_interpreter(self) -> None:
        """Under the Triton interpreter, keep a record of where time goes (read after a timeout)."""
        from triton import knobs

        if not knobs.runtime.interpret:
            return
        from ksearch.gpu.worker.interp_watch import Watch

        self.watch = Watch(Path.cwd())
        self.watch.install()

    # ------------------------------------------------------------------ plumbing
    def hello(self) -> dict[str, Any]:
        import os

        facts = {"pid": os.getpid(), **hardware.environment(self.device)}
        return simulated.hello(facts) if self.cfg.get("simulate") else facts

    def _sync(self) -> None:
        if not self.cpu_mode:
            torch.cuda.synchronize()

    def _healthy(self) -> bool:
        if self.cpu_mode:
            return True
        try:
            torch.cuda.synchronize()
            return float(torch.ones(4, device=self.device).sum()) == 4.0
        except Exception:  # any error here means the context is gone
            return False

    def _fault(self, exc: BaseException) -> faults.Fault:
        fault = faults.describe(exc, self._source, self._files)
        if not self.cpu_mode and fault.kind in ("cuda", "exception", "oom") and not self._healthy():
            fault.kind = "cuda"
            self.fatal = fault.message
        elif fault.kind == "oom" and not self.cpu_mode:
            gc.collect()
            torch.cuda.empty_cache()
        return fault

    # ------------------------------------------------------------------ task & candidate
    def set_task(self, args: dict[str, Any]) -> dict[str, Any]:
        """The task alone, no candidate: what a baseline worker needs."""
        self._set_task(args["task"])
        return {"ok": True}

    def _set_task(self, task_dict: dict[str, Any]) -> None:
        key = hashlib.sha256(json.dumps(task_dict, sort_keys=True, default=str).encode()).hexdigest()
        if key == self._task_key:
            return
        from ksearch.gpu.tasks.rt.runtime import TaskRuntime

        self.task = Task.model_validate(task_dict)
        self._inputs_before += float(getattr(self.rt, "inputs_s", 0.0))  # the count goes on across tasks
        self.rt = TaskRuntime(self.task)
        self._task_key = key
        # the reference's own module joins the watch before any candidate code runs with it
        self._harness = guard.fingerprint(self.rt.reference_module)
        self._ref_fns.clear()
        self._compiled_refs.clear()
        self._cand_fns.clear()

    def _unload(self) -> None:
        if self.module is not None:
            sys.modules.pop(getattr(self.module, "__name__", ""), None)
            # functions hold the module's dict and the dict holds them: clearing it breaks the cycle,
            # so reference counting frees the old candidate now (a full gc.collect costs ~0.1 s)
            self.module.__dict__.clear()
            self._unloads += 1
        self.module = None
        self._cand_id = None
        self._cand_fns.clear()
        if self._unloads % 16 == 0:
            gc.collect()
            if not self.cpu_mode:
                torch.cuda.empty_cache()

    def load(self, args: dict[str, Any]) -> dict[str, Any]:
        self._set_task(args["task"])
        cand = args["candidate"]
        if cand["id"] == self._cand_id and self.module is not None:
            return {"ok": True, "cached": True, "seconds": 0.0, "flags": []}
        self._unload()
        from ksearch.gpu import nvrtc
        from ksearch.gpu.tasks.rt.runtime import load_candidate_module

        nvrtc.REQUESTED.clear()
        self._audit_result = None
        self._source = cand["source"]
        self._files = set()
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                module = load_candidate_module(cand["source"], f"ksearch_{cand['id']}")
        except Exception as e:
            return {"ok": False, "fault": self._fault(e).to_dict(), "seconds": time.perf_counter() - t0}
        f = getattr(module, "__file__", None)
        if f:
            self._files.add(f)
        assert self.task is not None
        entry = self.task.candidate_entry
        if not hasattr(module, entry):
            return {
                "ok": False,
                "seconds": time.perf_counter() - t0,
                "fault": {
                    "kind": "compile",
                    "diagnostics": [],
                    "message": f"the module defines no `{entry}`; this task needs {contract.entry_line(self.task)}",
                },
            }
        self.module = module
        self._cand_id = cand["id"]
        return {
            "ok": True,
            "cached": False,
            "seconds": time.perf_counter() - t0,
            "flags": self._runtime_flags(),
        }

    def _runtime_flags(self) -> list[str]:
        """Cheat checks after candidate code ran: harness functions replaced, precision changed."""
        flags = []
        changed = guard.replaced(
            self._harness, guard.fingerprint(self.rt.reference_module if self.rt else None)
        )
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            flags.append(f"harness_tampered: the candidate replaced {shown}")
            # nothing this process measures can be trusted any more: leave after replying
            self.fatal = "the candidate replaced functions the harness relies on; the worker was replaced"
        snap = precision_snapshot()
        diff = [k for k in snap if snap[k] != self._precision.get(k)]
        if diff:
            flags.append(
                f"precision_changed: the candidate changed global numeric settings ({', '.join(diff)}); "
                "restored before the reference ran"
            )
            restore_precision(self._precision)
        return flags

    def _candidate_fn(self, wl: Any, copy: bool = True) -> Callable[[list[Any]], Any]:
        """`copy=False`: for timing, on data the caller copies (see TaskRuntime.build_candidate)."""
        key = wl.name if copy else f"{wl.name}\0uncopied"
        fn = self._cand_fns.get(key)
        if fn is None:
            try:
                with torch.no_grad():
                    fn = self.rt.build_candidate(self.module, wl, self.device, copy=copy)
            except Exception as e:
                raise CandidateFailure(self._fault(e)) from e
            self._cand_fns[key] = fn
        return fn

    def _compare(self, got: Any, exp: Any, wl: Any, inputs: list[Any], tol: Any) -> checking.OutputCheck:
        """One output judged by the task's own rule where it has one (GPU MODE's check_implementation, on
        the inputs the output came from), else by the tolerance: every check after the first trials uses this."""
        odd = checking.subclass_output(got, exp)  # before any check runs the subclass's own code
        if odd is not None:
            return odd
        custom = self.rt.check(got, exp, wl, inputs)
        if custom is None:
            return checking.compare_outputs(got, exp, tol)
        return checking.OutputCheck(
            custom.passed,
            custom.kind,
            custom.message,
            max_abs_err=custom.max_abs_err,
            max_rel_err=custom.max_rel_err,
            mismatches=custom.mismatches,
            numel=custom.numel,
        )

    # ------------------------------------------------------------------ reference & candidate calls
    def _reference_fn(self, wl: Any) -> Callable[[list[Any]], Any]:
        fn = self._ref_fns.get(wl.name)
        if fn is None:
            fn = self.rt.build_reference(wl, self.device)
            self._ref_fns[wl.name] = fn
        return fn

    def _reference(self, wl: Any, inputs: list[Any]) -> Any:
        restore_precision(self._precision)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self._reference_fn(wl)(checking.clone_inputs(inputs))
        self._sync()
        self.reference_s += time.perf_counter() - t0
        return out

    def _call(
        self,
        fn: Callable[[list[Any]], Any],
        inputs: list[Any],
        exp: Any | None = None,
        poison: str | None = None,
    ) -> Any:
        """Run candidate code; exceptions become CandidateFailure (with fatal set if CUDA is lost)."""
        try:
            if poison is not None:
                shapes = [
                    (tuple(e.shape), e.dtype) for e in checking.flatten(exp) if isinstance(e, torch.Tensor)
                ]
                checking.prefill_allocator(shapes, self.device, poison)
                with checking.poisoned_allocations(poison), torch.no_grad():
                    out = fn(inputs)
            else:
                with torch.no_grad():
                    out = fn(inputs)
            self._sync()
            return out
        except Exception as e:
            raise CandidateFailure(self._fault(e)) from e
