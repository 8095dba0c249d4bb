"""CPU tensors whose values are kept on the GPU until something reads them.

A generator like TriMul's draws a CPU tensor (`torch.distributions.Cauchy(0, 2).sample(shape)`: an uninitialised
tensor, a `cauchy_` fill, then `loc + eps * scale`) and moves it to the GPU (`.to(device="cuda")`). With the fill made
on the GPU (gpu/tasks/draws/gpu_fills.py) that path still copies every value to the host, runs the arithmetic on the CPU
and copies the result back: 0.62 s per draw of TriMul's bench4 (134M values) on the H200, a final evaluation draws
one per timed call, and about 100 calls per workload.

Here such a fill leaves the CPU tensor unwritten and keeps its values on the GPU (its *shadow*). Elementwise `add`,
`sub`, `mul` and `neg` of shadowed tensors with numbers or 0-dim CPU tensors run on the shadows (the same op on the
same float32/float64 values, each result correctly rounded on both devices: the same bits); a move to the shadow's
GPU returns a copy of the shadow. Anything else that touches a shadowed tensor (indexing, views, in-place ops,
`numpy()`, printing, another device) first copies its shadow into it, as does leaving the fills' context with the
tensor still alive: whatever reads its memory reads the values.

Only a tensor the fills saw allocated from sizes alone (`torch.empty(n)`, `Tensor.new(size)`, ...; not `out=`, not
`Tensor.new(tensor)`) and passed to no other op before its fill is kept so, outside inference mode: nothing else can
share its memory, since every view of it would have been made by an op the fills see. The C paths that alias or
read a tensor unseen by the mode (`nn.Parameter`, `as_subclass`, the legacy `torch.Tensor(t)`, DLPack, nested
tensors) are patched for the context's length to write the values in first. Ops that keep a graph
(`requires_grad` operands) and casts to integer types run as written. What is not covered: another thread reading
such a tensor while the context is open (a torch function mode is the entering thread's alone); a generator's draw
runs in the worker's one thread.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nested
import torch.utils.dlpack
from torch.utils._pytree import tree_leaves

# ops whose result is fresh, uninitialised memory of its own
ALLOC = frozenset({torch.empty, torch.empty_like, torch.Tensor.new, torch.Tensor.new_empty})
# elementwise ops run on the shadows instead (no `div`: CUDA divides by a scalar as a multiplication by its
# reciprocal, not bit for bit the CPU's quotient)
ARITH = frozenset({
    torch.Tensor.add, torch.Tensor.sub, torch.Tensor.mul, torch.Tensor.neg,
    torch.add, torch.sub, torch.mul, torch.neg,
})  # fmt: skip
# reads of a tensor's metadata, not of its values
NO_DATA = frozenset({
    torch.Tensor.size, torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.stride, torch.Tensor.is_contiguous,
    torch.Tensor.element_size, torch.Tensor.nelement, torch.Tensor.is_floating_point, torch.Tensor.__len__,
    torch.Tensor.storage_offset,
})  # fmt: skip
_NO_DATA_PROPS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "grad"})
KEPT_DTYPES = (torch.float32, torch.float64)
# C paths that alias or read a tensor without a torch function mode seeing it: (owner, name, leading arguments that
# are not data: a class). Patched for the context's length, like the seeders (gpu_fills.redirected_fills).
_BYPASSES: list[tuple[Any, str, int]] = [
    (torch.Tensor, "_make_subclass", 1),  # nn.Parameter, nn.Buffer
    (torch.Tensor, "as_subclass", 0),
    (torch.Tensor, "__new__", 1),  # the legacy constructor torch.Tensor(t)
    (torch.utils.dlpack, "to_dlpack", 0),
    (torch.nested, "nested_tensor", 0),
    (torch.nested, "as_nested_tensor", 0),
]
# bound at import: an evaluation poisons torch.empty_strided (checking.poisoned_allocations), and a stand-in for a
# result whose values are its shadow's need not be written with NaN first (537 MB of TriMul's bench4: ~0.05 s)
_empty_strided = torch.empty_strided


class LazyFills:
    """The shadows of one fills context (see the module's docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        # id -> (address, numel) of fresh tensors: no weak reference on them (torch.utils.swap_tensors refuses a
        # tensor that has one); a dead one's entry cannot match a later tensor unless it has the same id and memory
        self._fresh: dict[int, tuple[int, int]] = {}
        self._shadow: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self.kept = 0  # tensors whose values were kept on the device
        self.written = 0  # of those, copied into their CPU memory after all

    # ---- what the fills ask

    def can_keep(self, t: torch.Tensor) -> bool:
        """Whether a fill of `t` may leave its memory unwritten: fresh (or already shadowed) memory of its own,
        outside inference mode (an inference tensor cannot be written later, outside it)."""
        if t.dtype not in KEPT_DTYPES or torch.is_inference_mode_enabled() or t.is_inference():
            return False
        return self._fresh.get(id(t)) == _memory(t) or self._shadowed(t)

    def keep(self, t: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """`t`'s values are `values` (on the device) from now on; returns `t`."""
        self._fresh.pop(id(t), None)
        self._track(t, values)
        return t

    # ---- every other op within the context

    def handle(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run `func` as the context's mode sees it."""
        if func in ALLOC and _sizes_only(func, args, kwargs):
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and out.device.type == "cpu" and type(out) is torch.Tensor:
                self._fresh[id(out)] = _memory(out)
            return out
        self._forget_fresh(args, kwargs)
        if not self._shadow or not any(self._shadowed(x) for x in tree_leaves((args, kwargs))):
            return func(*args, **kwargs)
        if func in NO_DATA or _is_metadata_get(func):
            return func(*args, **kwargs)
        if func in ARITH:
            out = self._arith(func, args, kwargs)
            if out is not None:
                return out
        if func in (torch.Tensor.to, torch.Tensor.cuda):
            out = self._move(func, args, kwargs)
            if out is not None:
                return out
        for x in tree_leaves((args, kwargs)):
            if self._shadowed(x):
                self._write(x)
        return func(*args, **kwargs)

    def release(self, *objs: Any) -> None:
        """Before a path the mode does not see (an alias or a read made in C: nn.Parameter, as_subclass, the legacy
        constructor, DLPack, nested tensors) takes `objs`: their shadows written in, none fresh any more."""
        for x in tree_leaves(objs):
            if isinstance(x, torch.Tensor):
                self._fresh.pop(id(x), None)
                if self._shadowed(x):
                    self._write(x)

    def write_all(self) -> None:
        """Copy every live shadow into its tensor (the context ends: its tensors may be read by anything)."""
        self._fresh.clear()
        for i in list(self._shadow):
            ref, _ = self._shadow[i]
            t = ref()
            if t is not None:
                self._write(t)

    @contextlib.contextmanager
    def hooked(self) -> Iterator[None]:
        """Within: the C paths that alias or read a tensor without the mode seeing them release it first."""
        saved: list[tuple[Any, str, Any, bool]] = []

        def wrap(fn: Any, skip: int) -> Any:
            def inner(*a: Any, **k: Any) -> Any:
                self.release(a[skip:], k)
                return fn(*a, **k)

            return inner

        for owner, name, skip in _BYPASSES:
            fn = getattr(owner, name, None)
            if fn is None:
                continue
            own = name in vars(owner)
            raw = vars(owner)[name] if own else None
            wrapped = wrap(fn, skip)
            if isinstance(raw, staticmethod) or name in ("_make_subclass", "__new__"):
                wrapped = staticmethod(wrapped)
            saved.append((owner, name, raw, own))
            setattr(owner, name, wrapped)
        try:
            yield
        finally:
            for owner, name, raw, own in reversed(saved):
                if own:
                    setattr(owner, name, raw)
                else:
                    delattr(owner, name)

    # ---- inside

    def _shadowed(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor) and id(x) in self._shadow and self._shadow[id(x)][0]() is x

    def _forget_fresh(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._fresh:
            for x in tree_leaves((args, kwargs)):
                if isinstance(x, torch.Tensor):
                    self._fresh.pop(id(x), None)

    def _track(self, t: torch.Tensor, values: torch.Tensor) -> None:
        self._shadow[id(t)] = (weakref.ref(t, self._dropper(self._shadow, id(t))), values)
        self.kept += 1

    @staticmethod
    def _dropper(table: dict[int, Any], i: int) -> Callable[[Any], None]:
        """A weak reference's callback: the entry goes when its tensor does (a shadow's device memory with it)."""

        def drop(_ref: Any) -> None:
            table.pop(i, None)

        return drop

    def _write(self, t: torch.Tensor) -> None:
        values = self._shadow[id(t)][1]
        # past the mode (a hook may write from the owner's code); a shadowed tensor never requires grad
        with torch._C.DisableTorchFunction(), torch.no_grad():
            t.copy_(values)
        del self._shadow[id(t)]  # after the copy: a failed one leaves the shadow for write_all to try again
        self.written += 1

    def _new_shadowed(self, values: torch.Tensor) -> torch.Tensor:
        # never written unless something reads it; past every torch function mode (the poisoning one too)
        with torch._C.DisableTorchFunction():
            out = _empty_strided(values.shape, values.stride(), dtype=values.dtype)
        self._track(out, values)
        return out

    def _arith(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
        if kwargs or len(args) > 2 or torch.is_inference_mode_enabled():
            return None  # alpha (by name or by place: the CPU may fuse a scaled add), out=; inference tensors
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return None  # the result has a graph: it is made as written
        moved: list[Any] = []
        for a in args:
            if self._shadowed(a):
                moved.append(self._shadow[id(a)][1])
            elif isinstance(a, (int, float)) or (
                isinstance(a, torch.Tensor)
                and a.dim() == 0
                and a.device.type == "cpu"
                and type(a) is torch.Tensor
            ):
                moved.append(a)  # a number, or a 0-dim CPU tensor (a number to every device's op)
            else:
                return None
        values = func(*moved)
        if values.dtype not in KEPT_DTYPES:
            return None
        return self._new_shadowed(values)

    def _move(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
        t, rest = args[0], args[1:]
        if not self._shadowed(t):
            return None
        k = dict(kwargs)
        if k.pop("copy", False):
            return None
        k.pop("non_blocking", None)  # the result is ready when it is returned either way
        if func is torch.Tensor.cuda:
            dev = rest[0] if rest else k.pop("device", None)
            if k.get("memory_format", torch.preserve_format) is not torch.preserve_format:
                return None
            device, dtype = torch.device("cuda" if dev is None else dev), None
            if isinstance(dev, int):
                device = torch.device("cuda", dev)
        else:
            try:
                device, dtype, _, fmt = torch._C._nn._parse_to(*rest, **k)
            except TypeError:
                return None
            if fmt not in (None, torch.preserve_format):
                return None
        values = self._shadow[id(t)][1]
        dtype = dtype or t.dtype
        if not dtype.is_floating_point or torch.is_inference_mode_enabled():
            return None  # a cast to an integer type saturates on CUDA where the CPU's wraps
        if device is None or device.type == "cpu":
            return t if dtype == t.dtype else self._new_shadowed(values.to(dtype))
        if _same_device(device, values.device):
            return values.to(dtype) if dtype != values.dtype else values.clone()
        return None


def _memory(t: torch.Tensor) -> tuple[int, int]:
    return t.data_ptr(), t.numel()


def _sizes_only(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an allocation call makes memory of its own from sizes alone (not `Tensor.new(tensor|storage|data)`,
    not `out=`, which return or alias existing memory)."""
    if "out" in kwargs:
        return False
    if func is torch.empty_like or func is torch.Tensor.new_empty:
        return True
    sizes = args[1:] if func is torch.Tensor.new else args
    if "size" in kwargs and not sizes:
        sizes = (kwargs["size"],)
    if len(sizes) == 1 and isinstance(sizes[0], (torch.Size, list, tuple)) and func is not torch.Tensor.new:
        sizes = tuple(sizes[0])
    elif len(sizes) == 1 and isinstance(sizes[0], torch.Size):
        sizes = tuple(sizes[0])
    return bool(sizes) and all(isinstance(n, int) and not isinstance(n, bool) for n in sizes)


def _is_metadata_get(func: Callable[..., Any]) -> bool:
    owner = getattr(func, "__self__", None)
    return getattr(func, "__name__", "") == "__get__" and getattr(owner, "__name__", "") in _NO_DATA_PROPS


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device()
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)
