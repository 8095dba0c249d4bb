"""What a task's reference does, found by running it once: shapes, dtypes, bytes, FLOPs, bound.

    from ksearch.gpu.tasks.facts import task_facts
    facts = task_facts(task)          # TaskFacts (pydantic); facts.text() for a prompt

A KernelBench file states none of this; a built-in states some of it (META, COST). The reference is
run once per task file content in a subprocess (gpu/tasks/rt/facts.py: scrubbed, jailed, GPUs
hidden, memory capped) under torch's FakeTensorMode, so a workload of many GB costs nothing; where
fake tensors fail (an `.item()` in the forward, an op without a meta kernel) the smallest workload
is run for real on the CPU instead, and each workload says which was used. Importing this module
needs no torch: the MCP server may call it.

What wins: a task's own META dtype / bound / op and COST flops / bytes; derived values fill the
rest. Minimum bytes = inputs read once + parameters and buffers read once + outputs written once.
FLOPs are what torch.utils.flop_counter counts (matmuls, convolutions, attention); ops it has no
formula for (elementwise, reductions, softmax) make the FLOP count unknown, never 0, and the bound
is then estimated from ~1 FLOP per element for them (a lower bound: "memory-bound (est.)").

The bound compares compute time at the dtype's dense matmul rate (uncounted ops at the FP32
CUDA-core rate) with memory time at the HBM bandwidth: H200 datasheet ceilings unless measured
ones are passed (the sandbox's `ceilings()`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.task import Bound, Task, Workload
from ksearch.gpu.tasks.probe import ProbeFailed, run_probe

FACTS_VERSION = 7  # part of the cache key: raised when what a probe reports changes
PROBE_TIMEOUT_S = 180.0
ESTIMATE_FLOPS_PER_ELEMENT = 1.0  # for ops the counter has no formula for: a lower bound
FactSource = Literal["declared", "derived", "none"]
"""Where a fact comes from: the task stated it, a run of the reference derived it, or neither."""
Method = Literal["fake", "real", "none"]

# ---------------------------------------------------------------------------------------- ceilings


class Ceilings(BaseModel):
    """Peak rates a bound is judged against."""

    model_config = ConfigDict(extra="forbid")

    name: str = "H200"
    bandwidth_Bps: float = 4.8e12  # HBM3e
    # dense tensor-core rates (FP32 has none: CUDA cores; torch keeps TF32 off for matmuls by default)
    matmul_flops: dict[str, float] = Field(
        default_factory=lambda: {
            "float8_e4m3fn": 1979e12,
            "float8_e5m2": 1979e12,
            "int8": 1979e12,
            "bfloat16": 989e12,
            "float16": 989e12,
            "tf32": 495e12,
            "float32": 67e12,
            "float64": 67e12,
        }
    )
    vector_flops: float = 67e12  # FP32 CUDA cores: elementwise ops and reductions
    source: Literal["datasheet", "measured"] = "datasheet"

    def rate(self, dtype: str) -> float:
        return self.matmul_flops.get(dtype) or self.matmul_flops.get("float32") or self.vector_flops

    def label(self, dtype: str) -> str:
        # the datasheet's peaks classify the bound; a result's roofline fraction divides by the machine's measured ones
        kind = (
            "dense, datasheet; roofline fractions use the measured ceilings"
            if self.source == "datasheet"
            else "measured"
        )
        d = dtype if dtype in self.matmul_flops else "float32"
        return f"{self.name} ({self.bandwidth_Bps / 1e12:.1f} TB/s, {self.rate(d) / 1e12:.0f} TFLOP/s {short_dtype(d)} {kind})"


H200 = Ceilings()


def ceilings_from_measured(measured: dict[str, Any], name: str = "this GPU") -> Ceilings | None:
    """Ceilings from the sandbox's measured ones (gpu/hardware.measure_ceilings); None when not measured."""
    bw = measured.get("bandwidth_Bps") or measured.get("copy_bandwidth_Bps")
    rates = {k: float(v) for k, v in (measured.get("matmul_flops") or {}).items() if v}
    if not bw or not rates:
        return None
    return Ceilings(
        name=name,
        bandwidth_Bps=float(bw),
        matmul_flops=rates,
        vector_flops=rates.get("float32", H200.vector_flops),
        source="measured",
    )


