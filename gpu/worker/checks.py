"""Correctness: the candidate against the reference on fresh inputs, each output judged by the task's rule
(NaN-poisoned allocations, unwritten elements, input mutation, trivial answers the workload cannot tell
from right ones), and the kernel audit's verdict once per candidate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.checks import outputs as checking
from ksearch.gpu.worker import faults
from ksearch.gpu.worker.audit import KernelAudit
from ksearch.gpu.worker.core import CandidateFailure


class CorrectnessChecks(KernelAudit):
    """The `correctness` operation and the checks behind it."""

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
        agg: dict[str, Any] = {
            "max_abs_err": 0.0,
            "max_rel_err": None,
            "tolerance_used": None,
            "mismatches": 0,
            "numel": 0,
        }
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
            if res.tolerance_used is not None:
                agg["tolerance_used"] = max(agg["tolerance_used"] or 0.0, res.tolerance_used)
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
            audit_flags, pure = self._audit_once(fn, wl, seed)
            flags += audit_flags
        return {
            "correctness": {**base, "trials": trials, "passed": True, "kind": "ok", **agg},
            "notes": notes,
            "flags": flags,
            "pure_pytorch": pure,
        }

    def audit(self, args: dict[str, Any]) -> dict[str, Any]:
        """The kernel audit alone, on `workload` with `seed`: asked after timing when an evaluation times the
        candidate, since a profiler session leaves the process slower to issue GPU work (by about a third on the
        H200's host: bench/results/host-overhead-h200.json, docs/tasks.md), which a launch-bound call's timing
        would show."""
        assert self.task is not None and self.module is not None, "load a candidate first"
        wl = self.task.workload(args["workload"])
        try:
            fn = self._candidate_fn(wl)
        except CandidateFailure as cf:
            return {"flags": [], "pure_pytorch": None, "fault": cf.fault.to_dict()}
        flags, pure = self._audit_once(fn, wl, int(args["seed"]))
        return {"flags": flags, "pure_pytorch": pure}

    def _audit_once(
        self, fn: Callable[[list[Any]], Any], wl: Any, seed: int
    ) -> tuple[list[str], bool | None]:
        if self._audit_result is None:
            audit = self._audit_interpreted if self.cpu_mode else self._audit
            self._audit_result = audit(fn, self.rt.make_inputs(wl, seed, self.device))
        # every evaluation of this candidate gets the audit's answer, also one served by a warm worker
        return self._audit_result

    def _degenerate_notes(self, wl: Any, exp: Any, inputs: list[Any], tol: Any) -> list[str]:
        """Trivial answers the task's rule accepts on these inputs (see checking.degenerate_answers)."""
        if not self.rt.has_own_check:
            return checking.degenerate_answers(exp, inputs, tol)
        from ksearch.gpu.inputs import as_outputs, degenerate_findings

        return [
            f"degenerate_reference: output {f.output} would pass the task's own check as {f.label}; this "
            "workload cannot tell a wrong kernel from a right one, so such an answer is also checked on extra "
            "inputs with signed values"
            for f in degenerate_findings(self.rt, wl, inputs, as_outputs(exp))
        ]

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
        """The workload's own inputs accept a trivial answer: run once more on signed inputs (ksearch.gpu.checks.degenerate)
        and fail a candidate whose output there is trivial where the reference's is not."""
        from ksearch.gpu.checks import degenerate

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
