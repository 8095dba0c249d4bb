"""What a worker holds between requests (task runtime, loaded candidate) and its operations.

Every call into candidate code happens here, under torch.no_grad(). Candidate exceptions become
structured results (never an exception out of `handle`); a CUDA error that poisons the context
sets `fatal`, and the worker exits after replying.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from gpu import checking, faults, guard, hardware, timing
from gpu.kernel_names import ran_own_kernel
from gpu.task import Task
from gpu.tasks.rt_common import clone_data
from worldmodel.models import EvalSettings

# Achieved / attainable above this is implausible: the ceilings are measured library rates, and the
# hardware's true peak lies only a little above them.
IMPLAUSIBLE_ROOFLINE = 1.15
_GLOBAL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[^(;{]*?(\w+)\s*\(")


def _precision_snapshot() -> dict[str, Any]:
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


def _restore_precision(snap: dict[str, Any]) -> None:
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


def _tensor_bytes(xs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))


class CandidateFailure(Exception):
    def __init__(self, fault: faults.Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class WorkerState:
    def __init__(self, device: torch.device, cfg: dict[str, Any]) -> None:
        self.device = device
        self.cpu_mode = device.type != "cuda"
        self.cfg = cfg
        self.fatal: str | None = None
        self._task_key: str | None = None
        self.task: Task | None = None
        self.rt: Any = None
        self._cand_id: str | None = None
        self.module: Any = None
        self._source = ""
        self._files: set[str] = set()
        self._cand_fns: dict[str, Callable[[list[Any]], Any]] = {}
        self._ref_fns: dict[str, Callable[[list[Any]], Any]] = {}
        self._compiled_refs: dict[tuple[str, str], Callable[[list[Any]], Any]] = {}  # by (workload, mode)
        self._preambles: dict[bool, timing.Preamble] = {}  # by "flush L2"
        self._unloads = 0
        guard.prepare()
        self._harness = guard.fingerprint()
        self._precision = _precision_snapshot()
        # the kernel audit of the loaded candidate: (flags, whether only PyTorch ran), once per candidate
        self._audit_result: tuple[list[str], bool | None] | None = None
        self.watch: Any = None
        if self.cpu_mode and "slot" in cfg:  # a pool's worker, in its scratch directory
            self._watch_interpreter()

    def _watch_interpreter(self) -> None:
        """Under the Triton interpreter, keep a record of where time goes (read after a timeout)."""
        from triton import knobs

        if not knobs.runtime.interpret:
            return
        from gpu.interp_watch import Watch

        self.watch = Watch(Path.cwd())
        self.watch.install()

    # ------------------------------------------------------------------ plumbing
    def hello(self) -> dict[str, Any]:
        import os

        return {"pid": os.getpid(), **hardware.environment(self.device)}

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
        }
        if op not in ops:
            raise ValueError(f"unknown op {op!r}; known: {', '.join(ops)}")
        if self.watch is not None:
            self.watch.begin_call()
        return ops[op](args)

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
        from gpu.runtime import TaskRuntime

        self.task = Task.model_validate(task_dict)
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
        from gpu import nvrtc
        from gpu.runtime import load_candidate_module

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
                    "message": f"the module defines no `{entry}`; this task needs it",
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
        snap = _precision_snapshot()
        diff = [k for k in snap if snap[k] != self._precision.get(k)]
        if diff:
            flags.append(
                f"precision_changed: the candidate changed global numeric settings ({', '.join(diff)}); "
                "restored before the reference ran"
            )
            _restore_precision(self._precision)
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

    def _degenerate_notes(self, wl: Any, exp: Any, inputs: list[Any], tol: Any) -> list[str]:
        """Trivial answers the task's rule accepts on these inputs (see checking.degenerate_answers)."""
        if not self.rt.has_own_check:
            return checking.degenerate_answers(exp, inputs, tol)
        from gpu.inputs import as_outputs, degenerate_findings

        return [
            f"degenerate_reference: output {f.output} would pass the task's own check as {f.label}; this "
            "workload cannot tell a wrong kernel from a right one, so such an answer is also checked on extra "
            "inputs with signed values"
            for f in degenerate_findings(self.rt, wl, inputs, as_outputs(exp))
        ]

    def _reference_fn(self, wl: Any) -> Callable[[list[Any]], Any]:
        fn = self._ref_fns.get(wl.name)
        if fn is None:
            fn = self.rt.build_reference(wl, self.device)
            self._ref_fns[wl.name] = fn
        return fn

    def _reference(self, wl: Any, inputs: list[Any]) -> Any:
        _restore_precision(self._precision)
        with torch.no_grad():
            out = self._reference_fn(wl)(checking.clone_inputs(inputs))
        self._sync()
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

    # ------------------------------------------------------------------ correctness
    def correctness(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.task is not None and self.module is not None, "load a candidate first"
        wl = self.task.workload(args["workload"])
        seed, trials = int(args["seed"]), max(1, int(args.get("trials", 3)))
        tol = self.rt.tolerance()
        notes: list[str] = []
        base = {"workload": wl.name, "trials": 0}
        try:
            fn = self._candidate_fn(wl)
        except CandidateFailure as cf:
            return self._failure(base, cf.fault)
        agg = {"max_abs_err": 0.0, "max_rel_err": None, "mismatches": 0, "numel": 0}
        for t in range(trials):
            inputs = self.rt.make_inputs(wl, seed + t, self.device)
            exp = self._reference(wl, inputs)
            if t == 0:
                notes += self._degenerate_notes(wl, exp, inputs, tol)
            ref_after = checking.clone_inputs(inputs)
            with torch.no_grad():
                self._reference_fn(wl)(ref_after)  # the reference's own effect on its inputs
            self._sync()
            cand_in = checking.clone_inputs(inputs)
            try:
                got = self._call(fn, cand_in, exp, poison="nan")
            except CandidateFailure as cf:
                return self._failure({**base, "trials": t + 1}, cf.fault)
            res = self._judge(fn, wl, inputs, got, exp, cand_in, ref_after, tol)
            if isinstance(res, dict):  # a failure, fully described
                res.update(workload=wl.name, trials=t + 1)
                return {"correctness": res, "notes": notes, "flags": self._runtime_flags()}
            agg["max_abs_err"] = max(agg["max_abs_err"], res.max_abs_err or 0.0)
            if res.max_rel_err is not None:
                agg["max_rel_err"] = max(agg["max_rel_err"] or 0.0, res.max_rel_err)
            agg["mismatches"] += res.mismatches or 0
            agg["numel"] += res.numel or 0
        if any(n.startswith("degenerate_reference:") for n in notes):
            trivial = self._probe(fn, wl, inputs, seed, tol, notes)
            if trivial is not None:
                trivial.update(workload=wl.name, trials=trials)
                return {"correctness": trivial, "notes": notes, "flags": self._runtime_flags()}
        flags = self._runtime_flags()
        pure: bool | None = None
        if args.get("audit", True):
            if self._audit_result is None:
                audit = self._audit_interpreted if self.cpu_mode else self._audit
                self._audit_result = audit(fn, self.rt.make_inputs(wl, seed, self.device))
            # every evaluation of this candidate gets the audit's answer, also one served by a warm worker
            audit_flags, pure = self._audit_result
            flags += audit_flags
        return {
            "correctness": {**base, "trials": trials, "passed": True, "kind": "ok", **agg},
            "notes": notes,
            "flags": flags,
            "pure_pytorch": pure,
        }

    def _judge(
        self,
        fn: Callable[[list[Any]], Any],
        wl: Any,
        inputs: list[Any],
        got: Any,
        exp: Any,
        cand_in: list[Any],
        ref_after: list[Any],
        tol: Any,
    ) -> checking.OutputCheck | dict[str, Any]:
        odd = checking.subclass_output(got, exp)  # before any check runs the subclass's own code
        if odd is not None:
            return {"passed": False, "kind": odd.kind, "message": odd.message}
        custom = self.rt.check(got, exp, wl, inputs)
        if custom is not None:
            d = custom.model_dump() if hasattr(custom, "model_dump") else dict(custom)
            if not d.get("passed"):
                if d.get("kind") in ("wrong_values", "nan_inf") and d.get("caught_by") is None:
                    d["caught_by"] = "task_check"
                return d
            res = checking.OutputCheck(
                True,
                "ok",
                max_abs_err=d.get("max_abs_err"),
                max_rel_err=d.get("max_rel_err"),
                mismatches=d.get("mismatches"),
                numel=d.get("numel"),
            )
        else:
            res = checking.compare_outputs(got, exp, tol)
        if not res.passed and res.kind in ("nan_inf", "wrong_values"):
            self._trace_poison(fn, inputs, exp, res)
        if res.passed:
            same, msg = checking.inputs_equal(cand_in, ref_after)
            if not same:
                return {
                    "passed": False,
                    "kind": "input_mutated",
                    "message": msg + " (inputs must be left as the reference leaves them)",
                }
        if not res.passed:
            same, msg = checking.inputs_equal(cand_in, ref_after)
            out = {
                "passed": False,
                "kind": res.kind,
                "message": res.message,
                "caught_by": res.caught_by,
                **res.stats(),
            }
            if not same:
                out["message"] += f"; also, {msg}"
            return out
        return res

    def _probe(
        self,
        fn: Callable[[list[Any]], Any],
        wl: Any,
        inputs: list[Any],
        seed: int,
        tol: Any,
        notes: list[str],
    ) -> dict[str, Any] | None:
        """The workload's own inputs accept a trivial answer: run once more on signed inputs (gpu.degenerate)
        and fail a candidate whose output there is trivial where the reference's is not."""
        from gpu import degenerate

        probe = degenerate.signed_inputs(inputs, seed)
        try:
            exp = self._reference(wl, probe)
        except Exception as e:  # the reference is defined only on its own inputs: nothing to compare
            notes.append(
                f"note: the trivial-answer probe was skipped: the reference failed on signed inputs "
                f"({type(e).__name__}: {str(e)[:200]})"
            )
            return None
        try:
            got = self._call(fn, checking.clone_inputs(probe))
        except CandidateFailure as cf:
            return {
                "passed": False,
                "kind": "degenerate",
                "message": f"the candidate raised on extra inputs with signed values, where the reference did "
                f"not ({cf.fault.message[:1500]}); {degenerate.WHY}",
            }
        odd = checking.subclass_output(got, exp)
        if odd is not None:
            return {"passed": False, "kind": odd.kind, "message": odd.message}
        if self.rt.has_own_check and self._compare(got, exp, wl, probe, tol).passed:
            return None  # right on the probe by the task's own rule
        why = degenerate.trivial_output(got, exp, probe, tol)
        return None if why is None else {"passed": False, "kind": "degenerate", "message": why}

    def _trace_poison(
        self, fn: Callable[[list[Any]], Any], inputs: list[Any], exp: Any, res: checking.OutputCheck
    ) -> None:
        """Re-run with a finite sentinel poison and update `res`: elements that show it were never written
        (unwritten); NaN/Inf that turn finite followed the NaN poison, so the output read memory it never
        initialised."""
        idx = res.output_index or 0
        e = checking.flatten(exp)[idx]
        if not isinstance(e, torch.Tensor):
            return
        try:
            got2 = self._call(fn, checking.clone_inputs(inputs), exp, poison="sentinel")
        except CandidateFailure:
            return
        g = checking.flatten(got2)[idx] if idx < len(checking.flatten(got2)) else None
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            return
        sentinel = checking.sentinel_for(e.dtype)
        hit = (g == sentinel) & (e != sentinel)
        if res.nan_positions is not None:  # NaN/Inf first time: unwritten if the sentinel shows there now
            hit = hit & res.nan_positions
            suspects = int(res.nan_positions.sum())
        else:  # wrong values (e.g. integer outputs): unwritten if the sentinel explains most mismatches
            suspects = res.mismatches or 0
        n = int(hit.sum())
        if n and n >= 0.5 * suspects:
            first = int(hit.flatten().nonzero()[0])
            res.kind, res.caught_by = "unwritten", "poison_unwritten"
            res.message = (
                f"output {idx}: {n} of {e.numel()} elements were never written (they kept the poison the "
                f"harness puts in fresh allocations; first at index {checking.unravel(first, tuple(e.shape))})"
            )
            return
        if res.nan_positions is not None:
            followed = int((res.nan_positions & torch.isfinite(g)).sum())
            if followed and followed >= 0.5 * suspects:
                res.caught_by = "poison_read"
                res.message += (
                    f"; they follow the poison the harness puts in fresh allocations ({followed} turn finite "
                    "with a finite poison): the output is computed from memory the candidate never initialised"
                )

    def _failure(self, base: dict[str, Any], fault: faults.Fault) -> dict[str, Any]:
        kind = {"cuda": "crash"}.get(fault.kind, "exception")
        return {
            "correctness": {**base, "passed": False, "kind": kind, "message": fault.message},
            "fault": fault.to_dict(),
            "notes": [],
            "flags": [],
        }

    def dryrun(self, args: dict[str, Any]) -> dict[str, Any]:
        """Record the candidate's launches on CPU tensors and compile its Triton kernels for a GPU target
        (a worker started with TRITON_INTERPRET=0 and no GPU; see gpu.dryrun)."""
        from gpu import dryrun

        return dryrun.run(
            self,
            args["task"],
            args["candidate"],
            args["workload"],
            args.get("arch", "sm_90"),
            float(args.get("budget_s", 120.0)),
        )

    # ------------------------------------------------------------------ kernel audit & resources
    def _triton_functions(self) -> list[Any]:
        try:
            from triton.runtime.jit import JITFunction
        except ImportError:
            return []
        out = []
        for v in list(vars(self.module).values()):
            seen = 0
            while v is not None and seen < 5:
                if isinstance(v, JITFunction):
                    out.append(v)
                    break
                v = getattr(v, "fn", None)
                seen += 1
        return out

    def own_kernel_names(self) -> set[str]:
        from gpu import nvrtc

        names = {
            getattr(f, "__name__", None) or getattr(getattr(f, "fn", None), "__name__", "")
            for f in self._triton_functions()
        }
        names |= {k.name for k in nvrtc.REQUESTED}
        names |= set(_GLOBAL_NAME.findall(self._source))
        return {n for n in names if n}

    def _audit(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> tuple[list[str], bool | None]:
        """Profile one call: the candidate's own kernels must be among those that ran.

        Returns the flags and whether no kernel of the candidate's own ran (it computes with PyTorch ops);
        None when the profiler could not tell."""
        own = self.own_kernel_names()
        try:
            from torch.autograd import DeviceType
            from torch.profiler import ProfilerActivity, profile

            with (
                warnings.catch_warnings(),
                profile(activities=[ProfilerActivity.CUDA]) as prof,
                torch.no_grad(),
            ):
                warnings.simplefilter("ignore")  # the profiler's notes would clutter the worker's stderr
                fn(inputs)
                torch.cuda.synchronize()
            launched = sorted(
                {
                    e.name
                    for e in prof.events()
                    if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))
                }
            )
        except Exception as e:  # the profiler is an extra check; its failure is reported, not fatal
            return [f"note: kernel audit skipped ({type(e).__name__}: {str(e)[:200]})"], None
        if not launched:
            return [
                "no_kernel_ran: a call launched no GPU kernel at all (a cached or host-side result?)"
            ], True
        if not ran_own_kernel(launched, own):  # exact identifiers, not substrings
            # defining no kernel is no cheat (it is labelled pure PyTorch); defining one and not running it is
            flags = (
                [
                    f"no_custom_kernel: none of the candidate's kernels ({', '.join(sorted(own))}) ran during "
                    f"a call; it launched only: {', '.join(launched[:8])}"
                ]
                if own
                else []
            )
            return flags, True
        return [], False

    def _audit_interpreted(
        self, fn: Callable[[list[Any]], Any], inputs: list[Any]
    ) -> tuple[list[str], bool | None]:
        """CPU mode's audit: under the Triton interpreter there is no profiler, so count launches of
        the candidate's own @triton.jit functions (autotuned ones too) during one call instead.

        Returns the flags and whether none of them was launched (None when that cannot be told)."""
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:
            return [], None
        name = getattr(self.module, "__name__", None)
        own = sorted(
            v.__name__
            for v in vars(self.module).values()
            if isinstance(v, InterpretedFunction) and getattr(v.fn, "__module__", None) == name
        )
        with _count_launches(InterpretedFunction, name) as launched:
            try:
                self._call(fn, inputs)
            except CandidateFailure as cf:
                return [f"note: kernel audit skipped (the call failed: {cf.fault.message[:200]})"], None
        if launched:
            return [], False
        if not own:  # defines no kernel: labelled pure PyTorch, not a cheat
            return [], True
        return [
            f"no_custom_kernel: none of the candidate's Triton kernels ({', '.join(own)}) was launched "
            "during a call (counted under the Triton interpreter); the work was done some other way"
        ], True

    def kernel_resources(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for jf in self._triton_functions():
            name = getattr(getattr(jf, "fn", None), "__name__", None) or str(jf)
            for ck in _triton_compiled(jf):
                with contextlib.suppress(Exception):
                    if getattr(ck, "n_regs", None) is None and hasattr(ck, "_init_handles"):
                        ck._init_handles()
                md = getattr(ck, "metadata", None)
                spills = getattr(ck, "n_spills", None)
                out.append(
                    {
                        "name": name,
                        "registers": getattr(ck, "n_regs", None),
                        "spill_stores_bytes": None if spills is None else int(spills) * 4,
                        "spill_loads_bytes": None,
                        "shared_bytes": getattr(md, "shared", None),
                        "stack_bytes": None,
                        "num_warps": getattr(md, "num_warps", None),
                        "num_stages": getattr(md, "num_stages", None),
                    }
                )
        from gpu import nvrtc

        seen = set()
        for k in nvrtc.REQUESTED:
            if k.source_hash in seen:
                continue
            seen.add(k.source_hash)
            with contextlib.suppress(Exception):
                a = k.attributes()
                out.append(
                    {
                        "name": k.name,
                        "registers": a["registers"],
                        "shared_bytes": a["shared_bytes"],
                        "stack_bytes": a["local_bytes"],
                        "spill_stores_bytes": None,
                        "spill_loads_bytes": None,
                        "num_warps": None,
                        "num_stages": None,
                    }
                )
        return out

    # ------------------------------------------------------------------ timing
    def _compiled_ref(self, wl: Any, mode: str) -> Callable[[list[Any]], Any]:
        """The reference compiled as a user compiles it for this one shape: static, and fresh.

        Every workload's reference runs through the same Python code, and dynamo keeps its caches and its
        automatic-dynamic state per code object: a second shape would be recompiled with symbolic sizes,
        a generic kernel (rmsnorm on an H200: 580 us where a compile for that shape gives 330 us).
        `dynamic=False` keeps every size a constant; the reset before each compile makes it the first of
        the process (so a task with many workloads cannot reach dynamo's recompile limit either, past
        which it would run eager code)."""
        comp = self._compiled_refs.get((wl.name, mode))
        if comp is None:
            torch._dynamo.reset()
            self._compiled_refs.clear()  # the reset dropped their code: they would compile again anyway
            # data copied per call is copied outside the timed region (_time_copied): not compiled in
            ref = self.rt.build_reference_uncopied(wl, self.device) if self.rt.copies_per_call else None
            comp = torch.compile(ref or self._reference_fn(wl), dynamic=False, mode=mode)
            self._compiled_refs[(wl.name, mode)] = comp
        return comp

    def _input_sets(self, wl: Any, seed: int, wanted: int) -> list[list[Any]]:
        first = self.rt.make_inputs(wl, seed, self.device)
        sets = [first]
        if not self.cpu_mode:
            free, _total = torch.cuda.mem_get_info(self.device)
            per = max(_tensor_bytes(first), 1)
            wanted = max(1, min(wanted, int(0.3 * free // per)))
        for j in range(1, wanted):
            sets.append(self.rt.make_inputs(wl, seed + j, self.device))
        return sets

    def _time_copied(
        self, raw: Callable[[list[Any]], Any], sets: list[list[Any]], st: EvalSettings
    ) -> timing.TimingResult:
        """Time `raw` (a call on the data itself) on a fresh copy of a set for every call, the copy made
        outside the timed region: the call is isolated as the copying call is, and only its own work is timed."""

        def fresh(rep: int) -> list[Any]:
            return clone_data(sets[rep % len(sets)])

        return self._time(raw, [], st, before_each=fresh)

    def _time(
        self,
        fn: Callable[[list[Any]], Any],
        sets: list[list[Any]],
        st: EvalSettings,
        before_each: Callable[[int], list[Any]] | None = None,
        after_each: Callable[[int, Any], None] | None = None,
    ) -> timing.TimingResult:
        def call(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return fn(inputs)

        if self.cpu_mode:
            return timing.time_cpu(
                call, sets, reps=min(st.min_reps, 3), before_each=before_each, after_each=after_each
            )
        pre = self._preambles.get(st.flush_l2)
        if pre is None:
            pre = self._preambles[st.flush_l2] = timing.Preamble(self.device, flush=st.flush_l2)
        return timing.time_gpu(
            call,
            sets,
            warmup=st.warmup,
            min_reps=st.min_reps,
            max_reps=st.max_reps,
            budget_s=st.time_budget_s,
            target_rel_ci=st.target_rel_ci,
            preamble=pre,
            before_each=before_each,
            after_each=after_each,
        )

    def benchmark(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.task is not None
        wl = self.task.workload(args["workload"])
        st = EvalSettings.model_validate(args["settings"])
        which = args.get("which", "candidate")
        seed = st.seed + 1000  # timing inputs differ from the correctness trials
        like_gpumode = st.timing_protocol == "gpumode" and not self.cpu_mode
        copied = self.rt.copies_per_call
        if which == "eager":
            ref = self.rt.build_reference_uncopied(wl, self.device) if copied else self._reference_fn(wl)
            if like_gpumode:
                _restore_precision(self._precision)
                return self._time_gpumode(ref, wl, st, seed)[0]
            sets = self._input_sets(wl, seed, st.input_sets)
            _restore_precision(self._precision)
            return (self._time_copied(ref, sets, st) if copied else self._time(ref, sets, st)).to_dict()
        if which == "compile":
            ref_mod = self.rt.reference_module
            clean = not guard.replaced(self._harness, guard.fingerprint(ref_mod))
            comp = self._compiled_ref(wl, st.compile_mode)
            if like_gpumode:
                _restore_precision(self._precision)
                out = self._time_gpumode(comp, wl, st, seed)[0]
            else:
                sets = self._input_sets(wl, seed, st.input_sets)
                _restore_precision(self._precision)
                out = (self._time_copied(comp, sets, st) if copied else self._time(comp, sets, st)).to_dict()
            out["compile_mode"] = st.compile_mode
            if clean:  # what torch.compile itself installs is the harness's doing, not a candidate's
                self._harness = guard.fingerprint(ref_mod)
            return out
        assert self.module is not None, "load a candidate first"
        try:
            fn = self._candidate_fn(wl)
            raw = self._candidate_fn(wl, copy=False) if copied else fn
        except CandidateFailure as cf:
            return {"fault": cf.fault.to_dict()}
        tol = self.rt.tolerance()
        flags: list[str] = []
        try:
            if like_gpumode:
                out, pristine = self._time_gpumode(raw, wl, st, seed, tol, flags)
                if st.final:
                    pristine = self.rt.make_inputs(wl, seed + 90_000, self.device)
                flags += self._recheck(fn, wl, [pristine], [self._reference(wl, pristine)], tol, seed)
                return self._assemble(out, flags, wl, args, out["median_us"])
            if st.final:
                res = self._time_final(raw, wl, st, tol, flags)
                sets = [self.rt.make_inputs(wl, seed + 90_000, self.device)]
                flags += self._recheck(fn, wl, sets, [self._reference(wl, sets[0])], tol, seed)
            else:
                sets = self._input_sets(wl, seed, st.input_sets)
                refs = [self._reference(wl, s) for s in sets]
                res = self._time_copied(raw, sets, st) if copied else self._time(fn, sets, st)
                flags += self._recheck(fn, wl, sets, refs, tol, seed)
        except CandidateFailure as cf:
            return {"fault": cf.fault.to_dict()}
        except Exception as e:  # candidate code raised inside the timing loop
            fault = self._fault(e)
            return {"fault": fault.to_dict()}
        return self._assemble(res.to_dict(), flags, wl, args, res.summary.median)

    def _assemble(
        self, out: dict[str, Any], flags: list[str], wl: Any, args: dict[str, Any], median: float
    ) -> dict[str, Any]:
        out["flags"] = out["flags"] + flags + self._runtime_flags()
        ceilings = args.get("ceilings") or {}
        cost = self.rt.cost(wl) if hasattr(self.rt, "cost") else None
        if cost is not None and ceilings and not self.cpu_mode:
            frac = hardware.roofline_fraction(median, cost.flops, cost.bytes, cost.dtype, ceilings)
            out["roofline_fraction"] = frac
            if frac is not None and frac > IMPLAUSIBLE_ROOFLINE:
                out["flags"].append(
                    f"implausible_speed: {median:.2f} us is {frac:.2f}x the attainable time at this "
                    "GPU's measured ceilings (work skipped or not timed?)"
                )
        return out

    def _time_gpumode(
        self,
        raw: Callable[[list[Any]], Any],
        wl: Any,
        st: EvalSettings,
        seed: int,
        tol: Any = None,
        flags: list[str] | None = None,
    ) -> tuple[dict[str, Any], list[Any]]:
        """Time `raw` (a call on the data itself) as the task's GPU MODE evaluator does (timing.time_like_gpumode,
        with the timer, L2 flush and stop rule its eval.py uses); with `flags`, outputs are checked by the
        task's rule as that evaluator checks them. Returns the timing and a copy of the first data taken before
        any call (for the cheat checks that follow)."""
        ev = (self.task.extras.get("evaluator") if self.task is not None else None) or {}
        # the task's own seeds, as its evaluator benchmarks them (its leaderboard mode draws new ones)
        own = None if st.final else self.rt.task_inputs(wl, self.device)

        def inputs_for(k: int) -> list[Any]:
            if k == 0 and own is not None:
                return own
            return self.rt.make_inputs(wl, seed + 13 * k, self.device)  # the evaluator adds 13 per call

        check = None
        if flags is not None:

            def check(data: list[Any], out: Any) -> str | None:
                exp = None if self.rt.has_own_check else self._reference(wl, data)
                chk = self._compare(out, exp, wl, data, tol)
                return None if chk.passed else f"{chk.kind}: {chk.message}"

        first: list[list[Any]] = []

        def inputs_kept(k: int) -> list[Any]:
            data = inputs_for(k)
            if k == 0:
                first.append(clone_data(data))
            return data

        clear = timing.GpuModeL2Clear(self.device) if ev.get("clears_l2") else None
        res, failure = timing.time_like_gpumode(
            raw,
            inputs_kept,
            copy=clone_data,
            check=check,
            fresh_each=st.final,
            timer="host" if ev.get("timer") == "host" else "events",
            clear_l2=clear,
            max_time_s=30.0 if st.final else 10.0,
            rel_err_stop=float(ev.get("rel_err_stop", 0.001)),
        )
        out = res.to_dict()
        out["protocol"] = "gpumode"
        if ev.get("timer") == "cudagraph":
            out["flags"].append(
                "note: this task's evaluator times CUDA-graph replays; the gpumode protocol timed each call "
                "between CUDA events instead"
            )
        if failure is not None and flags is not None:
            flags.append(
                f"recheck_failed: a call timed as the task's evaluator times it gave a wrong answer ({failure})"
            )
        return out, first[0]

    def _time_final(
        self, fn: Callable[[list[Any]], Any], wl: Any, st: EvalSettings, tol: Any, flags: list[str]
    ) -> timing.TimingResult:
        """Fresh inputs for every timed call, each output checked against the reference by the task's rule.

        `fn` calls on the data itself where the format copies per call: it gets a copy, the check the original."""
        expected: dict[int, tuple[Any, list[Any]]] = {}
        copied = self.rt.copies_per_call

        def before(rep: int) -> list[Any]:
            inputs = self.rt.make_inputs(wl, st.seed + 50_000 + rep, self.device)
            if rep >= 0:  # negative: warm-up and host-check calls, not judged
                expected[rep] = (self._reference(wl, inputs), inputs)
            return clone_data(inputs) if copied else inputs

        def after(rep: int, out: Any) -> None:
            exp, inputs = expected.pop(rep)
            chk = self._compare(out, exp, wl, inputs, tol)
            if not chk.passed and not any(f.startswith("final_recheck_failed") for f in flags):
                flags.append(
                    f"final_recheck_failed: a timed call on fresh inputs gave a wrong answer ({chk.kind}: "
                    f"{chk.message})"
                )

        return self._time(fn, [], st, before_each=before, after_each=after)

    def _recheck(
        self,
        fn: Callable[[list[Any]], Any],
        wl: Any,
        sets: list[list[Any]],
        refs: list[Any],
        tol: Any,
        seed: int,
    ) -> list[str]:
        """Cheat checks after timing: outputs on the timed inputs, and new data at the same addresses."""
        flags = []
        for j, (s, exp) in enumerate(zip(sets, refs, strict=True)):
            got = self._call(fn, s)
            chk = self._compare(got, exp, wl, s, tol)
            if not chk.passed:
                flags.append(
                    f"recheck_failed: on timed input set {j} the output is wrong after timing "
                    f"({chk.kind}: {chk.message})"
                )
                break
        fresh = self.rt.make_inputs(wl, seed + 77_777, self.device)
        target = sets[0]
        # leaf by leaf: GPU MODE data is one nested structure (a tuple holding tensors and a dict of weights)
        for dst, src in zip(checking.flatten(target), checking.flatten(fresh), strict=False):
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.shape == src.shape:
                dst.copy_(src)
        exp = self._reference(wl, target)
        got = self._call(fn, target)
        chk = self._compare(got, exp, wl, target, tol)
        if not chk.passed:
            flags.append(
                "stale_output: after new values were written into the same input tensors, the output "
                f"did not follow ({chk.kind}: {chk.message}); results must not be cached by address"
            )
        return flags


@contextlib.contextmanager
def _count_launches(cls: Any, module_name: str | None) -> Iterator[list[str]]:
    """Record launches (not warm-ups) of interpreted Triton functions defined in `module_name`."""
    launched: list[str] = []
    original = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup and getattr(self.fn, "__module__", None) == module_name:
            launched.append(self.fn.__name__)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    cls.run = run
    try:
        yield launched
    finally:
        cls.run = original


def _triton_compiled(jf: Any) -> list[Any]:
    """CompiledKernel objects of a JITFunction, across Triton versions' cache layouts."""
    found = []
    caches = getattr(jf, "device_caches", None)
    if isinstance(caches, dict):
        for entry in caches.values():
            kc = entry[0] if isinstance(entry, tuple) else entry
            if isinstance(kc, dict):
                found += list(kc.values())
    legacy = getattr(jf, "cache", None)
    if isinstance(legacy, dict):
        for kc in legacy.values():
            if isinstance(kc, dict):
                found += list(kc.values())
    return found
