"""What a model's forward calls, and how long each call takes (imports torch).

`capture` runs one forward under the runtime's `Tracker` (gpu/model/runtime.py) and records each call site: a leaf
module's call or a torch function called directly in a module's forward, with its arguments (tensors by shape,
dtype and layout; the rest as values), its outputs, and copies of its tensors for checks. Views and metadata
(`view`, `transpose`, `size`, ...) are followed but are not sites of their own. `group` joins two sites into one
fusible operator where the model's data flow allows it: a matmul with the activation that alone consumes its
output (`linear_act`), and a residual add with the norm of its sum (`add_norm`, the sum still returned).
`profile_sites` times every site over a few forwards with torch.profiler, each inside a `record_function` range
named by its site: on a GPU the CUDA time of the kernels it launched, on a CPU its CPU time.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ksearch.gpu.model.load import Loaded, ModelError
from ksearch.gpu.model.runtime import Tracker, flatten, fn_name, specs

VIEWS = frozenset(
    """view view_as reshape reshape_as transpose t T mT H permute unsqueeze squeeze expand expand_as flatten
    unflatten narrow select split split_with_sizes chunk unbind __getitem__ size dim numel stride is_contiguous
    data_ptr element_size __len__ __iter__ __bool__ __format__ __repr__ __hash__ item tolist detach __get__ __set__
    requires_grad_ is_floating_point is_complex storage_offset get_device __contains__ movedim swapaxes
    as_strided diagonal dim_order __index__ __int__ __float__ nelement ndimension""".split()
)
ACTS = ("gelu", "silu", "relu", "tanh", "sigmoid", "mish", "swish", "hardswish", "elu", "softplus")
LINEARS = frozenset({"linear", "matmul", "mm", "addmm", "bmm", "__matmul__"})
ADDS = frozenset({"add", "__add__", "__radd__"})
NORM_FUNCS = frozenset({"layer_norm", "rms_norm", "group_norm"})
KEEP_BYTES = 4 << 30  # copies of sites' tensors kept beyond the first of each signature, at most


def short(name: str) -> str:
    return name.rpartition(".")[2]


class Slot:
    """A tensor's place in a call's arguments (the i-th tensor, depth first)."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i


