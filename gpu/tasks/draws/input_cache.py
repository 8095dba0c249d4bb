"""Inputs that are slow to draw, drawn once per (workload, seed) in a worker and reused, bit for bit.

A GPU MODE generator may draw on the CPU (TriMul's Cauchy inputs: 134M values take ~8 s on one core), and an
evaluation asks for the same (workload, seed) again and again: every candidate of a search is checked on the
same trial seeds and timed on the task's own seeds. The first draw is kept on the host with a checksum and the
generators' states right after it; a later request gets a device copy of exactly those values and leaves the
generators exactly as a fresh draw would (so a reference that draws weights afterwards sees the same state).
Only draws slower than `MIN_DRAW_S` are kept, within a byte budget (least recently used out first), so quick
generators run as before. A kept copy whose checksum no longer matches (something in the process wrote into it)
is dropped and drawn again.

With a draws store (gpu/tasks/draws/store.py, set by the worker at its start), a draw this process does not keep
is looked for there before it is drawn, and a slow draw is also written there when this process may write it:
the draws then outlive the process.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ksearch.gpu.tasks.draws.store import DrawStore, rng_state, set_rng_state
from ksearch.gpu.tasks.rt.common import clone_data, to_device

MIN_DRAW_S = 0.25  # a draw faster than this is cheaper to repeat than to keep
BUDGET_BYTES = (
    8 << 30
)  # host memory the kept draws may take in one worker (a worker raises it, see budget_for)
STORE: DrawStore | None = None  # this process's draws store (the worker sets it from its configuration)


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


@dataclass
class _Kept:
    data: Any  # on the host
    sum: int
    rng: tuple[Any, ...]
    nbytes: int


def budget_for(memory_limit_bytes: int) -> int:
    """The kept draws' budget in a worker with this host-memory limit: two fifths of it, at least BUDGET_BYTES's
    default. A final evaluation checks every candidate on the same inputs: kept, they are drawn for the first
    candidate alone (TriMul's held-out draws alone take ~16 GB)."""
    return max(8 << 30, int(0.4 * memory_limit_bytes))


class InputCache:
    """Draws by key, the slow ones kept (see the module's docstring)."""

    def __init__(
        self,
        budget_bytes: int | None = None,
        min_draw_s: float = MIN_DRAW_S,
        *,
        store: DrawStore | None = None,
        scope: str = "",
    ) -> None:
        self.budget = BUDGET_BYTES if budget_bytes is None else budget_bytes
        self.min_draw_s = min_draw_s
        self.store = store if store is not None else STORE
        self.scope = scope  # what the draws depend on beside their key (the generator's code)
        self._kept: OrderedDict[tuple[Any, ...], _Kept] = OrderedDict()
        self.hits = 0
        self.draw_s = 0.0  # seconds spent drawing (not on hits)
        self.largest = 0  # bytes of the largest draw kept or loaded

    def has(self, key: tuple[Any, ...]) -> bool:
        """Whether a request for `key` would be served without drawing (kept here or in the store)."""
        return key in self._kept or (self.store is not None and self.store.has(self.scope, key))

    def get(self, key: tuple[Any, ...], draw: Callable[[], Any], device: str, keep: bool = True) -> Any:
        """`draw()`'s data on `device`: drawn now, or a copy of the kept draw for `key`. `keep=False`: a draw made
        now is not kept (the caller asks for it once; keeping a large one costs a host copy and a checksum)."""
        if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
            # fake tensors (the task-facts probe): shapes without data, nothing to keep or to serve
            return draw()
        kept = self._kept.get(key)
        if kept is not None:
            if checksum(kept.data) == kept.sum:
                self._kept.move_to_end(key)
                self.hits += 1
                set_rng_state(kept.rng)
                return _serve(kept.data, device)
            del self._kept[key]  # written into since it was kept: never serve it
        stored = self.store.load(self.scope, key, checksum) if self.store is not None else None
        if stored is not None:
            host, total, rng = stored
            self._remember(key, _Kept(host, total, rng, _size(host)))
            set_rng_state(rng)
            self.hits += 1
            return _serve(host, device)
        t0 = time.perf_counter()
        data = draw()
        took = time.perf_counter() - t0
        self.draw_s += took
        if keep and took >= self.min_draw_s:
            kept = self._keep(key, data)
            if self.store is not None and self.store.writable:
                self.store.save(self.scope, key, kept.data, kept.sum, kept.rng)
        return to_device(data, device)

    def _keep(self, key: tuple[Any, ...], data: Any) -> _Kept:
        host = to_device(clone_data(data), "cpu")
        kept = _Kept(host, checksum(host), rng_state(), _size(host))
        self._remember(key, kept)
        return kept

    def _remember(self, key: tuple[Any, ...], kept: _Kept) -> None:
        self.largest = max(self.largest, kept.nbytes)
        if kept.nbytes > self.budget:
            return
        while self._kept and sum(k.nbytes for k in self._kept.values()) + kept.nbytes > self.budget:
            self._kept.popitem(last=False)
        self._kept[key] = kept


def _serve(host: Any, device: str) -> Any:
    """A copy of kept host data on `device` (the kept copy is never handed out)."""
    return clone_data(host) if torch.device(device).type == "cpu" else to_device(host, device)


def _size(host: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(host))
