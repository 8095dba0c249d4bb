"""CUDA placements read as CPU ones, for measuring a reference's facts in a process without a GPU.

A GPU MODE reference often pins its data to the GPU (`torch.Generator(device='cuda')`, `device='cuda'`,
`.to('cuda')`, a module built and moved with `.to('cuda')`). The facts probe (gpu/tasks/rt/facts.py) has no
GPU, even on a GPU machine, and shapes, dtypes and FLOPs do not depend on the device: inside
`cuda_read_as_cpu()` such placements land on the CPU (under fake tensors, nothing is computed at all), and
CUDA housekeeping (`torch.cuda.synchronize`, seeding, emptying the cache) does nothing. Only the facts
subprocess and a compile's dry run (gpu/worker/dryrun.py: launches are recorded, nothing computed is judged) enter
it; candidates and references are never evaluated this way.
Imports torch: subprocesses only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

# torch.cuda calls that only order or tidy the GPU's work, or seed its generators: nothing to do on the CPU
NO_OPS = ("synchronize", "empty_cache", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_device")


def _is_cuda(device: Any) -> bool:
    if isinstance(device, str):
        return device.startswith("cuda")
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return False


class Placements:
    """What was read as CPU while the context was open: one entry per kind of placement, with a count."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def note(self, what: str) -> None:
        self.seen[what] = self.seen.get(what, 0) + 1

    def __bool__(self) -> bool:
        return bool(self.seen)


class _CudaAsCpu(TorchFunctionMode):
    """`device=` of any torch function or tensor method, and the device of `Tensor.to`, read as the CPU."""

    def __init__(self, placements: Placements) -> None:
        super().__init__()
        self.placements = placements

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if _is_cuda(kwargs.get("device")):
            kwargs = {**kwargs, "device": "cpu"}
            self.placements.note("device='cuda'")
        if func is torch.Tensor.to and any(_is_cuda(a) for a in args[1:]):
            args = tuple("cpu" if i and _is_cuda(a) else a for i, a in enumerate(args))
            self.placements.note(".to('cuda')")
        elif func is torch.Tensor.pin_memory:  # page-locking is for copies to a GPU
            return args[0]
        return func(*args, **kwargs)


@contextlib.contextmanager
def cuda_read_as_cpu() -> Iterator[Placements]:
    """Inside: CUDA placements land on the CPU and CUDA housekeeping does nothing (see the module's doc).
    The Placements it yields says what was read so, for the facts to say so."""
    placements = Placements()
    real_generator = torch.Generator

    class CpuGenerator(real_generator):  # type: ignore[misc,valid-type]
        """torch.Generator(device='cuda') as a CPU generator (still an instance of torch.Generator)."""

        def __new__(cls, device: Any = "cpu") -> Any:
            if _is_cuda(device):
                placements.note("torch.Generator(device='cuda')")
                device = "cpu"
            return super().__new__(cls, device)

    def moved(what: str) -> Callable[..., Any]:
        def stay(self: Any, *args: Any, **kwargs: Any) -> Any:
            placements.note(what)
            return self

        return stay

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    patches: list[tuple[Any, str, Any]] = [
        (torch, "Generator", CpuGenerator),
        (torch.Tensor, "cuda", moved(".cuda()")),
        (torch.nn.Module, "cuda", moved(".cuda()")),
        *((torch.cuda, name, nothing) for name in NO_OPS if hasattr(torch.cuda, name)),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:
        with _CudaAsCpu(placements):
            yield placements
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


__all__ = ["NO_OPS", "Placements", "cuda_read_as_cpu"]
