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

import hashlib
import os
import re
from collections.abc import Sequence
from types import ModuleType

from ksearch.worldmodel.errors import KsearchError


class ExtensionBuildError(RuntimeError, KsearchError):
    def __init__(self, name: str, log: str, cuda_sources: list[str], cpp_sources: list[str]) -> None:
        super().__init__(f"building the torch extension {name!r} failed:\n{log}")
        self.log = log
        self.cuda_sources = cuda_sources
        self.cpp_sources = cpp_sources


_LOADED: dict[str, ModuleType] = {}
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
    import torch
    from torch.utils.cpp_extension import load_inline

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"extension name must be a C identifier, got {name!r}")
    cpp, cuda = _as_list(cpp_sources), _as_list(cuda_sources)
    if torch.cuda.is_available() and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    key = hashlib.sha256(
        repr(
            (
                cpp,
                cuda,
                list(functions or []),
                list(extra_cflags),
                list(extra_cuda_cflags),
                os.environ.get("TORCH_CUDA_ARCH_LIST"),
                torch.__version__,
            )
        ).encode()
    ).hexdigest()
    full = f"{name}_{key[:12]}"
    if full in _LOADED:
        return _LOADED[full]
    try:
        mod = load_inline(
            name=full,
            cpp_sources=cpp,
            cuda_sources=cuda or None,
            functions=list(functions or []) or None,
            extra_cflags=[*list(extra_cflags), "-O3"],
            extra_cuda_cflags=[*list(extra_cuda_cflags), "-O3"],
            verbose=verbose,
        )
    except (RuntimeError, OSError) as e:
        # torch puts the compiler output in the exception text
        raise ExtensionBuildError(name, str(e)[-20000:], cuda, cpp) from None
    _LOADED[full] = mod
    BUILT.append({"name": full, "cuda_sources": cuda, "cpp_sources": cpp})
    return mod
