"""Inputs that are slow to draw, drawn once per (workload, seed) in a worker and reused, bit for bit.

A GPU MODE generator may draw on the CPU (TriMul's Cauchy inputs: 134M values take ~8 s on one core), and an
evaluation asks for the same (workload, seed) again and again: every candidate of a search is checked on the
same trial seeds and timed on the task's own seeds. The first draw is kept on the host with a checksum and the
generators' states right after it; a later request gets a device copy of exactly those values and leaves the
generators exactly as a fresh draw would (so a reference that draws weights afterwards sees the same state).
Only draws slower than `MIN_DRAW_S` are kept, within a byte budget (least recently used out first), so quick
generators run as before. A kept copy whose checksum no longer matches (something in the process wrote into it)
is dropped and drawn again.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ksearch.gpu.tasks.rt_common import clone_data, to_device

MIN_DRAW_S = 0.25  # a draw faster than this is cheaper to repeat than to keep
BUDGET_BYTES = 8 << 30  # host memory the kept draws may take in one worker


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def checksum(value: Any) -> int:
    """A sum over every tensor's raw bytes, as int64 words (cheap; any write changes it in practice)."""
    total = 0
    for t in _tensors(value):
        raw = t.detach().contiguous().view(-1).view(torch.uint8)
        n8 = raw.numel() // 8 * 8
        total += (
            int(raw[:n8].view(torch.int64).sum().item()) + int(raw[n8:].sum().item()) if raw.numel() else 0
        )
    return total


def _rng_state() -> tuple[Any, ...]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda, np.random.get_state(), random.getstate()


def _set_rng_state(state: tuple[Any, ...]) -> None:
    cpu, cuda, np_state, py_state = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    np.random.set_state(np_state)
    random.setstate(py_state)


@dataclass
class _Kept:
    data: Any  # on the host
    sum: int
    rng: tuple[Any, ...]
    nbytes: int


class InputCache:
    """Draws by key, the slow ones kept (see the module's docstring)."""

    def __init__(self, budget_bytes: int = BUDGET_BYTES, min_draw_s: float = MIN_DRAW_S) -> None:
        self.budget = budget_bytes
        self.min_draw_s = min_draw_s
        self._kept: OrderedDict[tuple[Any, ...], _Kept] = OrderedDict()
        self.hits = 0
        self.draw_s = 0.0  # seconds spent drawing (not on hits)

    def get(self, key: tuple[Any, ...], draw: Callable[[], Any], device: str) -> Any:
        """`draw()`'s data on `device`: drawn now, or a copy of the kept draw for `key`."""
        kept = self._kept.get(key)
        if kept is not None:
            if checksum(kept.data) == kept.sum:
                self._kept.move_to_end(key)
                self.hits += 1
                _set_rng_state(kept.rng)
                on_cpu = torch.device(device).type == "cpu"
                return clone_data(kept.data) if on_cpu else to_device(kept.data, device)
            del self._kept[key]  # written into since it was kept: never serve it
        t0 = time.perf_counter()
        data = draw()
        took = time.perf_counter() - t0
        self.draw_s += took
        if took >= self.min_draw_s:
            self._keep(key, data)
        return to_device(data, device)

    def _keep(self, key: tuple[Any, ...], data: Any) -> None:
        host = to_device(clone_data(data), "cpu")
        nbytes = sum(t.numel() * t.element_size() for t in _tensors(host))
        if nbytes > self.budget:
            return
        while self._kept and sum(k.nbytes for k in self._kept.values()) + nbytes > self.budget:
            self._kept.popitem(last=False)
        self._kept[key] = _Kept(host, checksum(host), _rng_state(), nbytes)
