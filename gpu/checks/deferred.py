"""Every timed output of a loop checked on the device, read once when the loop is over.

The `device_check` and `sampled_check` variants of bench/kb_final_gap.py, which a KernelBench final evaluation used
before it kept the outputs of calls chosen in secret instead (gpu/checks/kept_outputs.py): checked by
`checking.compare_outputs` between the calls, the host reads results back several times per check and the GPU idles
meanwhile, but even queued on the device the checks changed what the next call's events read (on the H200 a
LayerNorm kernel: 261-444 us against 228-249 us back to back). Here the shape, dtype and device of each output are checked on the host at once (metadata: no GPU work), and its
values are compared on the device by `checking.tolerance_masks`, the rule every check applies (NaN/Inf where the
reference is finite fails; elsewhere |got - ref| <= atol + rtol * |ref|, a non-finite reference matched exactly, up
to the tolerance's mismatch ratio), queued after the call's events; the counts are read back once, at the end.
"""

from __future__ import annotations

import secrets
from typing import Any

import torch

from ksearch.gpu.checks.outputs import (
    OutputCheck,
    compare_outputs,
    dtype_name,
    flatten,
    metadata_mismatch,
    subclass_output,
    tolerance_masks,
)
from ksearch.gpu.task import Tolerance


def deferrable(exp: Any) -> bool:
    """Whether outputs like `exp` can be checked on the device: every output a real or integer tensor."""
    outs = flatten(exp)
    return bool(outs) and all(
        isinstance(e, torch.Tensor) and not e.is_complex() and type(e) is torch.Tensor for e in outs
    )


class DeferredChecks:
    """Checks of many outputs against one expected output (see the module's docstring)."""

    def __init__(self, exp: Any, tol: Tolerance, sample: int | None = None) -> None:
        """`sample`: compare that many elements per output, drawn afresh for every call from a generator seeded by
        the OS (a candidate cannot know which), rather than every element: a few microseconds of GPU work
        between the calls instead of passes over the whole output."""
        self.exp_raw = exp
        self.exp = flatten(exp)
        self.tol = tol
        self.sample = sample
        self._gen: dict[torch.device, torch.Generator] = {}
        self._pending: list[tuple[int, torch.Tensor]] = []  # (trial, [mismatches, non-finite] per output)
        self.failure: tuple[int, OutputCheck] | None = None  # the first failing trial, once known

    def add(self, trial: int, got: Any) -> None:
        """Queue the check of one output (a metadata failure is known at once)."""
        if self.failure is not None:
            return
        meta = self._metadata(got)
        if meta is not None:
            self.failure = (trial, meta)
            return
        counts = [self._counts(*self._sampled(g, e)) for g, e in zip(flatten(got), self.exp, strict=True)]
        self._pending.append((trial, torch.stack(counts)))

    def first_failure(self) -> tuple[int, OutputCheck] | None:
        """The first trial whose output failed, with what failed; one read-back for every queued check. (A metadata
        failure stops the queue, so every queued trial came before it.)"""
        if self._pending:
            trials = [t for t, _ in self._pending]
            counts = torch.stack([c for _, c in self._pending]).cpu().tolist()  # [trials][outputs][2]
            self._pending = []
            for trial, per_out in zip(trials, counts, strict=True):
                for i, (mism, bad) in enumerate(per_out):
                    check = self._verdict(i, int(mism), int(bad))
                    if check is not None:
                        self.failure = (trial, check)
                        return self.failure
        return self.failure

    def _metadata(self, got: Any) -> OutputCheck | None:
        odd = subclass_output(got, self.exp_raw)
        if odd is not None:
            return odd
        gl = flatten(got)
        if len(gl) != len(self.exp) or not all(isinstance(g, torch.Tensor) for g in gl):
            return compare_outputs(got, self.exp_raw, self.tol)  # the count or kind of outputs is wrong
        return next(
            (
                odd
                for i, (g, e) in enumerate(zip(gl, self.exp, strict=True))
                if (odd := metadata_mismatch(g, e, i, named=len(gl) > 1))
            ),
            None,
        )

    def _sampled(self, g: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sample is None or e.numel() <= self.sample:
            return g, e
        gen = self._gen.get(e.device)
        if gen is None:
            gen = self._gen[e.device] = torch.Generator(device=e.device)
            gen.manual_seed(secrets.randbits(63))
        idx = torch.randint(0, e.numel(), (self.sample,), device=e.device, generator=gen)
        return g.reshape(-1)[idx], e.reshape(-1)[idx]

    def _counts(self, g: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """[mismatches, non-finite where the reference is finite] as a device tensor (no read-back)."""
        if e.numel() == 0:
            return torch.zeros(2, dtype=torch.int64, device=e.device)
        if not e.is_floating_point():
            return torch.stack([(g != e).sum(), torch.zeros((), dtype=torch.int64, device=e.device)])
        bad, mism, _, _ = tolerance_masks(g, e, *self.tol.for_dtype(dtype_name(e.dtype)))
        return torch.stack([(mism & ~bad).sum(), bad.sum()])

    def _verdict(self, i: int, mism: int, bad: int) -> OutputCheck | None:
        e = self.exp[i]
        where = f"output {i}: " if i else ""
        numel = e.numel()
        if self.sample is not None and numel > self.sample:
            where, numel = f"{where}of {self.sample} elements sampled, ", self.sample
        if bad:
            return OutputCheck(
                False,
                "nan_inf",
                f"{where}{bad} of {numel} elements are NaN/Inf where the reference is finite",
                mismatches=bad,
                numel=numel,
                output_index=i,
                caught_by="nonfinite",
            )
        if mism and mism > self.tol.mismatch_ratio * numel:
            atol, rtol = self.tol.for_dtype(dtype_name(e.dtype))
            return OutputCheck(
                False,
                "wrong_values",
                f"{where}{mism} of {numel} elements differ beyond atol={atol:g}, rtol={rtol:g}",
                mismatches=mism,
                numel=numel,
                output_index=i,
                caught_by="tolerance",
            )
        return None
