"""The facts of a task as a few lines of text, for a prompt and for `ksearch task show`.

    facts.text()  ==  render_facts(facts)

Pure formatting of gpu/tasks/facts.py's models: no torch, no subprocess.
"""

from __future__ import annotations

from ksearch.gpu.tasks.facts import (
    Ceilings,
    RoundingProbe,
    TaskFacts,
    TensorInfo,
    WorkloadFacts,
    short_dtype,
)


def _size(n: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            v = n / scale
            return f"{v:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.2g}"


def _bound_text(bound: str) -> str:
    return {"mixed": "near the ridge point (memory and compute both matter)", "unknown": "bound unknown"}.get(
        bound, f"{bound}-bound"
    )


def _tensor(t: TensorInfo) -> str:
    if t.value is not None:
        return f"{t.name}={t.value}"
    return f"{t.name}[{','.join(map(str, t.shape))}] {short_dtype(t.dtype)}"


def _tensors(ts: list[TensorInfo], limit: int = 6) -> str:
    shown = ", ".join(_tensor(t) for t in ts[:limit])
    return shown + (f", +{len(ts) - limit} more" if len(ts) > limit else "") if ts else "(none)"


def _flops_text(w: WorkloadFacts) -> str:
    if w.flops is not None:
        return _size(w.flops, "FLOP") + (" (declared)" if w.flops_source == "declared" else "")
    if w.flops_source == "none":
        return "FLOPs unknown"
    ops = ", ".join(o.lstrip("_") for o in w.uncounted_ops[:4]) + (
        ", ..." if len(w.uncounted_ops) > 4 else ""
    )
    if w.flops_counted:
        return f">= {_size(w.flops_counted, 'FLOP')} ({ops} not counted)"
    return f"FLOPs unknown ({ops} not counted)"


def workload_line(w: WorkloadFacts, ceil: Ceilings) -> str:
    if w.method == "none" and not w.inputs:
        return f"workload {w.name}: not run ({w.error or 'no facts'})"
    params = f" + {w.params} weight tensors ({_size(w.params_bytes, 'B')})" if w.params else ""
    outs = _tensors(w.outputs) if w.outputs else "?"
    head = f"workload {w.name}: {_tensors(w.inputs)}{params} -> {outs}"
    if w.method == "real":
        head += " (real CPU run)"
    parts = [head]
    if w.bytes is not None:
        parts.append(f"{_size(w.bytes, 'B')} moved" + (" (declared)" if w.bytes_source == "declared" else ""))
    parts.append(_flops_text(w))
    if w.intensity is not None:
        approx = ">= " if w.flops is None and w.flops_source != "declared" else "~"
        verdict = _bound_text(w.bound) + (" (est.)" if w.bound_estimated else "")
        parts.append(f"{approx}{_num(w.intensity)} FLOP/B: {verdict}")
    elif w.error:
        parts.append(f"output unknown: {w.error}")
    return "; ".join(parts)


def render_facts(facts: TaskFacts, splits: tuple[str, ...] = ("search",)) -> str:
    ceil = facts.ceilings
    rows = [w for w in facts.workloads if w.split in splits] or facts.workloads
    if any(not w.outputs for w in rows):  # what a real run of another workload found is still worth showing
        rows += [w for w in facts.workloads if w.method == "real" and w not in rows]
    dtype = facts.dtype if facts.dtype_source != "none" else "dtype unknown"
    lines = [f"{dtype}" + (" (declared)" if facts.dtype_source == "declared" else "")]
    lines += [workload_line(w, ceil) for w in rows]
    d = next((w.compute_dtype for w in rows if w.compute_dtype), "")
    d = d or (facts.dtype if facts.dtype in ceil.matmul_flops else "float32")
    bound = _bound_text(facts.bound)
    src = " (declared)" if facts.bound_source == "declared" else ""
    methods = sorted({w.method for w in rows if w.method != "none"})
    how = {"fake": "fake-tensor run", "real": "real CPU run"}
    basis = " and ".join(how[m] for m in methods) or "no run"
    placed = sorted({c for w in rows for c in w.cuda_as_cpu})
    # the probe has no GPU: a reference that pins its data to CUDA was measured with those placements on the CPU
    cpu = f", its CUDA placements ({', '.join(placed)}) read as CPU ones for measuring" if placed else ""
    lines.append(f"{bound}{src} on {ceil.label(d)}; shapes from a {basis} of the reference{cpu}")
    written = sorted({i.name for w in rows for i in w.inputs if i.written})
    if written:  # the keep-inputs rule says "unless the reference does": here is what it does
        them = "it" if len(written) == 1 else "them"
        lines.append(
            f"the reference writes {', '.join(written)} in place: a candidate may write "
            f"{them} too; every other input must be left as it was"
        )
    if facts.error:
        lines.append(f"(facts incomplete: {facts.error})")
    if facts.rounding is not None and (warning := rounding_text(facts.rounding)):
        lines.append(warning)
    return "\n".join(lines)


def _share(over: int, numel: int) -> str:
    pct = 100.0 * over / numel if numel else 0.0
    if pct >= 1:
        return f"{pct:.0f}% of elements"
    return f"{pct:.1f}% of elements" if pct >= 0.1 else f"{over} of {numel} elements"


def rounding_text(r: RoundingProbe) -> str | None:
    """What a kernel writer must know when the reference's own rounding error fails the task's rule or uses
    more than NEAR of it (see RoundingProbe); None when it leaves room or was not measured."""
    if r.verdict not in ("fails", "near"):
        return None
    which = f" {r.output}" if r.output != "out" else ""
    head = (
        f"the reference's own {short_dtype(r.dtype)} result{which} differs from its float64 run by up to "
        f"{r.max_abs:.2g} (max abs)"
    )
    rule = f"atol {r.atol:.3g} + rtol {r.rtol:.3g}·|ref|"
    where = f"(smoke workload {r.workload!r}, on the CPU)"
    if r.verdict == "fails":
        allows = f", more than the {100 * r.mismatch_ratio:g}% the rule allows" if r.mismatch_ratio else ""
        return (
            f"{head}, over {rule} at {_share(r.over, r.numel)}{allows} {where}: only a kernel reproducing the "
            "reference's rounding (its order of operations, e.g. its summation order) passes"
        )
    at = "its worst element" if not r.mismatch_ratio else "the worst element the rule must pass"
    return (
        f"{head}, within {rule} but using {r.ratio:.0%} of it at {at} {where}: a kernel that rounds "
        "otherwise (another summation order) may fail even where it is more accurate"
    )


__all__ = ["render_facts", "rounding_text", "workload_line"]
