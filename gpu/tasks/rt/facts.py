"""The subprocess side of gpu/tasks/facts.py: run a task's reference once and report what it did.

    python -m ksearch.gpu.tasks.rt.facts TASK_JSON     ->  one ProbeResult JSON line, last on stdout

Run by ksearch.gpu.tasks.facts.probe_task through gpu/tasks/probe.py (scrubbed environment, jail, no GPU).
Each workload runs under FakeTensorMode: inputs, weights and outputs have shapes and dtypes but no
storage, so a many-GB workload costs nothing. FLOPs are counted as FlopCounterMode counts them, by
a mode that also notes every other compute op, whose FLOPs the counter does not know. Where the fake
run fails, the smallest workload runs for real on the CPU, under a memory cap (the measuring:
gpu/tasks/rt/measure.py). For a KernelBench file without a smoke workload, a smaller one is searched for
(gpu/tasks/rt/smoke.py, gpu/tasks/shrink.py) and checked by a real run. On the smoke workload, the
reference's own rounding error is measured against the task's tolerance (gpu/tasks/rt/rounding.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ksearch.gpu.task import Task, TaskError, Workload
from ksearch.gpu.tasks.facts import ProbeResult, RoundingProbe, SmokeProbe, WorkloadProbe
from ksearch.gpu.tasks.rt.measure import Prober, first_line
from ksearch.gpu.tasks.rt.rounding import reference_rounding
from ksearch.gpu.tasks.rt.smoke import derive_smoke

MEMORY_HEADROOM_GIB = 4.0  # what real runs may allocate beyond the interpreter and torch
REAL_LIMIT_BYTES = 1 << 30  # a real fallback run only on a workload whose inputs + weights fit this


def _footprint(p: WorkloadProbe) -> int | None:
    if not p.inputs:
        return None
    return sum(t.bytes for t in p.inputs) + p.params_bytes


def probe(task: Task) -> tuple[list[WorkloadProbe], SmokeProbe | None, RoundingProbe]:
    prober = Prober(task)
    shrink = prober.native and task.smoke_derived
    probes: dict[str, WorkloadProbe] = {}
    for wl in task.workloads:
        if shrink and wl.split == "smoke":
            continue  # a copy of the first search workload: derive_smoke decides what it becomes
        probes[wl.name] = prober.measure(wl, fake=True)
    smoke: SmokeProbe | None = None
    if shrink:
        smoke, smoke_probe = derive_smoke(prober, probes)
        probes[smoke_probe.workload] = smoke_probe
    if any(p.outputs is None for p in probes.values()) and not any(
        p.method == "real" for p in probes.values()
    ):
        _real_fallback(prober, probes)
    for wl in task.workloads:
        if wl.name in probes:
            probes[wl.name].cost = prober.cost(wl)
    try:
        smoke_wl = _smoke_as_derived(task, smoke)
    except TaskError as exc:  # no smoke workload: the rounding check has nothing to run on
        rounding = RoundingProbe(note=f"not measured: {exc}")
    else:
        rounding = reference_rounding(prober, smoke_wl, probes.get(smoke_wl.name))
    return [probes[w.name] for w in task.workloads if w.name in probes], smoke, rounding


def _smoke_as_derived(task: Task, smoke: SmokeProbe | None) -> Workload:
    """The smoke workload as the loader will make it: the task's own, or the smaller one found here (the
    same construction as gpu/tasks/native.py's)."""
    copy = task.smoke()
    if smoke is None or not smoke.verified:
        return copy
    base = task.workload(smoke.derived_from)
    params = {**base.params, **smoke.params}
    return Workload(name=copy.name, params=params, constants=smoke.constants, split="smoke")


def _real_fallback(prober: Prober, probes: dict[str, WorkloadProbe]) -> None:
    """Fake tensors failed somewhere: run the smallest workload for real (if small enough to be safe)."""
    sized = [(n, _footprint(p)) for n, p in probes.items()]
    known = [(n, b) for n, b in sized if b is not None]
    if known:
        name, nbytes = min(known, key=lambda nb: nb[1])
        if nbytes > REAL_LIMIT_BYTES:
            for p in probes.values():
                if p.outputs is None:
                    p.error = f"{p.error}; no real run: the smallest workload needs {nbytes / 2**30:.1f} GiB"
            return
    else:
        smoke = prober.task.by_split("smoke")
        name = smoke[0].name if smoke else next(iter(probes))
    real = prober.measure(prober.task.workload(name), fake=False)
    if real.outputs is not None:
        probes[name] = real
    else:
        probes[name].error = f"{probes[name].error}; {real.error}"


def _limit_memory(headroom_gib: float) -> None:
    """Cap what real runs can allocate (a file may build GBs of numpy data, which fake tensors miss)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return  # not Linux: no cap, the caller's timeout still holds
    data_kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmData:")), 0)
    limit = data_kb * 1024 + int(headroom_gib * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _patch_for_probing() -> None:
    """Make ksearch's input helpers and `.cuda()` calls work here.

    ksearch.gpu.inputs draws scale and shift as Python floats from a CPU tensor: under fake tensors those
    draws must run for real. The probe has no GPU, and shapes do not depend on the device, so
    `.cuda()` on a tensor or a module leaves it where it is.
    """
    import ksearch.gpu.inputs as gi

    draw = gi._cpu_uniform

    def real_draw(low: float, high: float) -> float:
        with unset_fake_temporarily():
            return draw(low, high)

    gi._cpu_uniform = real_draw

    def stay(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self

    torch.Tensor.cuda = stay  # type: ignore[method-assign]
    torch.nn.Module.cuda = stay  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("task_json", type=Path)
    parser.add_argument("--memory-gib", type=float, default=MEMORY_HEADROOM_GIB)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    _limit_memory(args.memory_gib)
    _patch_for_probing()
    result = ProbeResult(torch=torch.__version__)
    try:
        task = Task.model_validate_json(args.task_json.read_text())
        result.workloads, result.smoke, result.rounding = probe(task)
    except Exception as exc:  # the file does not even load: still one answer
        result.error = first_line(exc)
    # a newline first: task code may have printed without one
    sys.stdout.write("\n" + json.dumps(result.model_dump(mode="json")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