# ------------------------------------------------------------------ what the subprocess reports


class TensorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    shape: list[int] = Field(default_factory=list)
    dtype: str  # torch's name ("bfloat16"); for a non-tensor argument its Python type ("int")
    bytes: int = 0
    value: str | None = None  # a non-tensor argument's value
    written: bool = False  # an input the reference wrote in place (its version counter moved during the call)


class OpTally(BaseModel):
    """One aten op over a forward call."""

    model_config = ConfigDict(extra="forbid")

    op: str  # "mm", "relu", "_softmax"
    calls: int = 0
    flops: float | None = None  # None: the flop counter has no formula for it
    elements: float = 0.0  # the largest tensor it touched, summed over calls
    dtype: str = ""  # of its first tensor argument


class WorkloadProbe(BaseModel):
    """What one workload's reference did, as measured in the subprocess."""

    model_config = ConfigDict(extra="forbid")

    workload: str
    split: str = "search"
    method: Method = "none"
    inputs: list[TensorInfo] = Field(default_factory=list)
    params: int = 0  # parameter and buffer tensors of the Model
    params_bytes: int = 0
    params_elements: int = 0
    params_dtypes: dict[str, int] = Field(default_factory=dict)  # dtype -> bytes
    outputs: list[TensorInfo] | None = None
    flops_counted: float | None = None  # FlopCounterMode's total
    ops: list[OpTally] = Field(default_factory=list)  # compute ops in first-call order (views etc. left out)
    cost: dict[str, Any] | None = None  # the task's own COST for this workload
    cuda_as_cpu: list[str] = Field(
        default_factory=list
    )  # CUDA placements read as CPU ones (tasks/rt/placement.py)
    error: str | None = None  # why it has no (or only part of its) facts

    def elements(self) -> int:
        """Elements of every tensor a call touches: inputs, parameters, outputs (what a smoke run costs)."""
        tensors = [*self.inputs, *(self.outputs or [])]
        return sum(_numel(t.shape) for t in tensors if t.value is None) + self.params_elements


class SmokeProbe(BaseModel):
    """The smaller smoke workload derived for a file that declares none (gpu/tasks/shrink.py)."""

    model_config = ConfigDict(extra="forbid")

    derived_from: str
    factor: int = 1
    constants: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    changes: list[str] = Field(default_factory=list)  # "dim 16384->256"
    verified: bool = False  # the reference ran for real on it
    over_budget: bool = False  # nothing that ran fit the smoke budget: the cheapest sizes that ran
    seconds: float = 0.0  # that real call's wall time on the CPU
    elements: int = 0
    note: str = ""


RoundingVerdict = Literal["fails", "near", "ok", "skipped"]
"""How the reference's own result fares against its float64 run under the task's rule: it would fail it,
it uses more than NEAR of the tolerance, it leaves room, or it was not measured (`note` says why)."""
NEAR = 0.5  # "near": the reference's own error takes more than half of what the rule allows


class RoundingProbe(BaseModel):
    """The reference's own rounding error on the smoke workload, measured on the CPU: its result as written
    against its float64 run (inputs, weights and defaults in float64), judged by the task's correctness rule
    as a kernel that returned the float64 result, rounded to the output's dtype, would be judged."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    verdict: RoundingVerdict = "skipped"
    workload: str = ""
    """The workload it ran on (the smoke one)."""
    output: str = ""
    """The output the figures are of (the one closest to failing): out, or out1, out2, ... of several."""
    dtype: str = ""
    """That output's dtype, whose atol and rtol apply."""
    atol: float = 0.0
    rtol: float = 0.0
    mismatch_ratio: float = 0.0
    """The fraction of elements the rule lets fall outside atol + rtol * |ref|."""
    max_abs: float = 0.0
    """The largest |reference - float64 run| over the output's elements."""
    over: int = 0
    """Elements where the difference exceeds atol + rtol * |ref| (or where one side is non-finite)."""
    numel: int = 0
    ratio: float = 0.0
    """The deciding element's difference over what the rule allows there (the worst element, or with a
    mismatch ratio the worst one that must pass): above 1 the reference itself fails, above NEAR it is near."""
    seconds: float = 0.0
    """Wall time of the two real CPU calls."""
    note: str = ""
    """Why it was not measured (skipped), or what else to know."""


class ProbeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = FACTS_VERSION
    key: str = ""
    torch: str = ""
    workloads: list[WorkloadProbe] = Field(default_factory=list)
    smoke: SmokeProbe | None = None
    rounding: RoundingProbe | None = None  # the reference's own rounding error vs the rule (smoke workload)
    error: str | None = None  # the probe as a whole failed (nothing measured)

    def answer(self) -> dict[str, Any]:
        """What the probe found, its timings and cache key left out: what two probes of one content agree on."""
        return _without_timings(self.model_dump(mode="json"))


def _without_timings(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _without_timings(v) for k, v in o.items() if k not in ("seconds", "key")}
    if isinstance(o, list):
        return [_without_timings(v) for v in o]
    return o


# ------------------------------------------------------------------------------ what callers get


class WorkloadFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    split: str
    method: Method  # how its shapes were found: a fake-tensor run, a real CPU run, or not at all
    inputs: list[TensorInfo] = Field(default_factory=list)
    outputs: list[TensorInfo] = Field(default_factory=list)
    params: int = 0
    params_bytes: int = 0
    bytes: float | None = None  # minimum bytes moved
    bytes_source: FactSource = "none"
    flops: float | None = None  # None: unknown (some op is not counted)
    flops_counted: float = 0.0  # what the counter did count (matmul, conv, attention)
    flops_source: FactSource = "none"
    uncounted_ops: list[str] = Field(default_factory=list)
    compute_dtype: str = ""  # the dtype most counted FLOPs ran in
    intensity: float | None = None  # FLOP per byte (a lower bound when flops is unknown)
    bound: Bound = "unknown"
    bound_estimated: bool = False  # from the ~1 FLOP/element estimate for uncounted ops
    cuda_as_cpu: list[str] = Field(default_factory=list)  # the reference's CUDA placements, read as CPU ones
    error: str | None = None


class TaskFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    key: str  # content hash the facts are cached under
    dtype: str = "unknown"
    dtype_source: FactSource = "none"
    bound: Bound = "unknown"
    bound_source: FactSource = "none"
    op: str = ""
    op_source: FactSource = "none"
    workloads: list[WorkloadFacts] = Field(default_factory=list)
    ceilings: Ceilings = Field(default_factory=Ceilings)
    smoke: SmokeProbe | None = None
    rounding: RoundingProbe | None = None
    error: str | None = None

    def workload(self, name: str) -> WorkloadFacts | None:
        return next((w for w in self.workloads if w.name == name), None)

    def text(self, splits: tuple[str, ...] = ("search",)) -> str:
        """A few lines for a prompt: the dtype, one line per workload, the bound and its ceilings."""
        from ksearch.gpu.tasks.facts_text import render_facts  # the formatting imports these models

        return render_facts(self, splits)

    def rounding_warning(self) -> str | None:
        """A line saying that the reference's own rounding error fails the task's rule or comes near it, or None."""
        from ksearch.gpu.tasks.facts_text import rounding_text

        return rounding_text(self.rounding) if self.rounding is not None else None


# ---------------------------------------------------------------------------------- derivation


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


_SHORT = {
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64",
    "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2", "int64": "i64", "int32": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool", "complex64": "c64", "tf32": "tf32",
}  # fmt: skip
_FLOATS = ("bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")


def short_dtype(dtype: str) -> str:
    return _SHORT.get(dtype, dtype)


def _dtype_summary(byte_by_dtype: dict[str, int]) -> str:
    """'bfloat16', or 'mixed: bfloat16, float32' (most bytes first)."""
    if not byte_by_dtype:
        return ""
    ordered = sorted(byte_by_dtype, key=lambda d: (-byte_by_dtype[d], d))
    return ordered[0] if len(ordered) == 1 else "mixed: " + ", ".join(ordered)


