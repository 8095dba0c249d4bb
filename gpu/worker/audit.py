"""The kernel audit (the candidate's own kernels must run during a call: profiled on a GPU, launches
counted under the Triton interpreter) and the resources of the kernels a candidate built (registers,
spills, shared memory, warps, stages)."""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ksearch.gpu.checks.kernel_names import ran_own_kernel
from ksearch.gpu.worker.core import CandidateFailure, WorkerCore

_GLOBAL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[^(;{]*?(\w+)\s*\(")


class KernelAudit(WorkerCore):
    """Which kernels are the candidate's own, whether they ran, what they use."""

    def _own_modules(self) -> list[Any]:
        """The candidate module, and the modules of the package a Python solution of several files was imported
        as (`fib_build.own_package`: from exactly the files the module holds): their kernels are its own."""
        from ksearch.gpu import fib_build

        if self.module is None:
            return []
        mods = [self.module]
        package = fib_build.own_package(self.module)
        if package is not None:
            mods += [m for n, m in list(sys.modules.items()) if n == package or n.startswith(package + ".")]
        return mods

    def _triton_functions(self) -> list[Any]:
        try:
            from triton.runtime.jit import JITFunction
        except ImportError:
            return []
        out = []
        for v in [v for m in self._own_modules() for v in list(vars(m).values())]:
            seen = 0
            while v is not None and seen < 5:
                if isinstance(v, JITFunction):
                    out.append(v)
                    break
                v = getattr(v, "fn", None)
                seen += 1
        return out

    def own_kernel_names(self) -> set[str]:
        from ksearch.gpu import nvrtc

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
        names = {getattr(m, "__name__", None) for m in self._own_modules()}
        own = sorted(
            {
                v.__name__
                for m in self._own_modules()
                for v in vars(m).values()
                if isinstance(v, InterpretedFunction) and getattr(v.fn, "__module__", None) in names
            }
        )
        with _count_launches(InterpretedFunction, names) as launched:
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
                # Triton's `n_spills` is the driver's local memory per thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
                # divided by 4: the stack frame, spilled registers and local arrays together, not ptxas's bytes
                # of spill stores (though a kernel with no local memory spills nothing)
                local = getattr(ck, "n_spills", None)
                none = 0 if local == 0 else None
                out.append(
                    {
                        "name": name,
                        "registers": getattr(ck, "n_regs", None),
                        "spill_stores_bytes": none,
                        "spill_loads_bytes": none,
                        "shared_bytes": getattr(md, "shared", None),
                        "stack_bytes": None if local is None else int(local) * 4,
                        "num_warps": getattr(md, "num_warps", None),
                        "num_stages": getattr(md, "num_stages", None),
                    }
                )
        from ksearch.gpu import nvrtc

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


@contextlib.contextmanager
def _count_launches(cls: Any, module_names: set[str | None]) -> Iterator[list[str]]:
    """Record launches (not warm-ups) of interpreted Triton functions defined in one of `module_names`."""
    launched: list[str] = []
    original = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup and getattr(self.fn, "__module__", None) in module_names:
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
