"""Building a FlashInfer-Bench C++/CUDA solution inside a candidate, the way FlashInfer-Bench builds it.

A candidate converted from a Solution JSON (gpu/tasks/flashinfer/solution.py) calls
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

A Python solution of several files calls `load_python(FLASHINFER_SOLUTION, SOURCES, FLASHINFER_DEFINITION)`:
the files are one package, its entry module imported by its dotted path, as FlashInfer-Bench's PythonBuilder
does. Where FlashInfer-Bench's package is in use (gpu/tasks/flashinfer/pkg.py) its own builder does it (into its cache,
FIB_CACHE_PATH, kept with the sandbox's compiler caches); else ksearch writes the package into the working directory and imports it. Either way
the package is recorded against the files it came from: `own_package` tells the kernel audit that its modules'
kernels are the candidate's own.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ksearch.gpu.cpp_ext import ExtensionBuildError
from ksearch.gpu.tasks.flashinfer import pkg as fib_pkg

_COMPILED = (".cu", ".cpp", ".cc", ".cxx", ".c")
_LOADED: dict[str, Callable[..., Any]] = {}
# the digest of a Python solution's files -> the package they were imported as (the kernel audit asks)
_PACKAGES: dict[str, str] = {}


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


# --------------------------------------------------------------------------- Python solutions of several files


def _python_digest(solution: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    spec = solution.get("spec") or {}
    return hashlib.sha256(repr((sorted(sources.items()), spec.get("entry_point"))).encode()).hexdigest()


def load_python(
    solution: Mapping[str, Any], sources: Mapping[str, str], definition: Mapping[str, Any]
) -> Callable[..., Any]:
    """Import a Python solution's files as one package and return its entry symbol."""
    digest = _python_digest(solution, sources)
    if fib_pkg.in_use():
        fn, package = _fib_builder(solution, sources, definition)
    else:
        fn, package = _import_package(solution, sources, digest)
    _PACKAGES[digest] = package
    return fn


def own_package(module: types.ModuleType) -> str | None:
    """The package `load_python` imported from exactly the files this candidate module holds, if any."""
    solution, sources = getattr(module, "FLASHINFER_SOLUTION", None), getattr(module, "SOURCES", None)
    if not isinstance(solution, dict) or not isinstance(sources, dict):
        return None
    return _PACKAGES.get(_python_digest(solution, sources))


def _fib_builder(
    solution: Mapping[str, Any], sources: Mapping[str, str], definition: Mapping[str, Any]
) -> tuple[Callable[..., Any], str]:
    """FlashInfer-Bench's own builder (its PythonBuilder, or TritonBuilder for a Triton solution)."""
    from flashinfer_bench.compile import BuilderRegistry, BuildError
    from flashinfer_bench.data import Definition, Solution

    fields = {
        k: solution[k] for k in ("name", "definition", "author", "description", "spec") if k in solution
    }
    sol = Solution.model_validate(
        {**fields, "sources": [{"path": p, "content": c} for p, c in sources.items()]}
    )
    try:
        runnable = BuilderRegistry.get_instance().build(Definition.model_validate(dict(definition)), sol)
    except BuildError as e:  # the import failed, or the entry symbol is missing or takes the wrong arguments
        raise ImportError(f"FlashInfer-Bench's builder could not build the solution {sol.name!r}: {e}") from e
    return runnable, str(runnable.metadata.misc["module_name"]).split(".")[0]


def _import_package(
    solution: Mapping[str, Any], sources: Mapping[str, str], digest: str
) -> tuple[Callable[..., Any], str]:
    """ksearch's own import, as FlashInfer-Bench's PythonBuilder imports: the files written under a package
    folder named by the solution and its files, the entry module imported as `<package>.<dotted path>`."""
    entry_file, _, symbol = str(solution["spec"]["entry_point"]).partition("::")
    language = str(solution["spec"].get("language", "python"))
    package = (
        f"fib_{language}_"
        + re.sub(r"\W", "_", str(solution.get("name", "solution")))[:40]
        + "_"
        + digest[:12]
    )
    root = Path.cwd() / "fib-python"
    _write(root / package, sources)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    module_name = ".".join([package, *PurePosixPath(entry_file).with_suffix("").parts])
    module = importlib.import_module(module_name)
    fn = getattr(module, symbol, None)
    if not callable(fn):
        raise ImportError(f"the entry point {entry_file}::{symbol}: {module_name} has no function {symbol!r}")
    return fn, package
