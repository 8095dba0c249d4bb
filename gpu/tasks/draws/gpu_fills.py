"""A GPU MODE generator's random fills from torch's global CPU generator, made on the GPU.

GPU MODE's evaluator never seeds its worker's global generators, so a generator that fills a CPU tensor from
torch's global CPU generator (TriMul: `torch.distributions.Cauchy(0, 2).sample(shape)`, a `cauchy_` fill) gives
values that are not a function of the workload's seed there: they depend on the process's default seed and on what
it drew before. Such a fill also runs on one core (TriMul's largest input, 805M values: ~17 s), and a final
evaluation draws fresh inputs for every timed call.

On a GPU evaluation ksearch makes those fills on the GPU: the same op (`cauchy_`, `normal_`, `uniform_`,
`exponential_`, `log_normal_`) with the same arguments, drawn in float64 (as the CPU's `cauchy_` computes; its heavy
tail intact) from a CUDA generator seeded by the trial's seed and cast to the tensor's dtype. A fill of fresh memory
(a tensor just allocated, TriMul's case) keeps them on the GPU until something reads the tensor: a move to the GPU
then copies nothing across (gpu/tasks/draws/lazy_fills.py); any other fill copies them into the very CPU tensor the
generator asked to fill. The values are a function of the seed, as every input in ksearch is; they
are not the CPU generator's for that seed, which the owner's evaluator does not produce either.

Not done where the owner's values are a function of its seed: a fill given its own `generator=`, and every fill
after the generator seeds torch's global generator itself (`torch.manual_seed`, `torch.set_rng_state`, or a changed
`torch.initial_seed()`) within the call.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ksearch.gpu.tasks.draws.lazy_fills import LazyFills

FILLS = (
    torch.Tensor.cauchy_,
    torch.Tensor.normal_,
    torch.Tensor.uniform_,
    torch.Tensor.exponential_,
    torch.Tensor.log_normal_,
)
CHUNK = 1 << 25  # values drawn per GPU launch: 256 MB of float64 at a time, whatever the tensor's size
_SALT = 0x5DEECE66D  # the fills' generator differs from the global CUDA one seeded with the same number


def fill_seed(seed: int) -> int:
    """The CUDA generator's seed for a trial's fills: derived from the seed, apart from the global generators'."""
    return (seed * 1_000_003 + _SALT) % (1 << 63)


class _GpuFills(TorchFunctionMode):
    def __init__(self, device: torch.device, seed: int) -> None:
        super().__init__()
        self.device = device
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(fill_seed(seed))
        self.initial = torch.initial_seed()
        self.owner_seeded = False
        self.made: Counter[str] = Counter()
        self.lazy = LazyFills(device)  # values kept on the device until something reads them

    def _applies(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if func not in FILLS or kwargs.get("generator") is not None or not args:
            return False
        t = args[0]
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not t.is_floating_point():
            return False
        if type(t) is not torch.Tensor or t.requires_grad:  # fake tensors, subclasses: as they are
            return False
        if torch.initial_seed() != self.initial:  # the generator re-seeded the global generator its own way
            self.owner_seeded = True
        return not self.owner_seeded

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if not self._applies(func, args, kwargs):
            return self.lazy.handle(func, args, kwargs)
        t, rest = args[0], args[1:]
        kwargs["generator"] = self.gen
        self.made[func.__name__] += 1
        if t.is_contiguous() and self.lazy.can_keep(t):
            values = torch.empty(t.shape, dtype=t.dtype, device=self.device)
            self._draw(func, values.view(-1), rest, kwargs)
            return self.lazy.keep(t, values)
        target = t if t.is_contiguous() else torch.empty(t.shape, dtype=t.dtype)
        self._draw(func, target.view(-1), rest, kwargs)
        if target is not t:
            t.copy_(target)
        return t

    def _draw(self, func: Any, out: torch.Tensor, rest: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Fill the flat `out` (any device) chunk by chunk, each drawn in float64 on the device: the same values
        wherever `out` lies."""
        for i in range(0, out.numel(), CHUNK):
            n = min(CHUNK, out.numel() - i)
            drawn = func(torch.empty(n, dtype=torch.float64, device=self.device), *rest, **kwargs)
            out[i : i + n].copy_(drawn.to(out.dtype))


_SEEDERS = ("manual_seed", "set_rng_state", "seed")
MADE: Counter[str] = (
    Counter()
)  # fills this process made on the GPU, by op (a worker reports each request's share)


@contextlib.contextmanager
def gpu_fills(device: str, seed: int) -> Iterator[Counter[str] | None]:
    """Within: fills of CPU tensors from torch's global CPU generator made on `device`, seeded by `seed` (see the
    module's docstring). Yields the count of fills made so, by op name; None (nothing changed) when `device` is not
    a CUDA device or no GPU is usable."""
    if not applies(device):
        yield None
        return
    with redirected_fills(torch.device(device), seed) as made:
        try:
            yield made
        finally:
            MADE.update(made)


def applies(device: str) -> bool:
    """Whether draws for `device` have their global-CPU-generator fills made on the GPU."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


@contextlib.contextmanager
def redirected_fills(device: torch.device, seed: int) -> Iterator[Counter[str]]:
    """The mechanism of `gpu_fills` on any device (the tests run it on the CPU)."""
    mode = _GpuFills(device, seed)
    originals = {(m, name): getattr(m, name) for m in (torch, torch.random) for name in _SEEDERS}

    def seeder(fn: Any) -> Any:
        def inner(*a: Any, **k: Any) -> Any:
            mode.owner_seeded = (
                True  # from here on the owner's draws are its seed's: drawn as its code draws them
            )
            return fn(*a, **k)

        return inner

    try:
        for (m, name), fn in originals.items():
            setattr(m, name, seeder(fn))
        with mode.lazy.hooked():
            try:
                with mode:
                    yield mode.made
            finally:
                mode.lazy.write_all()  # tensors that outlive the context hold their values
    finally:
        for (m, name), fn in originals.items():
            setattr(m, name, fn)
