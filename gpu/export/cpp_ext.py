"""The extension loader that ksearch writes into a C++ extension candidate it exports (gpu/export/standalone.py).

A `cpp_ext` candidate calls `ksearch.gpu.cpp_ext.load`; a file that must run where ksearch is not installed carries
this instead, and the candidate's import becomes `cpp_ext = _ksearch_cpp_ext()`. Everything below this docstring is
copied into the exported file as it stands. gpu/cpp_ext.py builds with it too: torch's `load_inline` with -O3, for
the current GPU's architecture alone, under a name that carries the hash of the sources and flags, so a changed
source never loads an older build. A failed build raises torch's own error, with the compiler's messages.

It imports nothing of ksearch, and its text has no try/except and no `pass` (KernelBench's static checker refuses
both anywhere in a file, comments aside).
"""

import types


def _ksearch_cpp_ext() -> types.SimpleNamespace:
    """`ksearch.gpu.cpp_ext` without ksearch: load(name, cpp_sources, cuda_sources=None, functions=None,
    extra_cflags=(), extra_cuda_cflags=(), verbose=False) -> the built module."""
    import hashlib
    import os
    import re
    from collections.abc import Sequence
    from types import ModuleType, SimpleNamespace

    loaded: dict[str, ModuleType] = {}

    def as_list(x: str | Sequence[str] | None) -> list[str]:
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
        """Build (or reuse) an extension; the arguments of `torch.utils.cpp_extension.load_inline`."""
        import torch
        from torch.utils.cpp_extension import load_inline

        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"extension name must be a C identifier, got {name!r}")
        cpp, cuda = as_list(cpp_sources), as_list(cuda_sources)
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
        if full not in loaded:
            loaded[full] = load_inline(
                name=full,
                cpp_sources=cpp,
                cuda_sources=cuda or None,
                functions=list(functions or []) or None,
                extra_cflags=[*list(extra_cflags), "-O3"],
                extra_cuda_cflags=[*list(extra_cuda_cflags), "-O3"],
                verbose=verbose,
            )
        return loaded[full]

    return SimpleNamespace(load=load)
