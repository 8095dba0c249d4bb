"""Building a FlashInfer-Bench C++/CUDA solution inside a candidate, the way FlashInfer-Bench builds it.

A candidate converted from a Solution JSON (gpu/tasks/fib_solution.py) calls
`build(FLASHINFER_SOLUTION, SOURCES)` once, when it is loaded:

- the files are written, under their own relative paths, into a folder of the working directory
  (the worker's scratch) named by the hash of the solution, so `#include "kernel.h"` finds its
  neighbours; the C/C++/CUDA files among them are compiled into one extension;
- binding "torch": `torch.utils.cpp_extension.load` (the sources define the Python module with
  `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`); the build lands in torch's extension cache, so the same
  solution loads again in well under a second in any worker;
- binding "tvm-ffi" (FlashInfer-Bench's default for C++/CUDA): `tvm_ffi.cpp.build` and
  `tvm_ffi.load_module`, from the apache-tvm-ffi package; CUDA builds link libcuda and cuBLAS as
  FlashInfer-Bench's do.

It returns the entry symbol; the candidate calls it positionally. A failed build raises
`ksearch.gpu.cpp_ext.ExtensionBuildError`, which the sandbox reports as the candidate's compile error.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ksearch.gpu.cpp_ext import ExtensionBuildError

_COMPILED = (".cu", ".cpp", ".cc", ".cxx", ".c")
_LOADED: dict[str, Callable[..., Any]] = {}


def _write(folder: Path, sources: Mapping[str, str]) -> list[Path]:
    paths = []
    for rel, text in sources.items():
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts:  # the converter refuses these; a hand-edited candidate may not
            raise ValueError(f"source path {rel!r} leaves the solution's folder")
        dest = folder.joinpath(*p.parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_file() or dest.read_text() != text:
            dest.write_text(text)
        paths.append(dest)
    return paths


def _arch_for_this_gpu() -> None:
    """Build for the GPU at hand only (a build for every architecture takes several times longer)."""
    import torch

    if torch.cuda.is_available() and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"


def build(solution: Mapping[str, Any], sources: Mapping[str, str]) -> Callable[..., Any]:
    """Compile the solution's files and return its entry symbol."""
    spec = solution["spec"]
    entry_file, _, symbol = str(spec["entry_point"]).partition("::")
    binding = spec.get("binding") or "tvm-ffi"
    digest = hashlib.sha256(
        repr((sorted(sources.items()), spec["entry_point"], spec["language"], binding)).encode()
    ).hexdigest()
    name = "fib_" + re.sub(r"\W", "_", str(solution.get("name", "solution")))[:40] + "_" + digest[:12]
    if name in _LOADED:
        return _LOADED[name]
    folder = Path.cwd() / name
    files = _write(folder, sources)
    compiled = [p for p in files if p.suffix in _COMPILED]
    cuda = [p for p in compiled if p.suffix == ".cu"]
    if not compiled:
        raise ExtensionBuildError(name, "the solution has no .cu/.cpp/.cc/.cxx/.c file to compile", [], [])
    with_cuda = bool(cuda) or spec["language"] == "cuda"
    texts = {"cuda": [p.read_text() for p in cuda], "cpp": [p.read_text() for p in compiled if p not in cuda]}
    _arch_for_this_gpu()
    if binding == "torch":
        from torch.utils.cpp_extension import load

        try:
            ext = load(
                name=name,
                sources=[str(p) for p in compiled],
                extra_include_paths=[str(folder)],
                extra_cflags=["-O3"],
                extra_cuda_cflags=["-O3"],
                with_cuda=with_cuda,
            )
        except (RuntimeError, OSError, ImportError) as e:  # torch puts the compiler's output in the message
            raise ExtensionBuildError(name, str(e)[-20000:], texts["cuda"], texts["cpp"]) from None
    else:
        ext = _build_tvm_ffi(name, folder, compiled, cuda, with_cuda, texts)
    fn = getattr(ext, symbol, None)
    if fn is None:
        raise ExtensionBuildError(
            name,
            f"the built extension has no symbol {symbol!r} (the entry point {entry_file}::{symbol}); "
            "export it from the sources",
            texts["cuda"],
            texts["cpp"],
        )
    _LOADED[name] = fn
    return fn


def _build_tvm_ffi(
    name: str,
    folder: Path,
    compiled: list[Path],
    cuda: list[Path],
    with_cuda: bool,
    texts: dict[str, list[str]],
) -> Any:
    try:
        import tvm_ffi
    except ImportError:
        raise ExtensionBuildError(
            name,
            "this solution uses the tvm-ffi binding, which needs the apache-tvm-ffi package "
            "(pip install apache-tvm-ffi) in ksearch's environment",
            texts["cuda"],
            texts["cpp"],
        ) from None
    ldflags: list[str] = []
    if with_cuda:
        ldflags = ["-lcuda", "-lcublas"]
        nvcc = shutil.which("nvcc")
        if nvcc is not None:
            for lib in ("lib64", "lib", "targets/x86_64-linux/lib"):
                d = Path(nvcc).resolve().parent.parent / lib
                if (d / "libcudart.so").exists():
                    ldflags.insert(0, f"-L{d}")
                    break
    out = folder / "build"
    out.mkdir(exist_ok=True)
    try:
        lib_path = tvm_ffi.cpp.build(
            name=name,
            cpp_files=[str(p) for p in compiled if p not in cuda],
            cuda_files=[str(p) for p in cuda],
            extra_include_paths=[str(folder)],
            extra_ldflags=ldflags,
            build_directory=str(out),
        )
        return tvm_ffi.load_module(str(lib_path))
    except Exception as e:  # tvm_ffi raises its own error types for compiler and loader failures
        raise ExtensionBuildError(
            name, f"{type(e).__name__}: {str(e)[-20000:]}", texts["cuda"], texts["cpp"]
        ) from None