def _derived_dtype(probes: list[WorkloadProbe]) -> str:
    """From the float inputs; else the float parameters; else the outputs."""
    inputs: dict[str, int] = {}
    params: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for p in probes:
        for t in p.inputs:
            if t.dtype in _FLOATS:
                inputs[t.dtype] = inputs.get(t.dtype, 0) + t.bytes
        for d, b in p.params_dtypes.items():
            if d in _FLOATS:
                params[d] = params.get(d, 0) + b
        for t in p.outputs or []:
            outputs[t.dtype] = outputs.get(t.dtype, 0) + t.bytes
    return _dtype_summary(inputs) or _dtype_summary(params) or _dtype_summary(outputs)


def _classify(t_compute: float, t_memory: float) -> Bound:
    if t_memory <= 0 and t_compute <= 0:
        return "unknown"
    if t_memory <= 0:
        return "compute"
    ratio = t_compute / t_memory
    if ratio < 0.5:
        return "memory"
    if ratio > 2.0:
        return "compute"
    return "mixed"  # near the ridge point: both matter


def _workload_facts(p: WorkloadProbe, ceil: Ceilings) -> WorkloadFacts:
    wf = WorkloadFacts(
        name=p.workload,
        split=p.split,
        method=p.method,
        inputs=p.inputs,
        outputs=p.outputs or [],
        params=p.params,
        params_bytes=p.params_bytes,
        cuda_as_cpu=p.cuda_as_cpu,
        error=p.error,
    )
    if p.outputs is not None:
        seen = sum(t.bytes for t in p.inputs) + p.params_bytes + sum(t.bytes for t in p.outputs)
        wf.bytes, wf.bytes_source = float(seen), "derived"
    counted_by_dtype: dict[str, float] = {}
    uncounted_elements = 0.0
    for op in p.ops:
        if op.flops is None:
            wf.uncounted_ops.append(op.op)
            uncounted_elements += op.elements
        else:
            # cuDNN runs float32 convolutions in TF32 unless told otherwise (torch's default); matmuls not
            d = "tf32" if op.dtype == "float32" and "conv" in op.op else op.dtype
            counted_by_dtype[d] = counted_by_dtype.get(d, 0.0) + op.flops
    if p.flops_counted is not None:
        wf.flops_counted = p.flops_counted
        wf.flops = None if wf.uncounted_ops else p.flops_counted
        wf.flops_source = "derived"
    if counted_by_dtype:
        wf.compute_dtype = max(counted_by_dtype, key=lambda d: counted_by_dtype[d])
    t_compute = sum(f / ceil.rate(d) for d, f in counted_by_dtype.items())
    estimate = uncounted_elements * ESTIMATE_FLOPS_PER_ELEMENT
    t_compute += estimate / ceil.vector_flops
    total_flops = wf.flops_counted + estimate
    cost = p.cost or {}
    if cost.get("error"):  # a COST that raised: the derived numbers stand, and the error is shown
        wf.error = "; ".join(filter(None, [wf.error, f"COST failed: {cost['error']}"]))
    if cost.get("bytes"):
        wf.bytes, wf.bytes_source = float(cost["bytes"]), "declared"
    if cost.get("flops"):
        wf.flops, wf.flops_source = float(cost["flops"]), "declared"
        wf.compute_dtype = str(cost.get("dtype") or wf.compute_dtype or "float32")
        total_flops = wf.flops
        t_compute = wf.flops / ceil.rate(wf.compute_dtype)
    if wf.bytes and (p.flops_counted is not None or wf.flops_source == "declared"):
        wf.intensity = total_flops / wf.bytes
        wf.bound = _classify(t_compute, wf.bytes / ceil.bandwidth_Bps)
        # the estimate is a lower bound on FLOPs: more work only moves a bound towards compute
        wf.bound_estimated = (
            bool(wf.uncounted_ops) and wf.flops_source != "declared" and wf.bound != "compute"
        )
    return wf


