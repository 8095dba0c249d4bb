"""A final evaluation's check of timed outputs that adds no work between the timed calls.

Any work between a KernelBench loop's calls changes what its events read: on the H200 a LayerNorm kernel read
227-249 us back to back, 232-300 us with a check of 65536 sampled elements queued on the device after each call,
258-444 us with the whole check on the host or on the device (bench/kb_final_gap.py,
bench/results/kb-final-gap-h200*.json). KernelBench's own loop checks nothing, so its number is the back-to-back
one.

Here the outputs of `k` timed calls, drawn before the loop from the OS's randomness (the candidate cannot know
which), are kept by reference: a set lookup and an append on the host, no device work. They are compared with the
reference after the loop. So that keeping them does not send the next call's output to `cudaMalloc` inside the
events, the allocator is given `k` + 1 free blocks of each output's size before the loop. Measured so, the same
kernel read 227.7-256.8 us: from -4.5% to +2.5% of the same round's back-to-back loop in seven rounds of nine, 8.7%
and 12.7% above it in two, the whole loop slower (its median too), not explained; the calls right after a kept one
read the same as the others, and the loop makes at most one allocation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.checks.outputs import OutputCheck, flatten

KEPT = (
    8  # timed calls whose outputs are checked: a candidate wrong on every call is caught, one wrong on 1 call
)
# in 4 with probability 1 - 0.75**8 = 90%
MEMORY_SHARE = 0.25  # of the device's free memory the kept outputs may hold


class KeptOutputs:
    def __init__(self, exp: Any, trials: int, k: int = KEPT) -> None:
        self.exp = flatten(exp)
        self.nbytes = [e.numel() * e.element_size() for e in self.exp if isinstance(e, torch.Tensor)]
        per_call = max(1, sum(self.nbytes))
        free = self._free_bytes()
        k = max(1, min(k, trials, int(MEMORY_SHARE * free) // per_call))
        self.chosen = frozenset(random.SystemRandom().sample(range(trials), k))
        self.kept: list[tuple[int, Any]] = []

    def _free_bytes(self) -> int:
        dev = next((e.device for e in self.exp if isinstance(e, torch.Tensor)), None)
        if dev is None or dev.type != "cuda":
            return 1 << 40
        return int(torch.cuda.mem_get_info(dev)[0])

    def prewarm(self) -> None:
        """Free blocks of each output's size for the calls after a kept one (call after the loop's empty_cache)."""
        for e in self.exp:
            if isinstance(e, torch.Tensor) and e.device.type == "cuda" and e.numel():
                blocks = [torch.empty_like(e) for _ in range(len(self.chosen) + 1)]
                del blocks

    def add(self, trial: int, out: Any) -> None:
        """Within the loop, after each timed call's events: keep `out` if `trial` was chosen."""
        if trial in self.chosen:
            self.kept.append((trial, out))

    def first_failure(
        self, compare: Callable[[Any], OutputCheck]
    ) -> tuple[tuple[int, OutputCheck] | None, str | None]:
        """After the loop: the first kept trial whose output `compare` fails, and a note when several kept outputs
        were the same memory (each then holds what the last call wrote)."""
        note = None
        ptrs = {t.data_ptr() for _, out in self.kept for t in flatten(out) if isinstance(t, torch.Tensor)}
        outputs = sum(1 for _, out in self.kept for t in flatten(out) if isinstance(t, torch.Tensor))
        if len(ptrs) < outputs:
            note = (
                "note: the candidate returned the same memory on several timed calls: their outputs were checked as "
                "that memory stood after the last call"
            )
        for trial, out in self.kept:
            chk = compare(out)
            if not chk.passed:
                return (trial, chk), note
        return None, note
