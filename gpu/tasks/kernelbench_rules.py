"""KernelBench's correctness rule, for KernelBench files (pure data: no torch).

KernelBench (`src/kernelbench/eval.py`, `run_and_check_correctness`) accepts a candidate's output when
`torch.allclose(reference, candidate, atol=t, rtol=t)` holds, with `t` from `get_tolerance_for_precision` for the
evaluation's precision: fp32 1e-4, fp16 1e-2, bf16 1e-2 (no fp8). ksearch's defaults differ in bf16 (2e-2).

`allclose` scales its relative term by the candidate's value (|ref - got| <= t + t * |got|), ksearch's rule by
the reference's (|got - ref| <= atol + rtol * |ref|, computed in float64). Since |got| <= |ref| + |got - ref|,
every output KernelBench accepts satisfies |got - ref| <= (t + t * |ref|) / (1 - t). `allclose` also computes in
the output's dtype, and its roundings (of the difference, of t * |got|, of the sum) move its edge by less than
four units of roundoff u of that dtype. `kernelbench_tolerance` uses t / (1 - t) * (1 + 4u) for both terms: ksearch
never rejects what KernelBench accepts, and is looser by no more than that factor (1.0001 in fp32, 1.012 in fp16,
1.026 in bf16). Dtypes KernelBench has no rule for keep ksearch's defaults.

KernelBench's `precision` (`eval_kernel_against_ref(..., precision=...)`, its scripts' `precision` setting, fp32 by
default) casts every tensor of `get_inputs()` and `get_init_inputs()` to that dtype (`_process_input_tensor`: integer
tensors too) and both models (`.to(dtype=precision)`: their floating-point parameters and buffers), and judges every
output by that precision's `t`. `with_precision` gives a KernelBench problem file that setting: the runtime casts
as KernelBench does (gpu/tasks/rt/native.py) and `kernelbench_tolerance(precision)` applies that `t` to outputs of
every floating dtype (each with its own roundoff term), so an output left in another dtype is judged as KernelBench
judges it. Without a precision a file runs on its inputs as drawn, judged per output dtype as above.
"""

from __future__ import annotations

from ksearch.gpu.task import Task, TaskError, Tolerance

KERNELBENCH_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
"""atol = rtol per KernelBench precision, as `get_tolerance_for_precision` returns it."""

PRECISION_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
"""The torch dtype (by name) each precision casts to, as `get_torch_dtype_from_string` maps it."""
# half an ulp, relative: the roundoff of allclose's arithmetic in each output dtype
_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _bound(t: float, dtype: str) -> float:
    return t / (1.0 - t) * (1.0 + 4.0 * _ROUNDOFF[dtype])


def kernelbench_tolerance(precision: str | None = None) -> Tolerance:
    """ksearch's Tolerance that accepts whatever KernelBench's allclose accepts: per output dtype, or, at a
    `precision`, that precision's `t` for outputs of every floating dtype."""
    base = Tolerance()
    atol, rtol = dict(base.atol), dict(base.rtol)
    if precision is None:
        for p, t in KERNELBENCH_TOLERANCE.items():
            dtype = PRECISION_DTYPE[p]
            atol[dtype] = rtol[dtype] = _bound(t, dtype)
    else:
        t = KERNELBENCH_TOLERANCE[precision]
        for dtype in _ROUNDOFF:
            atol[dtype] = rtol[dtype] = _bound(t, dtype)
    return Tolerance(atol=atol, rtol=rtol)


def is_plain_kernelbench(task: Task) -> bool:
    """A KernelBench problem as KernelBench has it: a file with none of ksearch's extras, not built in."""
    return task.style == "kernelbench" and not task.builtin and not task.extras.get("ksearch_extras")


def with_precision(task: Task, precision: str | None) -> Task:
    """The task run at KernelBench's `precision` (a copy; the task itself for None), or a TaskError saying why it
    cannot be: an unknown precision, or a task that is not a plain KernelBench problem file."""
    if precision is None:
        return task
    if precision not in KERNELBENCH_TOLERANCE:
        raise TaskError(f"unknown precision {precision!r}; accepted: {', '.join(KERNELBENCH_TOLERANCE)}")
    if not is_plain_kernelbench(task):
        extras = ", ".join(task.extras.get("ksearch_extras") or [])
        why = (
            "a built-in task"
            if task.builtin
            else f"a task file with ksearch's own extras ({extras}), judged by its own tolerance"
            if extras
            else f"a {task.style} task"
        )
        raise TaskError(
            f"precision {precision} is KernelBench's setting, for a KernelBench problem file (Model, get_inputs, "
            f"get_init_inputs and nothing of ksearch's); {task.name!r} is {why}"
        )
    out = task.model_copy(deep=True)
    out.extras["precision"] = precision
    out.tolerance = kernelbench_tolerance(precision)
    return out
