"""A second look at answers that skip the work, on tasks whose own inputs cannot tell them from the answer.

KernelBench draws inputs with `torch.rand`: on [0, 1) ReLU is the identity, so a candidate that returns
its input passes a ReLU task, as zeros or a constant pass a task whose output sits near one value. The
task's inputs stay what they are. When they are that weak (`checking.degenerate_answers` on the first
trial), the candidate and the reference also run once on *probe* inputs: the same inputs with every
floating-point tensor redrawn signed (`ksearch.gpu.inputs.signed`, same shape, dtype and device; integer tensors
and other values kept). The candidate fails (kind `degenerate`) when its output there is such a trivial
answer while the reference's is not, and differs from the reference's. Nothing else about the probe is
judged: an op may be defined only on the task's input range (a logarithm, a square root), so correctness
stays the task's own rule on the task's own inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ksearch.gpu.checks.outputs import clone_inputs, compare_tensor, finite_mean, flatten, trivial_answers
from ksearch.gpu.inputs import Fake, accepted_by, as_outputs, fake_answer, signed
from ksearch.gpu.task import Tolerance

PROBE_SALT = 0x5EED_D1CE  # probe inputs come from their own seed, never the trials' ones

WHY = (
    "this task's own inputs cannot tell that answer from the right one (torch.rand draws [0, 1), where "
    "ReLU is the identity), so answers that skip the work are also checked on inputs with signed values; "
    "compute the operation itself"
)


def signed_inputs(inputs: list[Any], seed: int) -> list[Any]:
    """`inputs` with every floating-point tensor redrawn signed (same shape, dtype, device); the rest copied."""
    torch.manual_seed((seed ^ PROBE_SALT) % 2**63)

    def redraw(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                return signed(tuple(x.shape), dtype=x.dtype, device=x.device)
            return x.clone()
        if isinstance(x, list):
            return [redraw(v) for v in x]
        if isinstance(x, tuple):
            return type(x)(*map(redraw, x)) if hasattr(x, "_fields") else tuple(map(redraw, x))
        if isinstance(x, dict):
            return {k: redraw(v) for k, v in x.items()}
        return x

    return [redraw(x) for x in inputs]


def trivial_output(got: Any, exp: Any, inputs: list[Any], tol: Tolerance) -> str | None:
    """Why `got` is a trivial answer on `inputs` where the reference's `exp` is not; None when it is not.

    Per floating-point output: skipped when `got` passes against `exp` (right on the probe too); otherwise
    `got` is trivial when it passes as zeros, as its own mean everywhere or as an input of its shape, and
    that same answer would not pass as `exp`."""
    gl, el = flatten(got), flatten(exp)
    if len(gl) != len(el):
        return None  # a wrong structure is the trials' business
    for i, (g, e) in enumerate(zip(gl, el, strict=True)):
        if not (isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor)):
            continue
        if not e.is_floating_point() or e.numel() < 2 or g.shape != e.shape or g.dtype != e.dtype:
            continue
        if g.device.type != e.device.type or compare_tensor(g, e, tol).passed:
            continue
        if finite_mean(g) is None:
            continue
        for what, fake in trivial_answers(g, inputs).items():
            if compare_tensor(g, fake, tol).passed and not compare_tensor(fake, e, tol).passed:
                label = "a constant" if what.startswith("a constant") else what
                return f"output {i} is {label} on extra inputs with signed values, where the reference's is not: {WHY}"
    return None


def caught_by_probe(
    reference: Callable[[list[Any]], Any], inputs: list[Any], fakes: list[Fake], tol: Tolerance, seed: int
) -> list[bool] | str:
    """For each fake answer the task's rule accepts on `inputs`, whether the probe rejects it: the same kind
    of answer on the probe inputs would not pass as the reference's output there.

    Returns why the probe cannot run (the reference fails on signed inputs) instead, as text."""
    probe = signed_inputs(inputs, seed)
    try:
        with torch.no_grad():
            exp = as_outputs(reference(clone_inputs(probe)))
    except Exception as e:  # the reference is defined only on its own inputs
        return f"the reference failed on signed inputs ({type(e).__name__}: {str(e)[:200]})"
    out = []
    for f in fakes:
        want = exp[f.output] if f.output < len(exp) else None
        if not isinstance(want, torch.Tensor) or not want.is_floating_point() or want.numel() < 2:
            out.append(False)
            continue
        fake = fake_answer(f, want, probe)
        out.append(fake is not None and not accepted_by(fake, want, tol))
    return out