def _derived_op(probes: list[WorkloadProbe]) -> str:
    names: list[str] = []
    for p in probes:
        for op in p.ops:
            name = op.op.lstrip("_")
            if name not in names:
                names.append(name)
    shown = names[:4]
    return " + ".join(shown) + (" + ..." if len(names) > 4 else "")


def derive_facts(task: Task, probe: ProbeResult, ceilings: Ceilings | None = None) -> TaskFacts:
    """TaskFacts from a probe result and the task's own declarations (no subprocess)."""
    ceil = ceilings or H200
    facts = TaskFacts(
        task=task.name,
        key=probe.key,
        ceilings=ceil,
        smoke=probe.smoke,
        rounding=probe.rounding,
        error=probe.error,
    )
    by_name = {p.workload: p for p in probe.workloads}
    for w in task.workloads:
        p = by_name.get(w.name)
        if p is None:
            p = WorkloadProbe(workload=w.name, split=w.split, error=probe.error or "not probed")
        p = p.model_copy(update={"split": w.split})
        facts.workloads.append(_workload_facts(p, ceil))
    main = [by_name[w.name] for w in task.workloads if w.split == "search" and w.name in by_name]
    main = [p for p in main if p.method != "none"] or [p for p in by_name.values() if p.method != "none"]
    declared = set(task.declared)
    if "dtype" in declared:
        facts.dtype, facts.dtype_source = task.dtype, "declared"
    elif main and (d := _derived_dtype(main)):
        facts.dtype, facts.dtype_source = d, "derived"
    if "bound" in declared and task.bound != "unknown":
        facts.bound, facts.bound_source = task.bound, "declared"
    else:
        bounds = {w.bound for w in facts.workloads if w.split == "search" and w.bound != "unknown"}
        if bounds:
            facts.bound = bounds.pop() if len(bounds) == 1 else "mixed"
            facts.bound_source = "derived"
    if "op" in declared or task.op:
        facts.op, facts.op_source = task.op, "declared"
    elif main and (op := _derived_op(main)):
        facts.op, facts.op_source = op, "derived"
    return facts


def apply_facts(task: Task, facts: TaskFacts) -> Task:
    """A copy of `task` whose undeclared dtype, bound and op are the derived ones."""
    update: dict[str, Any] = {}
    if facts.dtype_source == "derived":
        update["dtype"] = facts.dtype
    if facts.bound_source == "derived":
        update["bound"] = facts.bound
    if facts.op_source == "derived":
        update["op"] = facts.op
    return task.model_copy(update=update, deep=True)


# ----------------------------------------------------------------------------------- the probe


def _file_bytes(task: Task) -> bytes:
    """The content the facts depend on: the task file, or a task folder's files, and a workloads file."""
    path = task.source_path
    parts: list[bytes] = []
    files = [path] if path.is_file() else sorted(p for p in path.glob("*") if p.is_file())
    extra = task.extras.get("workloads_path")
    if isinstance(extra, str) and Path(extra).is_file():
        files.append(Path(extra))
    for f in files:
        try:
            parts.append(f.name.encode() + b"\0" + f.read_bytes())
        except OSError as exc:  # unreadable now: the key still differs from a readable version's
            parts.append(f"{f.name}: {exc}".encode())
    return b"\0\0".join(parts)


def _keyed_workloads(task: Task) -> list[Workload]:
    # a smoke workload the loader derived is itself a function of the file: leave it out of the key,
    # so a task loaded before and after its smoke was shrunk shares one probe
    return [w for w in task.workloads if not (task.smoke_derived and w.split == "smoke")]


def facts_key(task: Task) -> str:
    h = hashlib.sha256()
    h.update(f"facts:{FACTS_VERSION}:{task.style}:{task.candidate_entry}\0".encode())
    precision = task.extras.get("precision")
    if precision:  # KernelBench's precision casts inputs and weights: other dtypes, other bytes
        h.update(f"precision:{precision}\0".encode())
    h.update(_file_bytes(task))
    h.update(
        json.dumps([w.model_dump() for w in _keyed_workloads(task)], sort_keys=True, default=str).encode()
    )
    return h.hexdigest()[:32]


def cache_dir() -> Path:
    env = os.environ.get("KSEARCH_FACTS_CACHE")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ksearch" / "task-facts"


