"""The subprocess side of gpu/tasks/facts.py: run a task's reference once and report what it did.

    python -m ksearch.gpu.tasks.rt_facts TASK_JSON     ->  one ProbeResult JSON line, last on stdout

Run by ksearch.gpu.tasks.facts.probe_task through gpu/tasks/probe.py (scrubbed environment, jail, no GPU).
Each workload runs under FakeTensorMode: inputs, weights and outputs have shapes and dtypes but no
storage, so a many-GB workload costs nothing. FLOPs are counted as FlopCounterMode counts them, by
a mode that also notes every other compute op, whose FLOPs the counter does not know. Where the fake
run fails, the smallest workload runs for real on the CPU, under a memory cap. For a KernelBench file without a
smoke workload, a smaller one is searched for (gpu/tasks/shrink.py) and checked by a real run.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch._C import DispatchKey
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from ksearch.gpu.task import Task, Workload
from ksearch.gpu.tasks.facts import OpTally, ProbeResult, SmokeProbe, TensorInfo, WorkloadProbe
from ksearch.gpu.tasks.rt_common import as_result
from ksearch.gpu.tasks.shrink import FACTORS, SizeKnobs, halved, halving_moves, shrunk, size_knobs

MEMORY_HEADROOM_GIB = 4.0  # what real runs may allocate beyond the interpreter and torch
REAL_LIMIT_BYTES = 1 << 30  # a real fallback run only on a workload whose inputs + weights fit this
SMOKE_ELEMENTS = 1 << 18  # a derived smoke workload touches at most this many elements ...
SMOKE_FLOPS = 1 << 28  # ... and counts at most this many FLOPs (cheap under the Triton interpreter)
MAX_REAL_TRIES = 3

# Ops that move or make data without arithmetic: no FLOPs, and not "uncounted" either.
ZERO_FLOP_OPS = frozenset({
    "_to_copy", "_unsafe_view", "alias", "arange", "as_strided", "cat", "clone", "constant_pad_nd",
    "contiguous", "copy", "copy_", "detach", "embedding", "empty", "empty_like", "empty_strided",
    "expand", "fill", "fill_", "flip", "full", "full_like", "gather", "index", "index_select",
    "lift_fresh", "lift_fresh_copy", "new_empty", "new_empty_strided", "new_full", "new_ones",
    "new_zeros", "ones", "ones_like", "permute", "rand_like", "randn_like", "repeat", "roll",
    "scalar_tensor", "select_scatter", "slice_scatter", "split_with_sizes_copy", "stack",
    "unbind_copy", "view_copy", "zero_", "zeros", "zeros_like", "_local_scalar_dense",
})  # fmt: skip


def _sdpa_cpu_flops(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, **kwargs: Any) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


# the counter knows the CUDA attention kernels; on the CPU (where fake tensors live) sdpa dispatches here
EXTRA_FORMULAS: dict[Any, Callable[..., int]] = {}
if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
    EXTRA_FORMULAS[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu_flops


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class _OpRecorder(TorchDispatchMode):
    """Counts a forward's FLOPs as torch.utils.flop_counter.FlopCounterMode does (its formulas, and its
    rule of decomposing an op where torch can), and notes every aten compute op: its calls, counted
    FLOPs (or None), elements touched. One dispatch mode rather than a recorder stacked on the
    counter: a recurrent model dispatches tens of thousands of ops per forward under fake tensors,
    and each mode in the stack costs every one of them."""

    def __init__(self) -> None:
        super().__init__()
        self.registry = FlopCounterMode(display=False, custom_mapping=EXTRA_FORMULAS).flop_registry
        self.flops = 0
        self.tallies: dict[str, OpTally] = {}
        # per overload: None (not noted) or its name and FLOP formula, looked up once
        self._kinds: dict[Any, tuple[str, Callable[..., Any] | None] | None] = {}
        self._decomposable: dict[Any, bool] = {}
        self._depth = 0  # > 0 inside an op's decomposition: its parts count FLOPs, the op is what is noted

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out: Any = NotImplemented
        # as the counter: an overload is never a key of its registry (packets are), so every op but
        # prim.device is offered to torch's decomposition first (asked only of ops that have one)
        if func not in self.registry and func is not torch.ops.prim.device.default and self._decomposes(func):
            self._depth += 1
            try:
                with self:
                    out = func.decompose(*args, **kwargs)
            finally:
                self._depth -= 1
        counted = None
        if out is NotImplemented:
            out = func(*args, **kwargs)
            formula = self.registry.get(func._overloadpacket)
            if formula is not None:
                counted = formula(*args, **kwargs, out_val=out)
                self.flops += counted
        if self._depth == 0:
            self._tally(func, args, kwargs, out, counted)
        return out

    def _decomposes(self, func: Any) -> bool:
        """Whether `func.decompose` would do anything (it returns NotImplemented otherwise)."""
        known = self._decomposable.get(func)
        if known is None:
            key = DispatchKey.CompositeImplicitAutograd
            known = key in getattr(func, "py_kernels", {}) or torch._C._dispatch_has_kernel_for_dispatch_key(
                func.name(), key
            )
            self._decomposable[func] = known
        return known

    def _kind(self, func: Any) -> tuple[str, Callable[..., Any] | None] | None:
        if func in self._kinds:
            return self._kinds[func]
        packet = func._overloadpacket
        name = packet.__name__
        skip = func.namespace != "aten" or func.is_view or name in ZERO_FLOP_OPS  # data movement
        kind = None if skip else (name, self.registry.get(packet))
        self._kinds[func] = kind
        return kind

    def _tally(self, func: Any, args: Any, kwargs: Any, out: Any, counted: float | None) -> None:
        kind = self._kind(func)
        if kind is None:
            return
        name, formula = kind
        tensors = _tensors_in(args, kwargs)
        if not tensors:
            return  # a factory (randn)
        tally = self.tallies.get(name)
        if tally is None:
            tally = OpTally(op=name, dtype=_dtype(tensors[0]), flops=0.0 if formula else None)
            self.tallies[name] = tally
        tally.calls += 1
        if formula is not None and tally.flops is not None:
            tally.flops += float(counted if counted is not None else formula(*args, **kwargs, out_val=out))
        else:
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            tally.elements += float(max(t.numel() for t in [*tensors, *outs]))


def _tensors_in(args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors among an op's arguments, in order (nested lists flattened)."""
    out: list[torch.Tensor] = []
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, list | tuple | dict):
            out += [t for t in tree_flatten(v)[0] if isinstance(t, torch.Tensor)]
    return out


