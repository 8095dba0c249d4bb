"""Call sites of a model, and kernels put in their place: the part of plug-back a plugged model carries with it.

Standalone on purpose: it imports torch and the standard library only, nothing of ksearch, because `ksearch model
--plug-back` copies this file's text into every plugged model it writes (a file a user imports where ksearch is not
installed). ksearch's own capture (gpu/model/capture.py) follows a model's forward with the same `Tracker`, so a
call site is named the same way when its operator is found and when a kernel takes its place.

A site is either a call of a leaf module (a module without children: `nn.Linear`, a norm, an activation), named
`PATH#N` (its N-th call in one forward), or a torch function called directly in a module's forward (not inside a
leaf module), named `PATH|FUNCTION|K` (the K-th call of that function in one call of the module at PATH).

`plug(model, plan, kernels)` puts kernels in place: a leaf module's `forward` is replaced on the instance (the class
is untouched) and a function site is answered through a torch function mode while the model runs; a call whose
tensors' shapes, dtypes or other arguments differ from the site's runs the original instead (counted as a fallback).
A kernel shares the model's own parameters and buffers by name (never a copy), so it follows the model's weights.
What cannot be put in place (a kernel whose weights do not match its site's, a site the model lacks) raises
RuntimeError with the reason (no exception class of its own: the file must stand alone).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = [
    "Plugged",
    "Tracker",
    "flatten",
    "fn_name",
    "is_leaf",
    "load_kernel",
    "plug",
    "share_weights",
    "specs",
]


def is_leaf(module: torch.nn.Module) -> bool:
    return next(iter(module.children()), None) is None


def fn_name(func: Any) -> str:
    """A stable name for a torch function (`TensorBase.softmax`, `_VariableFunctionsClass.matmul`, `linear`)."""
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func))


def _internal(func: Any) -> bool:
    return "record_function" in fn_name(func)


def flatten(value: Any) -> tuple[Any, list[torch.Tensor]]:
    """(skeleton, tensors): a call's arguments with each tensor replaced by {"t": i} (i in depth-first order), tuples
    and lists as lists, dtypes and devices as {"dtype": name}; the skeleton is JSON data, compared to match a call."""
    tensors: list[torch.Tensor] = []

    def walk(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            return {"t": len(tensors) - 1}
        if isinstance(v, tuple | list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {"kw": {str(k): walk(x) for k, x in v.items()}}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, slice):
            return {"slice": [walk(v.start), walk(v.stop), walk(v.step)]}
        if v is Ellipsis:
            return {"ellipsis": True}
        if v is None or isinstance(v, bool | int | float | str):
            return v
        return {"object": type(v).__qualname__}

    return walk(value), tensors


def specs(tensors: list[torch.Tensor]) -> list[list[Any]]:
    """[[shape, dtype name], ...]: what a call's tensors must be for a kernel to take it."""
    return [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in tensors]


class _Frame:
    __slots__ = ("counters", "leaf", "path")

    def __init__(self, path: str, leaf: bool) -> None:
        self.path = path
        self.leaf = leaf
        self.counters: dict[str, int] = {}


ModuleHook = Callable[[str, str, torch.nn.Module, tuple, dict], None]
ModulePost = Callable[[str, str, torch.nn.Module, tuple, dict, Any], None]
FunctionHook = Callable[[str, Any, tuple, dict], Any]


