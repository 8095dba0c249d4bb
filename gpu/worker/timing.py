"""Timing: the candidate, the eager reference and the reference under torch.compile, each measured the same
way (CUDA events, L2 flush, rotated inputs; or as the task's GPU MODE evaluator times), then the cheat
checks that follow a timing (outputs re-checked on the timed inputs, fresh values at the same addresses),
and the roofline fraction against the GPU's measured ceilings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.checks import guard
from ksearch.gpu.checks import outputs as checking
from ksearch.gpu.tasks.draws import seeds as draw_seeds
from ksearch.gpu.tasks.rt.common import clone_data
from ksearch.gpu.timing import hardware
from ksearch.gpu.timing import measure as timing
from ksearch.gpu.worker import protocol_flashinfer as timing_flashinfer
from ksearch.gpu.worker import protocol_kernelbench as timing_kernelbench
from ksearch.gpu.worker.core import CandidateFailure, WorkerCore, restore_precision
from ksearch.worldmodel.models import EvalSettings

# Achieved / attainable above this is implausible: the ceilings are measured library rates, and the
# hardware's true peak lies only a little above them.
IMPLAUSIBLE_ROOFLINE = 1.15


def _tensor_bytes(xs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))


class Timing(WorkerCore):
    """The `benchmark` operation (which="candidate", "eager" or "compile")."""

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
        if self.cpu_mode:  # the interpreter's timed calls, each re-checked after: no set goes unused
            wanted = min(wanted, timing.CPU_REPS)
        else:
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
                call,
                sets,
                reps=min(st.min_reps, timing.CPU_REPS),
                before_each=before_each,
                after_each=after_each,
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

    def _time_compiled(
        self, wl: Any, st: EvalSettings, time_it: Callable[[Callable[[list[Any]], Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        """The torch.compile baseline, timed by `time_it(compiled reference)` (each protocol's own loop), with its
        mode; what torch.compile itself installs is the harness's doing, not a candidate's: the harness's
        fingerprint is taken again when it was clean before."""
        ref_mod = self.rt.reference_module
        clean = not guard.replaced(self._harness, guard.fingerprint(ref_mod))
        comp = self._compiled_ref(wl, st.compile_mode)
        out = time_it(comp)
        out["compile_mode"] = st.compile_mode
        out["output_check"] = self._check_compiled(wl, comp, st)
        if clean:
            self._harness = guard.fingerprint(ref_mod)
        return out

    def _check_compiled(self, wl: Any, comp: Callable[[list[Any]], Any], st: EvalSettings) -> dict[str, Any]:
        """torch.compile's output judged once by the rule a candidate must meet (the task's tolerance or its own
        check), on the timing's first input set: a baseline that would fail it is no fair bar, and the search
        says so. Its numbers stay what they are."""
        inputs = self.rt.make_inputs(wl, st.seed + draw_seeds.TIMING, self.device)
        exp = self._reference(wl, inputs)
        restore_precision(self._precision)
        try:
            with torch.no_grad():
                got = comp(clone_data(inputs) if self.rt.copies_per_call else checking.clone_inputs(inputs))
            self._sync()
        except Exception as e:  # the compiled reference timed fine but fails here: say so, never hide it
            return {"passed": False, "kind": "error", "message": f"{type(e).__name__}: {str(e)[:300]}"}
        c = self._compare(got, exp, wl, inputs, self.rt.tolerance())
        return {"passed": c.passed, "kind": c.kind, "message": c.message[:300], "max_abs_err": c.max_abs_err}

    def benchmark(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.task is not None
        wl = self.task.workload(args["workload"])
        st = EvalSettings.model_validate(args["settings"])
        if st.timing_protocol == "kernelbench" and not self.cpu_mode:  # the CPU interpreter: time_cpu below
            return timing_kernelbench.benchmark(self, args)
        which = args.get("which", "candidate")
        if st.timing_protocol == "flashinfer" and not self.cpu_mode:  # the CPU interpreter: time_cpu below
            return timing_flashinfer.benchmark(self, wl, st, which, args)
        seed = st.seed + draw_seeds.TIMING  # timing inputs differ from the correctness trials
        like_gpumode = st.timing_protocol == "gpumode" and not self.cpu_mode
        copied = self.rt.copies_per_call
        if which == "eager":
            ref = self.rt.build_reference_uncopied(wl, self.device) if copied else self._reference_fn(wl)
            if like_gpumode:
                restore_precision(self._precision)
                return self._time_gpumode(ref, wl, st, seed)[0]
            sets = self._input_sets(wl, seed, st.input_sets)
            restore_precision(self._precision)
            return (self._time_copied(ref, sets, st) if copied else self._time(ref, sets, st)).to_dict()
        if which == "compile":

            def time_it(comp: Callable[[list[Any]], Any]) -> dict[str, Any]:
                if like_gpumode:
                    restore_precision(self._precision)
                    return self._time_gpumode(comp, wl, st, seed)[0]
                sets = self._input_sets(wl, seed, st.input_sets)
                restore_precision(self._precision)
                return (self._time_copied(comp, sets, st) if copied else self._time(comp, sets, st)).to_dict()

            return self._time_compiled(wl, st, time_it)
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
                    pristine = self.rt.make_inputs(wl, seed + draw_seeds.PRISTINE, self.device)
                flags += self._recheck(fn, wl, [pristine], [self._reference(wl, pristine)], tol, seed)
                return self._assemble(out, flags, wl, args, out["median_us"])
            if st.final:
                res = self._time_final(raw, wl, st, tol, flags)
                sets = [self.rt.make_inputs(wl, seed + draw_seeds.PRISTINE, self.device)]
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
            # asked for once in this process: a slow draw made here is not kept (drawn-ahead ones are served)
            return self.rt.make_inputs(wl, seed + draw_seeds.EVALUATOR_STEP * k, self.device, once=True)

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
            inputs = self.rt.make_inputs(wl, st.seed + draw_seeds.FINAL_REPS + rep, self.device)
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
        fresh = self.rt.make_inputs(wl, seed + draw_seeds.RECHECK, self.device)
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