_probed: dict[str, ProbeResult] = {}


def _read_cached(key: str) -> ProbeResult | None:
    hit = _probed.get(key)
    if hit is not None:
        return hit
    f = cache_dir() / f"{key}.json"
    try:
        hit = ProbeResult.model_validate_json(f.read_text())
    except (OSError, ValidationError, ValueError):
        return None  # absent, or written by another version: probe again
    if hit.version != FACTS_VERSION or hit.key != key:
        return None
    _probed[key] = hit
    return hit


def _write_cached(result: ProbeResult) -> None:
    _probed[result.key] = result
    if result.error:  # a failed probe may be transient (a timeout on a busy machine): memory only
        return
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(result.model_dump_json())
        os.replace(tmp, d / f"{result.key}.json")
    except OSError:
        # an unwritable cache costs a re-probe next process, nothing else
        return


def enabled() -> bool:
    return os.environ.get("KSEARCH_TASK_FACTS", "on").lower() not in ("0", "off", "false", "no")


# one probe per key at a time in this process: a prompt asking while the background probe runs waits for it
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def probe_task(task: Task, *, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """The raw probe for a task, from the cache or a fresh subprocess. Never raises for the task's faults."""
    key = facts_key(task)
    hit = _read_cached(key)
    if hit is not None:
        return hit
    if not enabled():
        return ProbeResult(key=key, error="task facts are turned off (KSEARCH_TASK_FACTS)")
    with _key_locks_guard:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        hit = _read_cached(key)  # probed by another thread while this one waited
        if hit is not None:
            return hit
        return _probe(task, key, timeout_s)


def probe_in_background(task: Task) -> threading.Thread | None:
    """Start the task's probe in a daemon thread (a search's creation on a GPU machine: the first prompt, a
    moment later, then finds the facts derived or waits only for the rest); None when they are cached or off.
    A daemon: a process that exits first (a CLI command) does not wait for it."""
    if not enabled() or _read_cached(facts_key(task)) is not None:
        return None
    t = threading.Thread(target=probe_task, args=(task,), name=f"task-facts-{task.name}", daemon=True)
    t.start()
    return t


def _probe(task: Task, key: str, timeout_s: float) -> ProbeResult:
    try:
        out = run_probe(
            ["-m", "ksearch.gpu.tasks.rt.facts", "{home}/task.json"],
            where=task.source_path,
            readable=jail_view.task_paths(task),
            what="derive its shapes and costs",
            timeout_s=timeout_s,
            files={"task.json": task.model_dump_json()},
            # facts need no GPU: a task file gets none, and a fake run never initialises CUDA
            extra_env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "2"},
        )
        lines = out.strip().splitlines()
        result = ProbeResult.model_validate_json(lines[-1]) if lines else None
        if result is None:
            result = ProbeResult(error="the probe printed nothing")
    except ProbeFailed as exc:
        result = ProbeResult(error=str(exc))
    except ValidationError as exc:
        result = ProbeResult(error=f"the probe's answer did not parse: {exc.errors()[0]['msg']}")
    result.key = key
    _write_cached(result)
    return result


def task_facts(task: Task, ceilings: Ceilings | dict[str, Any] | None = None) -> TaskFacts:
    """Shapes, dtypes, bytes, FLOPs and bound of a task's reference per workload (cached per content).

    `ceilings`: a Ceilings, or the sandbox's measured ceilings dict; default the H200 datasheet.
    """
    ceil = ceilings if isinstance(ceilings, Ceilings) else None
    if isinstance(ceilings, dict):
        ceil = ceilings_from_measured(ceilings)
    return derive_facts(task, probe_task(task), ceil)


__all__ = [
    "H200",
    "Ceilings",
    "ProbeResult",
    "RoundingProbe",
    "SmokeProbe",
    "TaskFacts",
    "TensorInfo",
    "WorkloadFacts",
    "WorkloadProbe",
    "apply_facts",
    "ceilings_from_measured",
    "derive_facts",
    "facts_key",
    "probe_in_background",
    "probe_task",
    "task_facts",
]