def _forward_names(model: Any, n: int) -> list[str]:
    try:
        sig = inspect.signature(model.forward)
    except (AttributeError, TypeError, ValueError):
        return []
    names = []
    for p in sig.parameters.values():
        if p.kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names[:n]


def _describe(values: list[Any], names: list[str], prefix: str, seen: set[int]) -> list[TensorInfo]:
    """One TensorInfo per leaf. A tensor passed twice is described twice but its bytes count once."""
    out: list[TensorInfo] = []
    for i, v in enumerate(values):
        base = names[i] if i < len(names) else f"{prefix}{i}"
        leaves = tree_flatten(v)[0]
        for j, leaf in enumerate(leaves):
            name = base if len(leaves) == 1 else f"{base}.{j}"
            if isinstance(leaf, torch.Tensor):
                nbytes = 0 if id(leaf) in seen else leaf.numel() * leaf.element_size()
                seen.add(id(leaf))
                out.append(TensorInfo(name=name, shape=list(leaf.shape), dtype=_dtype(leaf), bytes=nbytes))
            else:
                out.append(TensorInfo(name=name, dtype=type(leaf).__name__, value=repr(leaf)[:40]))
    return out


def _apply_without_swap(self: torch.nn.Module, fn: Callable[[Any], Any], recurse: bool = True) -> Any:
    """nn.Module._apply for fake parameters: torch swaps a fake parameter in place, which fails while
    the fake mode holds a weak reference to it; a new Parameter holding the converted tensor is the
    same for measuring (`.to()`, `.half()`, `.cuda()` of a Model under fake tensors)."""
    if recurse:
        for child in self.children():
            child._apply(fn)
    for key, param in self._parameters.items():
        if param is None:
            continue
        with torch.no_grad():
            applied = fn(param)
        if applied is not param:
            self._parameters[key] = torch.nn.Parameter(applied, requires_grad=param.requires_grad)
    for key, buf in self._buffers.items():
        if buf is not None:
            self._buffers[key] = fn(buf)
    return self


@contextlib.contextmanager
def _fake_tensors() -> Iterator[FakeTensorMode]:
    original = torch.nn.Module._apply
    torch.nn.Module._apply = _apply_without_swap  # type: ignore[method-assign]
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            yield mode
    finally:
        torch.nn.Module._apply = original  # type: ignore[method-assign]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


