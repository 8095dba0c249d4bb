"""Running a task's reference once for its facts: fake or real, with every compute op noted.

The measuring half of the facts subprocess (gpu/tasks/rt/facts.py): `Prober.measure` runs one workload's
reference under FakeTensorMode (shapes and dtypes, no storage) or for real on the CPU, counting FLOPs as
torch.utils.flop_counter counts them and noting every other compute op. Imports torch: subprocesses only.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._C import DispatchKey
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from ksearch.gpu.task import Task, Workload
from ksearch.gpu.tasks.facts import OpTally, TensorInfo, WorkloadProbe
from ksearch.gpu.tasks.rt.common import as_result
from ksearch.gpu.tasks.rt.placement import Placements, cuda_read_as_cpu

# Ops that move or make data without arithmetic: no FLOPs, and not "uncounted" either.
ZERO_FLOP_OPS = frozenset({
    "_to_copy", "_unsafe_view", "alias", "arange", "as_strided", "cat", "clone", "constant_pad_nd",
    "contiguous", "copy", "copy_", "detach", "embedding", "empty", "empty_like", "empty_strided",
    "expand", "fill", "fill_", "flip", "full", "full_like", "gather", "index", "index_select",
    "lift_fresh", "lift_fresh_copy", "new_empty", "new_empty_strided", "new_full", "new_ones",
    "new_zeros", "ones", "ones_like", "permute", "rand_like", "randn_like", "repeat", "roll",
    "scalar_tensor", "select_scatter", "slice_scatter", "split_with_sizes_copy", "stack",
    "unbind_copy", "view_copy", "zero_", "zeros", "zeros_like", "_local_scalar_dense",
    # random fills: a reference that builds its module per call draws the initial weights it then replaces
    "bernoulli_", "cauchy_", "exponential_", "geometric_", "log_normal_", "normal_", "random_", "uniform_",
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
    """One TensorInfo per leaf, named by its path in a nested value (`data[2]['norm.weight']`). A tensor
    passed twice is described twice but its bytes count once."""
    out: list[TensorInfo] = []
    for i, v in enumerate(values):
        base = names[i] if i < len(names) else f"{prefix}{i}"
        leaves = tree_flatten_with_path(v)[0]
        for path, leaf in leaves:
            name = base if len(leaves) == 1 else f"{base}{keystr(path)}"
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


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


class Prober:
    """Runs one task's reference per workload, fake or real."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.native = task.style == "kernelbench"
        if self.native:
            from ksearch.gpu.tasks.rt.native import NativeRuntime

            self.impl: Any = NativeRuntime(task)
        else:
            from ksearch.gpu.tasks.rt.runtime import TaskRuntime

            # a reference that pins its data to CUDA is refused on the CPU (gpu/tasks/rt/gpumode.py); here its
            # placements are read as CPU ones instead (`measure`), so the probe's copy of the task drops the note
            extras = {k: v for k, v in task.extras.items() if k != "needs_gpu"}
            self.impl = TaskRuntime(task.model_copy(update={"extras": extras}))

    def reference(self, wl: Workload) -> tuple[Any, Callable[[list], Any]]:
        """The reference on the CPU: its Model (native tasks; else None) and a callable inputs -> output."""
        if self.native:
            model = self.impl.reference_model(wl, "cpu")
            return model, lambda inputs: as_result(model(*inputs))
        # on the data itself, not the per-call copy an evaluation makes: what it writes in place is seen
        return None, self.impl.build_reference_uncopied(wl, "cpu")

    def _input_names(self, model: Any, n: int) -> list[str]:
        if model is not None:
            return _forward_names(model, n)
        declared = self.task.extras.get("inputs")
        if isinstance(declared, dict) and len(declared) == n:
            return list(declared)
        if self.task.style == "gpumode":  # generate_input's value, which ref_kernel takes as `data`
            return ["data"]
        return []

    def measure(self, wl: Workload, *, fake: bool, cuda_as_cpu: bool | None = None) -> WorkloadProbe:
        """The reference's facts on one workload. `cuda_as_cpu` (default: for fake runs) reads the
        reference's CUDA placements as CPU ones (gpu/tasks/rt/placement.py): for facts, never for a run
        that stands for an evaluation on this machine (a smoke workload's check)."""
        p = WorkloadProbe(workload=wl.name, split=wl.split, method="fake" if fake else "real")
        mode = _fake_tensors() if fake else contextlib.nullcontext()
        placed = cuda_read_as_cpu() if (fake if cuda_as_cpu is None else cuda_as_cpu) else None
        placements: Placements | None = None
        how = "under fake tensors" if fake else "in a real CPU run"
        stage = "making the inputs"
        try:
            with mode, placed or contextlib.nullcontext() as placements:
                inputs = self.impl.make_inputs(wl, 0, "cpu")
                stage = "building the Model"
                model, fn = self.reference(wl)
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
                # the same leaves in the same order as p.inputs; a version counter that moves was written in place
                leaves = [leaf for v in list(inputs) for _, leaf in tree_flatten_with_path(v)[0]]
                before = [t._version if isinstance(t, torch.Tensor) else None for t in leaves]
                with torch.no_grad(), _OpRecorder() as recorder:
                    out = fn(inputs)
                for info, t, v in zip(p.inputs, leaves, before, strict=True):
                    info.written = v is not None and t._version != v
                leaves = [out] if isinstance(out, torch.Tensor) else list(tree_flatten(out)[0])
                names = ["out"] if len(leaves) == 1 else [f"out{i}" for i in range(len(leaves))]
                p.outputs = _describe(leaves, names, "out", set())
                p.flops_counted = float(recorder.flops)
                p.ops = list(recorder.tallies.values())
        except Exception as exc:  # task code may raise anything: it is reported, per workload
            p.error = f"{stage} {how}: {first_line(exc)}"
            if not p.inputs:
                p.method = "none"
        finally:
            if placements:
                p.cuda_as_cpu = sorted(placements.seen)
        return p

    def run_plain(self, wl: Workload) -> str | None:
        """One real CPU call of the reference, nothing counted (what a smoke check does): None, or the
        error. Dispatching every op through the counting modes costs a recurrent model seconds."""
        stage = "making the inputs"
        try:
            inputs = self.impl.make_inputs(wl, 0, "cpu")
            stage = "building the Model"
            _, fn = self.reference(wl)
            stage = "running the forward"
            with torch.no_grad():
                fn(inputs)
        except Exception as exc:  # task code may raise anything: the caller reports it
            return f"{stage} in a real CPU run: {first_line(exc)}"
        return None

    def cost(self, wl: Workload) -> dict[str, Any] | None:
        try:
            c = self.impl.cost(wl)
        except Exception as exc:  # a broken COST is the task's fault; the derived numbers still stand
            return {"error": first_line(exc)}
        return c.model_dump() if c is not None else None
