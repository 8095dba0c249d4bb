"""Identities of what the measurement and the reference rely on, so a candidate replacing one is caught.

A candidate runs in the worker's process: it could replace `torch.softmax` so that the reference
agrees with a wrong answer, slow down the op the eager baseline calls, or patch the timing functions.
The worker takes a fingerprint (the `id` of every function in the watched namespaces and in the
task's reference module) before candidate code runs and compares after each call into it; names
assembled at run time (`setattr(getattr(torch, "soft" + "max"), ...)`) are caught as well as plain
assignments. Cost: 4.9 ms per check for 3,312 functions on a 2-core CPU (`python bench/guard.py`).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
import types
from typing import Any

import torch

# The timing and checking code's own functions (also covered by the namespaces below, named here
# so that a report says exactly what was replaced).
_HARNESS = {
    "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
    "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
    "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
    "time.perf_counter": lambda: time.perf_counter,
    "torch.manual_seed": lambda: torch.manual_seed,
}
# Namespaces whose functions references and the harness call.
_NAMESPACES = {
    "torch": lambda: torch,
    "torch.Tensor": lambda: torch.Tensor,
    "torch._C.TensorBase": lambda: torch._C.TensorBase,
    "torch._C._VariableFunctions": lambda: torch._C._VariableFunctions,
    "torch._C._nn": lambda: torch._C._nn,
    "torch.nn.functional": lambda: torch.nn.functional,
    "torch.nn.Module": lambda: torch.nn.Module,
    "torch.linalg": lambda: torch.linalg,
    "torch.special": lambda: torch.special,
    "torch.fft": lambda: torch.fft,
}


# What torch._dynamo replaces when it is first imported or used (by the harness's torch.compile baseline or by a
# candidate's own torch.compile): name -> (module, the function that builds the replacement, the replacement's
# code name, its closure variable holding the function it wraps). Such a replacement is torch's, not a candidate's,
# when it is exactly that: that function's code, that module's globals, wrapping the function seen before.
_DYNAMO_WRAPS = {
    "torch.manual_seed": ("torch._compile", "_disable_dynamo", "inner", "fn"),
    "torch.nn.Module.__init__": (
        "torch._dynamo.mutation_guard",
        "install_generation_tagging_init",
        "patched_init",
        "init",
    ),
    "torch.nn.Module.__setstate__": (
        "torch._dynamo.mutation_guard",
        "install_generation_tagging_init",
        "patched_setstate",
        "setstate",
    ),
}


def prepare() -> None:
    """Import torch._dynamo and let it install its module hooks now (bench/guard.py times the check so). Workers do
    not: dynamo's own replacements, made whenever it is first used, are told from a candidate's (`_dynamo_wrap`),
    so a worker need not pay the second it costs to import."""
    importlib.import_module("torch._dynamo")
    mutation_guard = importlib.import_module("torch._dynamo.mutation_guard")
    install = getattr(mutation_guard, "install_generation_tagging_init", None)
    if install is not None:
        install()


def _dynamo_wrap(name: str, original_id: int) -> bool:
    """Is what `name` holds now torch._dynamo's own wrapper around the function it held (id `original_id`)?"""
    spec = _DYNAMO_WRAPS.get(name)
    if spec is None:
        return False
    module, maker_name, inner, cell = spec
    ns_name, attr = name.rsplit(".", 1)
    get = _NAMESPACES.get(ns_name)
    mod = sys.modules.get(module)
    maker = getattr(mod, maker_name, None) if mod is not None else None
    if get is None or not isinstance(maker, types.FunctionType):
        return False
    try:
        obj = inspect.getattr_static(get(), attr)
    except AttributeError:
        return False
    if not isinstance(obj, types.FunctionType) or obj.__globals__ is not maker.__globals__:
        return False
    code = obj.__code__
    if code.co_name != inner or not any(c is code for c in maker.__code__.co_consts):
        return False
    try:
        held = obj.__closure__[code.co_freevars.index(cell)].cell_contents  # type: ignore[index]
    except (TypeError, ValueError, IndexError):
        return False
    return id(held) == original_id


def _functions(prefix: str, ns: Any) -> dict[str, int]:
    if isinstance(ns, type):
        # what a lookup finds, base classes included: assigning Tensor.sum adds a name to Tensor's own
        # dict that shadows TensorBase.sum, a change only the resolved attribute shows
        members = {}
        for k in dir(ns):
            try:
                members[k] = inspect.getattr_static(ns, k)
            except AttributeError:
                continue
    else:
        try:
            members = dict(vars(ns))
        except TypeError:  # no __dict__: nothing assignable to watch
            return {}
    return {
        f"{prefix}.{k}": id(v)
        for k, v in members.items()
        if callable(v) or isinstance(v, (staticmethod, classmethod, property)) or _is_descriptor(v)
    }


def _is_descriptor(v: Any) -> bool:
    return hasattr(type(v), "__get__") and not isinstance(v, (str, bytes, int, float, type(None)))


def fingerprint(reference: types.ModuleType | None = None) -> dict[str, int]:
    """name -> id of every watched function (and of the reference module's functions and methods)."""
    out = {name: id(get()) for name, get in _HARNESS.items()}
    for prefix, get in _NAMESPACES.items():
        out.update(_functions(prefix, get()))
    if reference is not None:
        for name, obj in list(vars(reference).items()):
            if isinstance(obj, type):
                out.update(_functions(f"task.{name}", obj))
            elif callable(obj):
                out[f"task.{name}"] = id(obj)
    return out


def replaced(before: dict[str, int], now: dict[str, int]) -> list[str]:
    """Names whose function changed or disappeared (new names are allowed: lazy imports add them; torch._dynamo's
    own wrappers, installed on its first use, are not a change)."""
    return [k for k, v in before.items() if now.get(k) != v and not _dynamo_change(k, before, now)]


def _dynamo_change(name: str, before: dict[str, int], now: dict[str, int]) -> bool:
    """A change that is torch._dynamo's own: its wrapper where the function was, or, for a subclass of nn.Module
    that inherits __init__ / __setstate__ (a task's Model), the wrapper it now inherits."""
    if _dynamo_wrap(name, before[name]):
        return True
    attr = name.rsplit(".", 1)[-1]
    base = f"torch.nn.Module.{attr}"
    if base == name or base not in _DYNAMO_WRAPS:
        return False
    inherited = before[name] == before.get(base) and now.get(name) == now.get(base)
    return inherited and _dynamo_wrap(base, before[base])