class Prober:
    """Runs one task's reference per workload, fake or real."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.native = task.style == "kernelbench"
        if self.native:
            from ksearch.gpu.tasks.rt_native import NativeRuntime

            self.impl: Any = NativeRuntime(task)
        else:
            from ksearch.gpu.runtime import TaskRuntime

            self.impl = TaskRuntime(task)

    def _reference(self, wl: Workload) -> tuple[Any, Callable[[list], Any]]:
        if self.native:
            model = self.impl.reference_model(wl, "cpu")
            return model, lambda inputs: as_result(model(*inputs))
        return None, self.impl.build_reference(wl, "cpu")

    def _input_names(self, model: Any, n: int) -> list[str]:
        if model is not None:
            return _forward_names(model, n)
        declared = self.task.extras.get("inputs")
        if isinstance(declared, dict) and len(declared) == n:
            return list(declared)
        return []

    def measure(self, wl: Workload, *, fake: bool) -> WorkloadProbe:
        p = WorkloadProbe(workload=wl.name, split=wl.split, method="fake" if fake else "real")
        mode = _fake_tensors() if fake else contextlib.nullcontext()
        how = "under fake tensors" if fake else "in a real CPU run"
        stage = "making the inputs"
        try:
            with mode:
                inputs = self.impl.make_inputs(wl, 0, "cpu")
                stage = "building the Model"
                model, fn = self._reference(wl)
                seen: set[int] = set()
                p.inputs = _describe(list(inputs), self._input_names(model, len(inputs)), "in", seen)
                if isinstance(model, torch.nn.Module):
                    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
                    for t in tensors.values():
                        nbytes = t.numel() * t.element_size()
                        p.params += 1
                        p.params_bytes += nbytes
                        p.params_elements += t.numel()
                        p.params_dtypes[_dtype(t)] = p.params_dtypes.get(_dtype(t), 0) + nbytes
                stage = "running the forward"
                with torch.no_grad(), _OpRecorder() as recorder:
                    out = fn(inputs)
                leaves = [out] if isinstance(out, torch.Tensor) else list(tree_flatten(out)[0])
                names = ["out"] if len(leaves) == 1 else [f"out{i}" for i in range(len(leaves))]
                p.outputs = _describe(leaves, names, "out", set())
                p.flops_counted = float(recorder.flops)
                p.ops = list(recorder.tallies.values())
        except Exception as exc:  # task code may raise anything: it is reported, per workload
            p.error = f"{stage} {how}: {_first_line(exc)}"
            if not p.inputs:
                p.method = "none"
        return p

    def run_plain(self, wl: Workload) -> str | None:
        """One real CPU call of the reference, nothing counted (what a smoke check does): None, or the
        error. Dispatching every op through the counting modes costs a recurrent model seconds."""
        stage = "making the inputs"
        try:
            inputs = self.impl.make_inputs(wl, 0, "cpu")
            stage = "building the Model"
            _, fn = self._reference(wl)
            stage = "running the forward"
            with torch.no_grad():
                fn(inputs)
        except Exception as exc:  # task code may raise anything: the caller reports it
            return f"{stage} in a real CPU run: {_first_line(exc)}"
        return None

    def cost(self, wl: Workload) -> dict[str, Any] | None:
        try:
            c = self.impl.cost(wl)
        except Exception as exc:  # a broken COST is the task's fault; the derived numbers still stand
            return {"error": _first_line(exc)}
        return c.model_dump() if c is not None else None


def _footprint(p: WorkloadProbe) -> int | None:
    if not p.inputs:
        return None
    return sum(t.bytes for t in p.inputs) + p.params_bytes


def _budget_ratio(p: WorkloadProbe) -> float:
    """How far over the smoke budget a run is: 1.0 at the budget, below it inside."""
    return max(p.elements() / SMOKE_ELEMENTS, (p.flops_counted or 0.0) / SMOKE_FLOPS)


def _small(p: WorkloadProbe) -> bool:
    return _budget_ratio(p) <= 1.0


def _timed(prober: Prober, wl: Workload) -> tuple[WorkloadProbe, float]:
    t0 = time.perf_counter()
    p = prober.measure(wl, fake=False)
    return p, time.perf_counter() - t0


def derive_smoke(prober: Prober, probes: dict[str, WorkloadProbe]) -> tuple[SmokeProbe, WorkloadProbe]:
    """A smaller smoke workload for a native file that gave none, and its facts from a real run."""
    task = prober.task
    copy = task.smoke()
    base = next(w for w in task.workloads if w.split == "search")
    base_probe = probes[base.name]
    as_copy = base_probe.model_copy(update={"workload": copy.name, "split": "smoke"}, deep=True)
    report = SmokeProbe(derived_from=base.name, elements=base_probe.elements())
    if not base_probe.inputs:
        report.note = f"not shrunk: the inputs could not be made under fake tensors ({base_probe.error})"
        return report, as_copy
    knobs = size_knobs(task.source_path.read_text(), task.source_path, base.params)
    if knobs.empty():
        report.note = "not shrunk: the file sizes its inputs with no integer constant or parameter"
        return report, as_copy
    # the loader makes the same call without running anything (gpu/tasks/native.py): keep them in step
    if not knobs.worth_shrinking() or (base_probe.outputs is not None and _small(base_probe)):
        report.note = f"not shrunk: {base.name!r} is already small"
        return report, as_copy
    search = _SmokeSearch(prober, base, copy.name, knobs, base_probe)
    found = search.run()
    if found is None:
        report.note = "not shrunk: " + (
            "; ".join(search.failures[-3:]) or "no smaller size fit the smoke budget"
        )
        return report, as_copy
    return found


class _Ran:
    """A candidate whose fake run worked."""

    def __init__(self, knobs: SizeKnobs, label: str, factor: int, probe: WorkloadProbe) -> None:
        self.knobs, self.label, self.factor, self.probe = knobs, label, factor, probe
        self.ratio = _budget_ratio(probe)


class _SmokeSearch:
    """Smaller sizes whose fake run works and fits the smoke budget, confirmed by a real run.

    One common factor for every size first (keeps their relations), tried from the smallest sizes up:
    a fake run's cost grows with the sizes (a recurrent model's with its sequence length), so the
    runs near the file's GPU sizes, the slowest, are never made. The sizes grow while they fit the
    budget, and the largest that fits is used. Where no common factor both runs and fits (a size that
    must stay large, like an image that is pooled three times), single sizes are halved from the
    smallest that ran, as long as the model still runs. Where nothing fits at all (weights the
    constructor sizes by itself, as a ResNet's channel widths), the cheapest sizes that ran are used:
    still over the budget, but never the file's GPU sizes when anything smaller ran.
    """

    MAX_FAKE_RUNS = 120

    def __init__(
        self, prober: Prober, base: Workload, name: str, knobs: SizeKnobs, base_probe: WorkloadProbe
    ) -> None:
        self.prober, self.base, self.name, self.knobs = prober, base, name, knobs
        # a forward that fails under fake tensors anyway (an .item()) cannot tell a broken size: inputs only
        self.judge_forward = base_probe.outputs is not None
        self.base_ratio = _budget_ratio(base_probe)
        self.tried: set[str] = set()
        self.failures: list[str] = []
        self.ran: dict[str, _Ran] = {}  # by candidate
        self.rejected: set[str] = set()  # candidates whose real run failed
        self.fake_runs = 0
        self.reals = 0

    def _fake(self, cand: SizeKnobs, label: str, *, factor: int, ran_as: str = "") -> WorkloadProbe | None:
        """The fake run of a candidate, or None where the model does not run at these sizes (or it
        ran before). `ran_as`: how a report would describe these sizes (default: `label`)."""
        sig = cand.model_dump_json()
        if sig in self.tried or cand == self.knobs or self.fake_runs >= self.MAX_FAKE_RUNS:
            return None
        self.tried.add(sig)
        self.fake_runs += 1
        wl = _smoke_workload(self.name, self.base, self.knobs, cand)
        try:
            self.prober.impl.module_for(wl)
        except Exception as exc:  # the file's own module-level code rejects these sizes
            self.failures.append(f"{label}: {_first_line(exc)}")
            return None
        fake = self.prober.measure(wl, fake=True)
        if not fake.inputs or (self.judge_forward and fake.outputs is None):
            self.failures.append(f"{label}: {fake.error}")
            return None
        self.ran[sig] = _Ran(cand, ran_as or label, factor, fake)
        return fake

    def _confirm(
        self, cand: SizeKnobs, label: str, factor: int, *, over_budget: bool = False
    ) -> tuple[SmokeProbe, WorkloadProbe] | None:
        self.reals += 1
        wl = _smoke_workload(self.name, self.base, self.knobs, cand)
        sig = cand.model_dump_json()
        ran = self.ran.get(sig)
        if ran is not None and ran.probe.outputs is not None:
            # the fake run gave the facts at these sizes: the real run only has to work
            t0 = time.perf_counter()
            error = self.prober.run_plain(wl)
            seconds = time.perf_counter() - t0
            real = ran.probe
        else:
            real, seconds = _timed(self.prober, wl)
            error = real.error if real.outputs is None else None
        if error is not None:
            self.failures.append(f"{label}: {error}")
            self.rejected.add(sig)
            return None
        report = SmokeProbe(
            derived_from=self.base.name,
            factor=factor,
            constants=wl.constants,
            params={k: v for k, v in wl.params.items() if self.base.params.get(k) != v},
            changes=self.knobs.changes(cand),
            verified=True,
            over_budget=over_budget,
            seconds=seconds,
            elements=real.elements(),
            note=f"sizes of {self.base.name!r} {label}; the reference ran on it",
        )
        return report, real

    def _ladder(self) -> list[tuple[int, SizeKnobs]]:
        """Each distinct common-factor candidate once (under its smallest factor), smallest sizes first."""
        out: list[tuple[int, SizeKnobs]] = []
        seen = {self.knobs.model_dump_json()}
        for factor in FACTORS[1:]:
            cand = shrunk(self.knobs, factor)
            sig = cand.model_dump_json()
            if sig not in seen:
                seen.add(sig)
                out.append((factor, cand))
        return out[::-1]

    def run(self) -> tuple[SmokeProbe, WorkloadProbe] | None:
        fits: list[tuple[int, SizeKnobs]] = []
        smallest_ran: tuple[SizeKnobs, int] | None = None
        prev_ratio: float | None = None  # of the next smaller candidate, where it ran
        for factor, cand in self._ladder():
            fake = self._fake(cand, f"divided by {factor}", factor=factor)
            if fake is None:
                prev_ratio = None
                continue
            if smallest_ran is None:
                smallest_ran = (cand, factor)
            ratio = _budget_ratio(fake)
            if ratio > 1.0:
                break  # larger sizes only cost more
            fits.append((factor, cand))
            # the cost grew by prev -> ratio in the last step; where one more step at that rate leaves
            # the budget, the (slowest) fake run that would show it is not made
            if prev_ratio and ratio * ratio / prev_ratio > 1.0:
                break
            prev_ratio = ratio
        for factor, cand in reversed(fits):  # the largest that fits first
            found = self._confirm(cand, f"divided by {factor}", factor)
            if found is not None or self.reals >= MAX_REAL_TRIES:
                return found
        if not fits and self.judge_forward:
            found = self._halve_from(*(smallest_ran or (self.knobs, 1)))
            if found is not None:
                return found
        return self._cheapest_that_ran()

    def _halve_from(self, current: SizeKnobs, factor: int) -> tuple[SmokeProbe, WorkloadProbe] | None:
        label = f"divided by {factor}, then some halved" if factor > 1 else "partly halved"
        while self.reals < MAX_REAL_TRIES and self.fake_runs < self.MAX_FAKE_RUNS:
            for refs in halving_moves(current):
                cand = halved(current, refs)
                fake = self._fake(
                    cand, f"halving {', '.join(n for _, n in refs)}", factor=factor, ran_as=label
                )
                if fake is not None:
                    current = cand
                    break
            else:
                return None  # no single step keeps the model running
            if _small(fake):
                found = self._confirm(current, label, factor)
                if found is not None:
                    return found
        return None

    def _cheapest_that_ran(self) -> tuple[SmokeProbe, WorkloadProbe] | None:
        """Nothing fit the budget: the cheapest sizes that ran (and cost less than the file's), if any."""
        left = sorted(
            (r for sig, r in self.ran.items() if r.ratio < self.base_ratio and sig not in self.rejected),
            key=lambda r: r.ratio,
        )
        for r in left:
            if self.reals >= MAX_REAL_TRIES:
                break
            found = self._confirm(r.knobs, r.label, r.factor, over_budget=True)
            if found is not None:
                found[0].note += f" (the cheapest sizes that ran, {r.ratio:.3g}x the smoke budget)"
                return found
        return None


def _smoke_workload(name: str, base: Workload, knobs: SizeKnobs, cand: SizeKnobs) -> Workload:
    constants = {k: v for k, v in cand.constants.items() if v != knobs.constants.get(k)}
    params = dict(base.params)
    params.update({k: v for k, v in cand.params.items() if v != knobs.params.get(k)})
    return Workload(name=name, params=params, split="smoke", constants=constants)


def probe(task: Task) -> tuple[list[WorkloadProbe], SmokeProbe | None]:
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
    return [probes[w.name] for w in task.workloads if w.name in probes], smoke


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
        result.workloads, result.smoke = probe(task)
    except Exception as exc:  # the file does not even load: still one answer
        result.error = _first_line(exc)
    # a newline first: task code may have printed without one
    sys.stdout.write("\n" + json.dumps(result.model_dump(mode="json")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