class Tracker(TorchFunctionMode):
    """Follows a model's forward: a stack of the modules running (hooks on every module), and each torch function
    called directly in a module's forward, by site. `on_module(site, path, module, args, kwargs)` and
    `on_module_end(..., output)` see each leaf module call; `on_function(site, func, args, kwargs)` answers each
    function site (by default: the function itself). Torch calls made by the callbacks themselves are not sites."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        on_module: ModuleHook | None = None,
        on_module_end: ModulePost | None = None,
        on_function: FunctionHook | None = None,
        watch: set[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        # (module path, function name) pairs whose calls are sites worth answering; None: every call is (the caller
        # enters the mode). With them, only those modules and their children are followed, the mode is entered while
        # one of those modules runs (nothing else pays for it), and any other call goes straight through
        self.watch = watch
        self._entered = 0
        self.watch_paths = None if watch is None else {p for p, _ in watch}
        self._names: dict[Any, str] = {}
        self.paths = {id(m): name for name, m in model.named_modules()}
        self.on_module = on_module
        self.on_module_end = on_module_end
        self.on_function = on_function
        self.stack: list[_Frame] = []
        self.leaf_depth = 0
        self.busy = 0  # inside a callback: its own torch calls are not sites
        self.calls: dict[str, int] = {}  # module path -> its calls in this forward
        self._handles: list[Any] = []

    def install(self) -> Tracker:
        seen: set[int] = set()
        followed: set[int] | None = None
        if self.watch_paths is not None:
            followed = set()
            for path, m in self.model.named_modules():
                if path in self.watch_paths:
                    followed |= {id(m)} | {id(c) for c in m.children()}
        for m in self.model.modules():
            if id(m) in seen or (followed is not None and id(m) not in followed):
                continue
            seen.add(id(m))
            self._handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(m.register_forward_hook(self._post, with_kwargs=True, always_call=True))
        return self

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def begin(self) -> None:
        """A new forward: the sites' counts start again."""
        self.stack = []
        self.leaf_depth = 0
        self.calls = {}

    def _pre(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        path = self.paths.get(id(module), "?")
        if module is self.model and not self.stack:
            self.begin()
        leaf = is_leaf(module)
        n = self.calls.get(path, 0)
        self.calls[path] = n + 1
        if leaf and self.leaf_depth == 0 and self.on_module is not None:
            self.busy += 1
            try:
                self.on_module(f"{path}#{n}", path, module, args, kwargs)
            finally:
                self.busy -= 1
        self.stack.append(_Frame(path, leaf))
        if leaf:
            self.leaf_depth += 1
        if self.watch_paths is not None and path in self.watch_paths:
            self._entered += 1
            if self._entered == 1:
                self.__enter__()

    def _post(self, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if not self.stack:
            return
        frame = self.stack.pop()
        if self.watch_paths is not None and frame.path in self.watch_paths:
            self._entered -= 1
            if self._entered == 0:
                self.__exit__(None, None, None)
        if frame.leaf:
            self.leaf_depth -= 1
            if self.leaf_depth == 0 and self.on_module_end is not None:
                n = self.calls.get(frame.path, 1) - 1
                self.busy += 1
                try:
                    self.on_module_end(f"{frame.path}#{n}", frame.path, module, args, kwargs, output)
                finally:
                    self.busy -= 1

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.busy or self.leaf_depth or not self.stack or _internal(func):
            return func(*args, **kwargs)
        frame = self.stack[-1]
        if self.watch_paths is not None and frame.path not in self.watch_paths:
            return func(*args, **kwargs)
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = fn_name(func)
        if self.watch is not None and (frame.path, name) not in self.watch:
            return func(*args, **kwargs)
        k = frame.counters.get(name, 0)
        frame.counters[name] = k + 1
        if self.on_function is None:
            return func(*args, **kwargs)
        return self.on_function(f"{frame.path}|{name}|{k}", func, args, kwargs)


def _lookup(model: torch.nn.Module, path: str) -> torch.nn.Module:
    try:
        return model.get_submodule(path) if path else model
    except AttributeError:
        raise RuntimeError(f"the model has no module {path!r}") from None


def share_weights(kernel: torch.nn.Module, weights: dict[str, list[str]], model: torch.nn.Module) -> None:
    """Give `kernel` the model's own tensors: `weights` maps each of the kernel's parameter or buffer names to
    [module path, attribute] in the model. The kernel must hold exactly these names, each with the model's shape
    and dtype."""
    own = {n for n, _ in kernel.named_parameters()} | {n for n, _ in kernel.named_buffers()}
    want = set(weights)
    if own != want:
        extra, missing = sorted(own - want), sorted(want - own)
        raise RuntimeError(
            "its ModelNew does not hold the task's Model's parameters and buffers by name"
            + (f"; it lacks {', '.join(missing)}" if missing else "")
            + (f"; it has {', '.join(extra)}, which the Model has not" if extra else "")
            + " (plug-back gives the kernel the model's own weights by name)"
        )
    for name, (path, attr) in weights.items():
        live = getattr(_lookup(model, path), attr)
        owner_path, _, leaf = name.rpartition(".")
        owner = kernel.get_submodule(owner_path) if owner_path else kernel
        mine = getattr(owner, leaf)
        if not isinstance(live, torch.Tensor) or live.shape != mine.shape or live.dtype != mine.dtype:
            got = (
                f"{tuple(live.shape)} {live.dtype}" if isinstance(live, torch.Tensor) else type(live).__name__
            )
            raise RuntimeError(
                f"its {name} is {tuple(mine.shape)} {mine.dtype}, the model's {path}.{attr} is {got}"
            )
        if leaf in owner._parameters:
            if not isinstance(live, torch.nn.Parameter):
                live = torch.nn.Parameter(live, requires_grad=False)
            owner._parameters[leaf] = live
        else:
            owner._buffers[leaf] = live


def _restructure(out: Any, struct: str, original: Any = None) -> Any:
    if struct == "tensor":
        return out[0] if isinstance(out, tuple | list) and len(out) == 1 else out
    items = list(out) if isinstance(out, tuple | list) else [out]
    if struct == "list":
        return items
    if struct == "tuple":
        return tuple(items)
    mod, _, name = struct.rpartition(".")
    return getattr(importlib.import_module(mod), name)(items)


class _Entry:
    """One site a kernel takes: the call it matches, the kernel, and what its answer is."""

    def __init__(self, task: str, site: dict, role: str, kernel: Callable[..., Any] | None) -> None:
        self.task = task
        self.site = site
        self.role = role  # "kernel": calls the kernel; "follow": passes the kernel's answer on
        self.kernel = kernel
        self.skeleton = site["skeleton"]
        self.specs = site["specs"]
        self.hits = 0
        self.fallbacks = 0

    def matches(self, args: tuple, kwargs: dict) -> list[torch.Tensor] | None:
        skeleton, tensors = flatten([list(args), kwargs])
        return tensors if skeleton == self.skeleton and specs(tensors) == self.specs else None


class Plugged:
    """The kernels in place on one model (`plug`'s answer): `hits` and `fallbacks` per site, `unplug()` undoes it."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.entries: list[_Entry] = []
        self.by_module: dict[str, list[_Entry]] = {}
        self.by_site: dict[str, _Entry] = {}
        self.pending: dict[
            str, tuple[Any, Any]
        ] = {}  # follower site -> (what it will be called with, its answer)
        self.tracker: Tracker | None = None
        self._forwards: dict[str, tuple[torch.nn.Module, Any]] = {}

    # ----------------------------------------------------------------------------------------- answers

    def _answer(self, entry: _Entry, tensors: list[torch.Tensor]) -> Any:
        """Run the kernel of a site that calls it, and set up what its group's follower will pass on."""
        assert entry.kernel is not None
        out = entry.kernel(*tensors)
        entry.hits += 1
        kind = entry.site["group"]
        if kind == "linear_act":
            self.pending[entry.site["follower"]] = (out, out)
            return out
        if kind == "add_norm":
            normed, summed = out
            self.pending[entry.site["follower"]] = (summed, normed)
            return summed
        return _restructure(out, entry.site.get("struct", "tensor"))

    def _follow(self, entry: _Entry, first: Any) -> tuple[bool, Any]:
        key = entry.site["key"]
        pend = self.pending.get(key)
        if pend is not None and first is pend[0]:
            del self.pending[key]
            entry.hits += 1
            return True, pend[1]
        return False, None

    def _module_forward(self, path: str, original: Any) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            for entry in self.by_module[path]:
                if entry.role == "follow":
                    done, out = self._follow(entry, args[0] if args else None)
                    if done:
                        return out
                    continue
                tensors = entry.matches(args, kwargs)
                if tensors is not None:
                    return self._answer(entry, tensors)
            for entry in self.by_module[path]:
                if entry.role == "kernel":
                    entry.fallbacks += 1
                    break
            return original(*args, **kwargs)

        return forward

    def _function(self, site: str, func: Any, args: tuple, kwargs: dict) -> Any:
        entry = self.by_site.get(site)
        if entry is not None:
            if entry.role == "follow":
                done, out = self._follow(entry, args[0] if args else None)
                if done:
                    return out
            else:
                tensors = entry.matches(args, kwargs)
                if tensors is not None:
                    return self._answer(entry, tensors)
                entry.fallbacks += 1
        return func(*args, **kwargs)

    # ------------------------------------------------------------------------------------ installing

    def add(self, task: str, site: dict, role: str, kernel: Callable[..., Any] | None) -> None:
        entry = _Entry(task, site, role, kernel)
        self.entries.append(entry)
        if site["kind"] == "module":
            self.by_module.setdefault(site["module"], []).append(entry)
        else:
            self.by_site[site["key"]] = entry

    def install(self) -> Plugged:
        for path in self.by_module:
            module = _lookup(self.model, path)
            original = module.forward
            self._forwards[path] = (module, module.__dict__.get("forward"))
            module.forward = self._module_forward(path, original)
        if self.by_site:
            watch = {(key.split("|")[0], key.split("|")[1]) for key in self.by_site}
            self.tracker = Tracker(self.model, on_function=self._function, watch=watch).install()
        return self

    def unplug(self) -> None:
        """The model as it was: its modules' own forwards, no hooks."""
        for module, previous in self._forwards.values():
            if previous is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = previous
        self._forwards = {}
        if self.tracker is not None:
            self.tracker.remove()
            self.tracker = None

    def counts(self) -> dict[str, dict[str, int]]:
        """Per task: the calls its kernel answered (hits) and those that ran the original (fallbacks)."""
        out: dict[str, dict[str, int]] = {}
        for e in self.entries:
            c = out.setdefault(e.task, {"hits": 0, "fallbacks": 0})
            if e.role == "kernel":
                c["hits"] += e.hits
                c["fallbacks"] += e.fallbacks
        return out


def plug(
    model: torch.nn.Module,
    plan: list[dict],
    kernels: dict[str, Callable[[], torch.nn.Module]],
    device: torch.device | str | None = None,
) -> Plugged:
    """Put each planned task's kernel in place of its sites on `model` (in place; `unplug()` undoes it).

    `plan`: one entry per task, {"task": id, "sites": [...]} as ksearch writes it; `kernels`: task id -> a function
    building that task's `ModelNew` (one instance per site, each sharing that site's weights). Tasks without a
    kernel are left as they are."""
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else "cpu"
    out = Plugged(model)
    for task in plan:
        make = kernels.get(task["task"])
        if make is None:
            continue
        for site in task["sites"]:
            kernel = make().to(device).eval()
            share_weights(kernel, {k: list(v) for k, v in site["weights"].items()}, model)
            runner = _no_grad(kernel)
            out.add(task["task"], site["entry"], "kernel", runner)
            if site.get("follower") is not None:
                out.add(task["task"], site["follower"], "follow", None)
    return out.install()


def _no_grad(kernel: torch.nn.Module) -> Callable[..., Any]:
    def run(*tensors: torch.Tensor) -> Any:
        with torch.no_grad():
            return kernel(*tensors)

    return run


def load_kernel(path: str, name: str) -> types.ModuleType:
    """A kernel file as a module (from its file: Triton reads its kernels' source)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the kernel file {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
