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


def prepare() -> None:
    """Import what the torch.compile baseline imports and let dynamo install its module hooks now:
    dynamo replaces torch.manual_seed and nn.Module.__init__ on first use, which must not read as a
    candidate's doing."""
    importlib.import_module("torch._dynamo")
    mutation_guard = importlib.import_module("torch._dynamo.mutation_guard")
    install = getattr(mutation_guard, "install_generation_tagging_init", None)
    if install is not None:
        install()


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
    """Names whose function changed or disappeared (new names are allowed: lazy imports add them)."""
    return [k for k, v in before.items() if now.get(k) != v]
