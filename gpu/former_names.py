"""The former top-level name of ksearch.gpu, for code written before it moved into `ksearch`.

Candidates reach ksearch's helpers as `from ksearch.gpu import nvrtc`; sources recorded earlier (searches
in a database, replay files, exported modules) say `from gpu import nvrtc`, `import gpu.cpp_ext` or
`from gpu.fib_build import ...`. `install()` makes `gpu` and every `gpu.X` the very modules `ksearch.gpu`
and `ksearch.gpu.X` (one module object each, so the harness's checks and the tamper scan see one thing).

It is installed where user code runs, always in a sandbox subprocess: `rt_common.exec_code` (candidates
and task references, in the worker, the profiled program and the task probes) and the native loader's
probe. Task files too may still say `from gpu.inputs import signed`. Elsewhere `gpu` stays free for
whatever else is installed under that name.
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


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `gpu.X` as the already importable `ksearch.gpu.X` and hands out that module itself."""

    def __init__(self) -> None:
        self._specs: dict[int, importlib.machinery.ModuleSpec | None] = {}  # id(module) -> its own spec

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(FORMER + "."):
            return None
        real = PACKAGE + fullname[len(FORMER) :]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(PACKAGE + spec.name[len(FORMER) :])
        # the import system stamps the alias's spec on the module it gets; keep the real one
        self._specs[id(module)] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(id(module))  # executed under its real name already


def install() -> None:
    """Alias `gpu` and `gpu.X` to `ksearch.gpu` and `ksearch.gpu.X` in this process. Idempotent."""
    if any(isinstance(f, _Alias) for f in sys.meta_path):
        return
    sys.modules[FORMER] = importlib.import_module(PACKAGE)
    for name, module in list(sys.modules.items()):  # submodules imported already
        if name.startswith(PACKAGE + "."):
            sys.modules[FORMER + name[len(PACKAGE) :]] = module
    sys.meta_path.insert(0, _Alias())
