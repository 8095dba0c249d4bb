"""The former top-level name of ksearch.gpu, for code written before it moved into `ksearch`.

Candidates reach ksearch's helpers as `from ksearch.gpu import nvrtc`; sources recorded earlier (searches
in a database, replay files, exported modules) say `from gpu import nvrtc`, `import gpu.cpp_ext` or
`from gpu.fib_build import ...`. `install()` makes `gpu` and every `gpu.X` the very modules `ksearch.gpu`
and `ksearch.gpu.X` (one module object each, so the harness's checks and the tamper scan see one thing).

It is installed where user code runs, always in a sandbox subprocess: `rt_common.exec_code` (candidates
and task references, in the worker, the profiled program and the task probes) and the native loader's
probe. Task files too may still say `from gpu.inputs import signed`. Elsewhere `gpu` stays free for
whatever else is installed under that name.

Modules that moved into the rooms of ksearch.gpu (`ksearch.gpu.scrub` is now `ksearch.gpu.jail.scrub`) are found
under their former names too, as `ksearch.gpu.X` or `gpu.X`: MOVED says where each went. A former name that is a
package now (`sandbox`, `worker`, `jail`, `timing`, `tasks.flashinfer`) is that package.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

FORMER = "gpu"
PACKAGE = "ksearch.gpu"
# former module (under ksearch.gpu) -> where it lives now
MOVED: dict[str, str] = {
    "build_baton": "build.baton",
    "checking": "checks.outputs",
    "compare": "timing.compare",
    "compiler": "build.compiler",
    "cudasrc": "build.cudasrc",
    "deferred_check": "checks.deferred",
    "degenerate": "checks.degenerate",
    "draw_seeds": "tasks.draws.seeds",
    "dryrun": "worker.dryrun",
    "faults": "worker.faults",
    "gpu_lease": "sandbox.lease",
    "guard": "checks.guard",
    "hardware": "timing.hardware",
    "interp_watch": "worker.interp_watch",
    "jail_limits": "jail.limits",
    "jail_link": "jail.link",
    "jail_root": "jail.root",
    "jail_view": "jail.view",
    "kept_outputs": "checks.kept_outputs",
    "kernel_names": "checks.kernel_names",
    "kvcache": "sandbox.kvcache",
    "ncu": "timing.ncu",
    "occupancy": "build.occupancy",
    "pool": "sandbox.pool",
    "procs": "build.procs",
    "profile_driver": "worker.profile_driver",
    "ray_actor": "sandbox.ray_actor",
    "ray_sandbox": "sandbox.ray",
    "runtime": "tasks.rt.runtime",
    "sandbox_api": "sandbox.api",
    "sandbox_dryrun": "sandbox.dryrun",
    "sandbox_facts": "sandbox.facts",
    "sandbox_machine": "sandbox.machine",
    "sandbox_profile": "sandbox.profile",
    "sandbox_run": "sandbox.run",
    "sandbox_steps": "sandbox.steps",
    "scrub": "jail.scrub",
    "simulated": "worker.simulated",
    "smi": "jail.smi",
    "standalone": "export.standalone",
    "standalone_cpp_ext": "export.cpp_ext",
    "standalone_nvrtc": "export.nvrtc",
    "stats": "timing.stats",
    "tamper": "checks.tamper",
    "tasks.draw_ahead": "tasks.draws.ahead",
    "tasks.draw_child": "tasks.draws.child",
    "tasks.draw_store": "tasks.draws.store",
    "tasks.dtypes": "dtypes",
    "tasks.fib_child": "tasks.flashinfer.child",
    "tasks.fib_export": "tasks.flashinfer.export",
    "tasks.fib_pkg": "tasks.flashinfer.pkg",
    "tasks.fib_solution": "tasks.flashinfer.solution",
    "tasks.gpu_fills": "tasks.draws.gpu_fills",
    "tasks.input_cache": "tasks.draws.input_cache",
    "tasks.lazy_fills": "tasks.draws.lazy_fills",
    "tasks.rt_common": "tasks.rt.common",
    "tasks.rt_facts": "tasks.rt.facts",
    "tasks.rt_flashinfer": "tasks.rt.flashinfer",
    "tasks.rt_gpumode": "tasks.rt.gpumode",
    "tasks.rt_measure": "tasks.rt.measure",
    "tasks.rt_native": "tasks.rt.native",
    "tasks.rt_placement": "tasks.rt.placement",
    "tasks.rt_rounding": "tasks.rt.rounding",
    "tasks.rt_smoke": "tasks.rt.smoke",
    "timing_flashinfer": "worker.protocol_flashinfer",
    "timing_kernelbench": "worker.protocol_kernelbench",
    "worker_audit": "worker.audit",
    "worker_checks": "worker.checks",
    "worker_core": "worker.core",
    "worker_state": "worker.state",
    "worker_timing": "worker.timing",
    "sandbox.zygote_client": "jail.zygote_client",
    "worker.zygote": "jail.zygote",
    "zygote": "jail.zygote",
    "zygote_client": "jail.zygote_client",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `gpu.X` as the already importable `ksearch.gpu.X`, and a moved module's former name (either prefix)
    as the module it became, and hands out that module itself."""

    def __init__(self) -> None:
        self._specs: dict[int, importlib.machinery.ModuleSpec | None] = {}  # id(module) -> its own spec

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        real = _real_name(fullname)
        if real is None or real == fullname or importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        real = _real_name(spec.name)
        assert real is not None  # find_spec made this spec
        module = importlib.import_module(real)
        # the import system stamps the alias's spec on the module it gets; keep the real one
        self._specs[id(module)] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(id(module))  # executed under its real name already


def _real_name(fullname: str) -> str | None:
    """The module `fullname` names now: `gpu.X` is `ksearch.gpu.X`, a moved module's former name its new one;
    None for a name outside ksearch.gpu's former names."""
    for prefix in (PACKAGE + ".", FORMER + "."):
        if fullname.startswith(prefix):
            rest = fullname[len(prefix) :]
            return f"{PACKAGE}.{MOVED.get(rest, rest)}"
    return None


def install() -> None:
    """Alias `gpu` and `gpu.X` to `ksearch.gpu` and `ksearch.gpu.X` in this process. Idempotent."""
    if any(isinstance(f, _Alias) for f in sys.meta_path):
        return
    sys.modules[FORMER] = importlib.import_module(PACKAGE)
    for name, module in list(sys.modules.items()):  # submodules imported already
        if name.startswith(PACKAGE + "."):
            sys.modules[FORMER + name[len(PACKAGE) :]] = module
    sys.meta_path.insert(0, _Alias())