def _slotted(value: Any) -> Any:
    """The call with each tensor replaced by its Slot, in flatten's order."""
    n = [0]

    def walk(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            n[0] += 1
            return Slot(n[0] - 1)
        if isinstance(v, tuple):
            return tuple(walk(x) for x in v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value)


def _struct(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return "tensor"
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        t = type(out)
        return f"{t.__module__}.{t.__qualname__}"
    if isinstance(out, list):
        return "list"
    if isinstance(out, tuple):
        return "tuple"
    return "other"


def _clone(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone() for t in ts]


def _layout(t: torch.Tensor) -> str:
    return "c" if t.is_contiguous() else "s" + ",".join(map(str, t.stride()))


_INTERNAL_ATTRS = frozenset(vars(torch.nn.Module()).keys()) | {"training"}


def literal_attrs(m: torch.nn.Module) -> dict[str, Any]:
    """A module's plain attributes (what configures it besides its tensors), as JSON-able values where they are."""
    out: dict[str, Any] = {}
    for k, v in vars(m).items():
        if k in _INTERNAL_ATTRS or k == "forward":
            continue
        if v is None or isinstance(v, bool | int | float | str):
            out[k] = v
        elif isinstance(v, tuple | list) and all(
            x is None or isinstance(x, bool | int | float | str) for x in v
        ):
            out[k] = list(v)
        elif isinstance(v, torch.dtype):
            out[k] = str(v)
        else:
            out[k] = f"<{type(v).__qualname__}>"
    return out


def module_signature(m: torch.nn.Module) -> dict[str, Any]:
    tensors = [
        [n, list(t.shape), str(t.dtype)]
        for n, t in [*m.named_parameters(recurse=False), *m.named_buffers(recurse=False)]
        if t is not None
    ]
    return {
        "class": f"{type(m).__module__}.{type(m).__qualname__}",
        "tensors": tensors,
        "attrs": literal_attrs(m),
    }


@dataclass
class Site:
    index: int
    key: str  # "PATH#N" (a leaf module's N-th call) or "PATH|FUNCTION|K"
    kind: str  # module | function
    path: str  # the module's path, or the path of the module whose forward calls the function
    op: str  # the module's class name, or the function's name
    module: torch.nn.Module | None
    func: Any
    call: Any  # [args, kwargs] with each tensor replaced by its Slot
    skeleton: Any
    specs: list[list[Any]]
    layouts: list[str]
    in_ids: list[int]
    out_ids: list[int] = field(default_factory=list)
    out_specs: list[list[Any]] = field(default_factory=list)
    struct: str = "tensor"
    inputs: list[torch.Tensor] | None = None  # copies, for checks (None where not kept)
    outputs: list[torch.Tensor] | None = None
    signature: str = ""
    time_us: float = 0.0  # per forward, from the profiled runs

    @property
    def short(self) -> str:
        return short(self.op)

    @property
    def label(self) -> str:
        return self.op if self.kind == "module" else self.short.strip("_")

    def inplace(self) -> bool:
        s = self.short
        return (self.kind == "function" and s.endswith("_") and not s.endswith("__")) or s.startswith("__i")


class _Ids:
    """A number per live tensor object (a weak reference tells a reused id() from the same tensor)."""

    def __init__(self) -> None:
        self.refs: dict[int, tuple[weakref.ref, int]] = {}
        self.n = 0

    def __call__(self, t: torch.Tensor) -> int:
        hit = self.refs.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        self.n += 1
        self.refs[id(t)] = (weakref.ref(t), self.n)
        return self.n


@dataclass
class Capture:
    sites: list[Site]
    uses: dict[int, int]  # tensor number -> how many calls took it (views and model outputs included)
    outputs: list[int]  # the model's output tensors


def capture(loaded: Loaded, inputs: list[Any], keep: str = "first") -> Capture:
    """One forward, every site recorded. `keep`: copies of the tensors of the first site of each signature
    ("first"), or of every site while under KEEP_BYTES ("all")."""
    ids = _Ids()
    sites: list[Site] = []
    uses: dict[int, int] = {}
    open_modules: dict[str, Site] = {}
    seen: set[str] = set()
    kept = [0]

    def use(ts: list[torch.Tensor]) -> list[int]:
        out = [ids(t) for t in ts]
        for i in out:
            uses[i] = uses.get(i, 0) + 1
        return out

    def keep_copies(site: Site) -> bool:
        if site.signature not in seen:
            seen.add(site.signature)
            return True
        if keep != "all":
            return False
        size = sum(t.numel() * t.element_size() for t in site_tensors[site.key])
        if kept[0] + size > KEEP_BYTES:
            return False
        kept[0] += size
        return True

    site_tensors: dict[str, list[torch.Tensor]] = {}

    def new_site(
        key: str, kind: str, path: str, op: str, module: Any, func: Any, args: tuple, kwargs: dict
    ) -> Site:
        skeleton, tensors = flatten([list(args), kwargs])
        site = Site(
            index=len(sites),
            key=key,
            kind=kind,
            path=path,
            op=op,
            module=module,
            func=func,
            call=_slotted([list(args), kwargs]),
            skeleton=skeleton,
            specs=specs(tensors),
            layouts=[_layout(t) for t in tensors],
            in_ids=use(tensors),
        )
        ident: Any = module_signature(module) if module is not None else op
        site.signature = json.dumps(
            [kind, ident, skeleton, site.specs, site.layouts], sort_keys=True, default=str
        )
        site_tensors[key] = tensors
        if keep_copies(site):
            site.inputs = _clone(tensors)
        sites.append(site)
        return site

    def finish(site: Site, out: Any) -> None:
        _, outs = flatten(out)
        site.out_ids = [ids(t) for t in outs]
        site.out_specs = specs(outs)
        site.struct = _struct(out)
        if site.inputs is not None:
            site.outputs = _clone(outs)
        site_tensors.pop(site.key, None)

    def on_module(key: str, path: str, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        open_modules[key] = new_site(key, "module", path, type(module).__name__, module, None, args, kwargs)

    def on_module_end(
        key: str, path: str, module: torch.nn.Module, args: tuple, kwargs: dict, out: Any
    ) -> None:
        site = open_modules.pop(key, None)
        if site is not None:
            finish(site, out)

    def on_function(key: str, func: Any, args: tuple, kwargs: dict) -> Any:
        name = fn_name(func)
        if short(name) in VIEWS:
            use(flatten([list(args), kwargs])[1])
            out = func(*args, **kwargs)
            return out
        path = key.split("|", 1)[0]
        site = new_site(key, "function", path, name, None, func, args, kwargs)
        out = func(*args, **kwargs)
        finish(site, out)
        return out

    tracker = Tracker(loaded.model, on_module=on_module, on_module_end=on_module_end, on_function=on_function)
    tracker.install()
    try:
        with torch.no_grad(), tracker:
            out = loaded.model(*inputs)
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"{loaded.ref}: the model's forward raised {type(e).__name__}: {e}") from None
    finally:
        tracker.remove()
    _, outs = flatten(out)
    return Capture(sites=sites, uses=uses, outputs=[ids(t) for t in outs])


# ------------------------------------------------------------------------------------------------ groups


@dataclass
class Item:
    """One operator to rank: a site alone or two sites fused, with every occurrence of it in the forward."""

    kind: str  # module | function | linear_act | add_norm
    occurrences: list[list[Site]]  # each: [site] or [entry, follower]
    signature: str = ""

    @property
    def first(self) -> list[Site]:
        return self.occurrences[0]

    @property
    def label(self) -> str:
        return " + ".join(s.label for s in self.first)

    @property
    def time_us(self) -> float:
        return sum(s.time_us for occ in self.occurrences for s in occ)

    @property
    def calls(self) -> int:
        return len(self.occurrences)


def _is_act(s: Site) -> bool:
    name = (s.op if s.kind == "module" else s.short).lower()
    return any(a in name for a in ACTS) and len(s.specs) == 1


def _is_linear(s: Site) -> bool:
    if s.kind == "module":
        return isinstance(s.module, torch.nn.Linear)
    return s.short in LINEARS


def _is_norm(s: Site) -> bool:
    if s.kind == "module":
        return "norm" in s.op.lower() and len(s.specs) == 1
    return s.short in NORM_FUNCS


def _is_add(s: Site) -> bool:
    return s.kind == "function" and s.short in ADDS and len(s.specs) == 2 and s.specs[0] == s.specs[1]


def _first_tensor(s: Site) -> int | None:
    return s.in_ids[0] if s.in_ids else None


def group(cap: Capture) -> list[Item]:
    """The sites as items: fusible pairs joined (see the module's docstring), then equal ones merged (the same
    operator on the same shapes, dtypes and layouts: one task, several sites)."""
    producer = {i: s for s in cap.sites for i in s.out_ids}
    outputs = set(cap.outputs)
    taken: set[int] = set()
    units: list[tuple[str, list[Site]]] = []
    pairs: dict[int, tuple[str, Site]] = {}  # entry index -> (kind, follower)
    for s in cap.sites:
        t = _first_tensor(s)
        p = producer.get(t) if t is not None else None
        if t is None or p is None or p.index in taken or s.index in taken or len(p.out_ids) != 1:
            continue
        if _is_act(s) and _is_linear(p) and cap.uses.get(t, 0) == 1 and t not in outputs:
            pairs[p.index] = ("linear_act", s)
        elif _is_norm(s) and _is_add(p):
            pairs[p.index] = ("add_norm", s)
        else:
            continue
        taken |= {p.index, s.index}
    # a module's forward is replaced for every call with the same tensors: fuse its activation in only where every
    # such call of it is followed by its activation
    alone = {(s.path, json.dumps(s.specs)) for s in cap.sites if s.kind == "module" and s.index not in taken}
    for i, (kind, follower) in list(pairs.items()):
        entry = cap.sites[i]
        if kind == "linear_act" and entry.kind == "module" and (entry.path, json.dumps(entry.specs)) in alone:
            del pairs[i]
            taken -= {i, follower.index}
    for s in cap.sites:
        if s.index in pairs:
            kind, follower = pairs[s.index]
            units.append((kind, [s, follower]))
        elif s.index not in taken:
            units.append((s.kind, [s]))
    items: dict[str, Item] = {}
    for kind, occ in units:
        sig = json.dumps([kind, [s.signature for s in occ]])
        item = items.get(sig)
        if item is None:
            items[sig] = Item(kind=kind, occurrences=[occ], signature=sig)
        else:
            item.occurrences.append(occ)
    return list(items.values())


# ------------------------------------------------------------------------------------------------ timing


@dataclass
class Timed:
    device_kind: str  # cuda | cpu
    per_site_us: dict[str, float]  # site key -> time per forward
    total_us: float  # the whole forward, per forward
    iters: int


def profile_sites(loaded: Loaded, inputs: list[Any], iters: int, warmup: int = 3) -> Timed:
    """Each site's time per forward over `iters` profiled forwards (after `warmup` plain ones)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    cuda = loaded.device.type == "cuda"
    ranges: dict[str, Any] = {}

    def on_module(key: str, path: str, module: Any, args: tuple, kwargs: dict) -> None:
        r = record_function(f"ksearch@{key}")
        r.__enter__()
        ranges[key] = r

    def on_module_end(key: str, path: str, module: Any, args: tuple, kwargs: dict, out: Any) -> None:
        r = ranges.pop(key, None)
        if r is not None:
            r.__exit__(None, None, None)

    def on_function(key: str, func: Any, args: tuple, kwargs: dict) -> Any:
        if short(fn_name(func)) in VIEWS:
            return func(*args, **kwargs)
        with record_function(f"ksearch@{key}"):
            return func(*args, **kwargs)

    with torch.no_grad():
        for _ in range(warmup):
            loaded.model(*inputs)
        if cuda:
            torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    tracker = Tracker(loaded.model, on_module=on_module, on_module_end=on_module_end, on_function=on_function)
    tracker.install()
    try:
        with torch.no_grad(), profile(activities=activities) as prof:
            for _ in range(iters):
                with tracker, record_function("ksearch.forward"):
                    loaded.model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    finally:
        tracker.remove()
    per: dict[str, float] = {}
    total = 0.0
    metric: Callable[[Any], float] = (
        (lambda e: float(e.device_time_total)) if cuda else (lambda e: float(e.cpu_time_total))
    )
    for e in prof.events():
        if e.device_type != DeviceType.CPU:
            continue  # a range's copy on the GPU's timeline (gpu_user_annotation): its CPU event counts its kernels
        if e.name == "ksearch.forward":
            total += metric(e)
        elif e.name.startswith("ksearch@"):
            key = e.name[len("ksearch@") :]
            per[key] = per.get(key, 0.0) + metric(e)
    return Timed(
        device_kind="cuda" if cuda else "cpu",
        per_site_us={k: v / iters for k, v in per.items()},
        total_us=total / iters,
        iters=iters,
    )
