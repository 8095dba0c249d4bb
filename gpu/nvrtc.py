"""CUDA C kernels compiled at run time with NVRTC (through CuPy) and launched on torch tensors.

Use from a candidate::

    from ksearch.gpu import nvrtc

    SRC = r'''
    extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i];
    }
    '''
    kernel = nvrtc.compile(SRC, "scale", options=["--use_fast_math"])   # cached by source hash
    kernel.launch(grid=(blocks,), block=(256,), args=[x, y, 2.0, n])  # on torch's current stream

Arguments: a torch tensor passes its data pointer (mind its strides: the kernel sees raw memory);
a Python int passes a 32-bit `int`, a float a 32-bit `float`, a bool a `bool`. For other widths
wrap the value: `nvrtc.i64(n)`, `nvrtc.f64(x)`, `nvrtc.u32(n)`, or any numpy scalar
(`numpy.int64(n)`). Declare kernels `extern "C"` so their names are not mangled (or pass the
mangled/C++ name as `name` together with `name_expressions=[name]`).

The code is compiled for the current GPU's architecture (sm_90 on an H200). Dynamic shared memory
above 48 KiB is enabled automatically when `shared_mem` asks for it. Compile errors raise
`NvrtcError` with NVRTC's log (line numbers refer to the CUDA source string).
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ksearch.worldmodel.errors import KsearchError

_DYNAMIC_SMEM_DEFAULT = 48 * 1024
_ATTR_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class NvrtcError(RuntimeError, KsearchError):
    """The CUDA source did not compile; `log` holds NVRTC's messages."""

    def __init__(self, name: str, log: str, source: str = "") -> None:
        super().__init__(f"NVRTC failed to compile {name!r}:\n{log}")
        self.kernel_name = name
        self.log = log
        self.source = source


@dataclass
class _Scalar:
    ctype: Any
    value: Any


def i32(v: int) -> _Scalar:
    return _Scalar(ctypes.c_int32, v)


def i64(v: int) -> _Scalar:
    return _Scalar(ctypes.c_int64, v)


def u32(v: int) -> _Scalar:
    return _Scalar(ctypes.c_uint32, v)


def u64(v: int) -> _Scalar:
    return _Scalar(ctypes.c_uint64, v)


def f32(v: float) -> _Scalar:
    return _Scalar(ctypes.c_float, v)


def f64(v: float) -> _Scalar:
    return _Scalar(ctypes.c_double, v)


def _to_ctype(arg: Any) -> Any:
    if type(arg) is _Tensor[0] or (
        _Tensor[0] is not None and isinstance(arg, _Tensor[0])
    ):  # the common case first
        if not arg.is_cuda:
            raise TypeError("nvrtc kernels take CUDA tensors; got a tensor on " + str(arg.device))
        return ctypes.c_void_p(arg.data_ptr())
    if isinstance(arg, _Scalar):
        return arg.ctype(arg.value)
    if hasattr(arg, "data_ptr") and hasattr(
        arg, "is_cuda"
    ):  # a tensor-like (a torch.Tensor before torch loaded)
        if not arg.is_cuda:
            raise TypeError("nvrtc kernels take CUDA tensors; got a tensor on " + str(arg.device))
        return ctypes.c_void_p(arg.data_ptr())
    if isinstance(arg, bool):
        return ctypes.c_bool(arg)
    if isinstance(arg, int):
        return ctypes.c_int32(arg)
    if isinstance(arg, float):
        return ctypes.c_float(arg)
    if arg is None:
        return ctypes.c_void_p(0)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with torch
        np = None  # type: ignore[assignment]
    if np is not None and isinstance(arg, np.generic):
        if arg.dtype == np.float16:
            return ctypes.c_uint16(int(arg.view(np.uint16)))
        return np.ctypeslib.as_ctypes(cast(Any, arg))  # a numpy scalar; its stubs list each dtype apart
    raise TypeError(
        f"cannot pass {type(arg).__name__} to a CUDA kernel; use a tensor, int, float, bool, "
        "a numpy scalar or nvrtc.i64/u32/u64/f64"
    )


# torch.Tensor, once a launch has imported torch (this module itself does not import it)
_Tensor: list[Any] = [None]
# grid and block shapes seen before, as dim3 triples: a launch's shapes are usually the same every call
_DIMS: dict[Any, tuple[int, int, int]] = {}


