"""The NVRTC launcher that ksearch writes into a CUDA candidate it exports (gpu/export/standalone.py).

A CUDA candidate calls `ksearch.gpu.nvrtc`; a file that must run where ksearch is not installed (a GPU MODE
`submission.py`, a KernelBench `ModelNew` file) carries this instead. Everything below this docstring is copied
into the exported file as it stands, and the candidate's import becomes `nvrtc = _ksearch_nvrtc()`. It does what
gpu/nvrtc.py does, the same way: CuPy's NVRTC compiles the source for the current GPU (`cupy.RawModule`, cached by
source, name, options and device), CuPy's driver call launches it on torch's current stream, and arguments turn
into C values by the same rules (a tensor its data pointer, an int a 32-bit int, a float a 32-bit float, the
`i64`/`u32`/... wrappers and numpy scalars their own widths). So the exported file needs CuPy where it runs, as
ksearch did (`pip install cupy-cuda12x`, or cupy-cuda13x to match the driver).

It imports nothing of ksearch, and its text has no try/except and no `pass` (KernelBench's static checker refuses
both anywhere in a file, comments aside). tests/tools/test_export_kernel.py keeps it in step with gpu/nvrtc.py.
"""

import types


def _ksearch_nvrtc() -> types.SimpleNamespace:
    """`ksearch.gpu.nvrtc` without ksearch: compile(source, name, options, name_expressions=...) -> Kernel,
    Kernel.launch(grid, block, args, shared_mem=0, stream=None), and the i32/i64/u32/u64/f32/f64 wrappers."""
    import ctypes
    import hashlib
    import importlib.util
    import time
    from collections.abc import Sequence
    from types import SimpleNamespace
    from typing import Any, cast

    smem_default = 48 * 1024  # dynamic shared memory a launch gets without asking
    attr_max_dynamic_shared = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

    class Scalar:
        """A value of an explicit C width."""

        def __init__(self, ctype: Any, value: Any) -> None:
            self.ctype = ctype
            self.value = value

    def i32(v: int) -> Scalar:
        return Scalar(ctypes.c_int32, v)

    def i64(v: int) -> Scalar:
        return Scalar(ctypes.c_int64, v)

    def u32(v: int) -> Scalar:
        return Scalar(ctypes.c_uint32, v)

    def u64(v: int) -> Scalar:
        return Scalar(ctypes.c_uint64, v)

    def f32(v: float) -> Scalar:
        return Scalar(ctypes.c_float, v)

    def f64(v: float) -> Scalar:
        return Scalar(ctypes.c_double, v)

    tensor_type: list[Any] = [None]  # torch.Tensor, once a launch has imported torch
    dims: dict[Any, tuple[int, int, int]] = {}  # grid and block shapes seen before

    def to_ctype(arg: Any) -> Any:
        if tensor_type[0] is not None and isinstance(arg, tensor_type[0]):  # the common case first
            if not arg.is_cuda:
                raise TypeError("nvrtc kernels take CUDA tensors; got a tensor on " + str(arg.device))
            return ctypes.c_void_p(arg.data_ptr())
        if isinstance(arg, Scalar):
            return arg.ctype(arg.value)
        if hasattr(arg, "data_ptr") and hasattr(arg, "is_cuda"):  # a torch.Tensor
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
        import numpy as np

        if isinstance(arg, np.generic):
            if arg.dtype == np.float16:
                return ctypes.c_uint16(int(arg.view(np.uint16)))
            return np.ctypeslib.as_ctypes(cast(Any, arg))  # a numpy scalar; its stubs list each dtype apart
        raise TypeError(
            f"cannot give {type(arg).__name__} to a CUDA kernel; use a tensor, int, float, bool, "
            "a numpy scalar or nvrtc.i64/u32/u64/f64"
        )

    def dim3(d: int | Sequence[int]) -> tuple[int, int, int]:
        cacheable = type(d) is int or (type(d) is tuple and all(type(x) is int for x in d))
        hit = dims.get(d) if cacheable else None
        if hit is not None:
            return hit
        t = (d,) if isinstance(d, int) else tuple(int(x) for x in d)
        if not 1 <= len(t) <= 3 or any(x < 1 for x in t):
            raise ValueError(f"grid/block must be 1 to 3 positive ints, got {d!r}")
        full = (*t, 1, 1)
        out = full[0], full[1], full[2]
        if cacheable and len(dims) < 4096:
            dims[d] = out
        return out

    class Kernel:
        """A compiled `__global__` function: launch(grid, block, args, shared_mem=0, stream=None)."""

        def __init__(self, name: str, source_hash: str, raw: Any, compile_seconds: float = 0.0) -> None:
            self.name = name
            self.source_hash = source_hash
            self._raw = raw  # cupy.RawKernel
            self.compile_seconds = compile_seconds
            self._smem_limit = smem_default
            self._launch: Any = None  # (launchKernel, raw current stream, current device), looked up once
            self._ptr = 0

        @property
        def ptr(self) -> int:
            return int(self._raw.kernel.ptr)

        def attributes(self) -> dict[str, int]:
            """Registers per thread, static shared and local bytes, max threads per block."""
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
            # what a call looks up is looked up once: a short kernel's timing includes its launch
            if self._launch is None:
                import torch
                from cupy.cuda import driver

                tensor_type[0] = torch.Tensor
                self._launch = (
                    driver.launchKernel,
                    torch._C._cuda_getCurrentRawStream,
                    torch.cuda.current_device,
                )
                self._ptr = self.ptr
            launch, raw_stream, device = self._launch
            g, b = dim3(grid), dim3(block)
            if shared_mem > self._smem_limit:
                from cupy.cuda import driver

                driver.funcSetAttribute(self._ptr, attr_max_dynamic_shared, int(shared_mem))
                self._smem_limit = int(shared_mem)
            c_args = [to_ctype(a) for a in args]
            ptrs = (ctypes.c_void_p * max(len(c_args), 1))(*[ctypes.addressof(a) for a in c_args])
            if stream is None:
                handle = raw_stream(device())
            else:  # a torch or CuPy stream, or a raw stream handle
                handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(cast(Any, stream))
            launch(
                self._ptr,
                g[0],
                g[1],
                g[2],
                b[0],
                b[1],
                b[2],
                int(shared_mem),
                handle,
                ctypes.addressof(ptrs),
                0,
            )

        __call__ = launch

    cache: dict[str, Kernel] = {}

    def compile(
        source: str, name: str, options: Sequence[str] = (), *, name_expressions: Sequence[str] | None = None
    ) -> Kernel:
        """Compile `source` with NVRTC and return its `__global__` function `name` (cached)."""
        if not isinstance(source, str) or not source.strip():
            raise ValueError("nvrtc.compile needs the CUDA source as a non-empty string")
        if importlib.util.find_spec("cupy") is None:
            raise RuntimeError(
                "CuPy is not installed: this file compiles its CUDA kernels with NVRTC through CuPy; "
                "`pip install cupy-cuda12x` (or cupy-cuda13x to match the CUDA driver)"
            )
        import cupy
        import torch

        dev = torch.cuda.current_device()
        opts = tuple(options)
        key = hashlib.sha256(
            repr((source, name, opts, tuple(name_expressions or ()), dev)).encode()
        ).hexdigest()
        hit = cache.get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        with cupy.cuda.Device(dev):
            module = cupy.RawModule(
                code=source,
                options=opts,
                backend="nvrtc",
                name_expressions=list(name_expressions) if name_expressions else None,
            )
            raw = module.get_function(name)
            raw.kernel  # noqa: B018 - compiles and loads now, so a compile error surfaces here with its log
        k = Kernel(name, key[:16], raw, time.perf_counter() - t0)
        cache[key] = k
        return k

    return SimpleNamespace(
        compile=compile,
        Kernel=Kernel,
        i32=i32,
        i64=i64,
        u32=u32,
        u64=u64,
        f32=f32,
        f64=f64,
        _to_ctype=to_ctype,  # for the tests that keep this launcher in step with ksearch.gpu.nvrtc
        _dim3=dim3,
    )
