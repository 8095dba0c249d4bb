"""CUDA C++ torch extensions built with `load_inline`, named by the hash of their sources.

Use from a candidate that needs host-side C++::

    from ksearch.gpu import cpp_ext

    ext = cpp_ext.load("softmax", cpp_sources=CPP, cuda_sources=CUDA, functions=["softmax"])
    y = ext.softmax(x)

The first build costs ~30 s; the same sources load again from the shared build directory in well
under a second, in any worker. Builds target only the current GPU's architecture. A failed build
raises `ExtensionBuildError` with the compiler's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from ksearch.gpu.export.cpp_ext import _ksearch_cpp_ext
from ksearch.worldmodel.errors import KsearchError


class ExtensionBuildError(RuntimeError, KsearchError):
    def __init__(self, name: str, log: str, cuda_sources: list[str], cpp_sources: list[str]) -> None:
        super().__init__(f"building the torch extension {name!r} failed:\n{log}")
        self.log = log
        self.cuda_sources = cuda_sources
        self.cpp_sources = cpp_sources


# The build itself is the loader written into exported files (gpu/export/cpp_ext.py): one code, so what a
# search measured is what its exported file builds. Here its errors become ExtensionBuildError, and each build
# is recorded.
_BUILDER = _ksearch_cpp_ext()
# Sources of every extension built in this process (the sandbox maps compiler messages back).
BUILT: list[dict] = []


def _as_list(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def load(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    functions: Sequence[str] | None = None,
    extra_cflags: Sequence[str] = (),
    extra_cuda_cflags: Sequence[str] = (),
    verbose: bool = False,
) -> ModuleType:
    """Build (or reuse) an extension; same arguments as `torch.utils.cpp_extension.load_inline`."""
    cpp, cuda = _as_list(cpp_sources), _as_list(cuda_sources)
    try:
        mod: ModuleType = _BUILDER.load(
            name, cpp, cuda or None, functions, extra_cflags, extra_cuda_cflags, verbose
        )
    except (RuntimeError, OSError) as e:
        # torch puts the compiler output in the exception text
        raise ExtensionBuildError(name, str(e)[-20000:], cuda, cpp) from None
    if all(b["name"] != mod.__name__ for b in BUILT):
        BUILT.append({"name": mod.__name__, "cuda_sources": cuda, "cpp_sources": cpp})
    return mod