def _dim3(d: int | Sequence[int]) -> tuple[int, int, int]:
    cacheable = type(d) is int or type(d) is tuple
    if cacheable:
        try:
            hit = _DIMS.get(d)
        except TypeError:  # a tuple holding something unhashable: worked out below every time
            cacheable, hit = False, None
        if hit is not None:
            return hit
    t = (d,) if isinstance(d, int) else tuple(int(x) for x in d)
    if not 1 <= len(t) <= 3 or any(x < 1 for x in t):
        raise ValueError(f"grid/block must be 1 to 3 positive ints, got {d!r}")
    out: tuple[int, int, int] = ((*t, 1, 1))[:3]  # type: ignore[assignment]
    if cacheable and len(_DIMS) < 4096:
        _DIMS[d] = out
    return out


@dataclass
class Kernel:
    """A compiled `__global__` function. Launch with `launch(grid, block, args, shared_mem=0)`."""

    name: str
    source_hash: str
    _raw: Any  # cupy.RawKernel
    compile_seconds: float = 0.0
    _smem_limit: int = field(default=_DYNAMIC_SMEM_DEFAULT, repr=False)
    _launch: Any = field(default=None, repr=False)  # (launchKernel, raw current stream, current device), once
    _ptr: int = field(default=0, repr=False)

    @property
    def ptr(self) -> int:
        return int(self._raw.kernel.ptr)

    def attributes(self) -> dict[str, int]:
        """Registers per thread, static shared and local (stack/spill) bytes, max threads per block."""
        k = self._raw
        return {
            "registers": int(k.num_regs),
            "shared_bytes": int(k.shared_size_bytes),
            "local_bytes": int(k.local_size_bytes),
            "max_threads_per_block": int(k.max_threads_per_block),
        }

    def launch(
        self,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        # Every microsecond here is in a short kernel's timing (a call timed from an idle GPU waits for its
        # launch): the function pointer, the driver and torch are looked up once, and torch's current stream is
        # read as a raw handle rather than built as a Stream object per call.
        if self._launch is None:
            import torch
            from cupy.cuda import driver

            _Tensor[0] = torch.Tensor
            self._launch = (
                driver.launchKernel,
                torch._C._cuda_getCurrentRawStream,
                torch.cuda.current_device,
            )
            self._ptr = self.ptr
        launch, raw_stream, device = self._launch
        g, b = _dim3(grid), _dim3(block)
        if shared_mem > self._smem_limit:
            from cupy.cuda import driver

            driver.funcSetAttribute(self._ptr, _ATTR_MAX_DYNAMIC_SHARED, int(shared_mem))
            self._smem_limit = int(shared_mem)
        c_args = [_to_ctype(a) for a in args]
        ptrs = (ctypes.c_void_p * max(len(c_args), 1))(*[ctypes.addressof(a) for a in c_args])
        if stream is None:
            handle = raw_stream(device())
        else:  # a torch or CuPy stream, or a raw stream handle
            handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(cast(Any, stream))
        launch(
            self._ptr, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_mem), handle, ctypes.addressof(ptrs), 0
        )

    __call__ = launch


_CACHE: dict[str, Kernel] = {}
# Every kernel compiled in this process, for the sandbox's resource report and kernel audit.
COMPILED: list[Kernel] = []
# Kernels asked for (compiled or from the cache) since the sandbox last cleared this.
REQUESTED: list[Kernel] = []


def compile(
    source: str, name: str, options: Sequence[str] = (), *, name_expressions: Sequence[str] | None = None
) -> Kernel:
    """Compile `source` with NVRTC and return its `__global__` function `name` (cached by hash)."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("nvrtc.compile needs the CUDA source as a non-empty string")
    try:
        import cupy
    except ImportError as e:
        raise RuntimeError(
            "CuPy is not installed: NVRTC kernels need `pip install cupy-cuda13x` "
            "(or cupy-cuda12x to match the CUDA driver) and a GPU"
        ) from e
    import torch

    dev = torch.cuda.current_device()
    opts = tuple(options)
    key = hashlib.sha256(repr((source, name, opts, tuple(name_expressions or ()), dev)).encode()).hexdigest()
    hit = _CACHE.get(key)
    if hit is not None:
        REQUESTED.append(hit)
        return hit
    t0 = time.perf_counter()
    with cupy.cuda.Device(dev):
        try:
            module = cupy.RawModule(
                code=source,
                options=opts,
                backend="nvrtc",
                name_expressions=list(name_expressions) if name_expressions else None,
            )
            raw = module.get_function(name)
            raw.kernel  # noqa: B018 - forces compile + load now, so errors surface here with the log
        except cupy.cuda.compiler.CompileException as e:
            raise NvrtcError(name, str(e), source) from None
    k = Kernel(name=name, source_hash=key[:16], _raw=raw, compile_seconds=time.perf_counter() - t0)
    _CACHE[key] = k
    COMPILED.append(k)
    REQUESTED.append(k)
    return k
