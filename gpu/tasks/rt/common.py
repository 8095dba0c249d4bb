"""Helpers shared by the task runtimes (imports torch: workers and tests only)."""

from __future__ import annotations

import hashlib
import inspect
import linecache
import random
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ksearch.gpu import former_names
from ksearch.worldmodel.errors import KsearchError

# Reference `Model` and candidate `ModelNew` are both built right after torch.manual_seed(INIT_SEED),
# so parameters created in the same order get the same values.
INIT_SEED = 42


class CandidateError(ValueError, KsearchError):
    """The candidate module lacks what the task needs (e.g. no ModelNew), said in words a model can act on."""


def exec_module(source: str, name: str, filename: Path) -> types.ModuleType:
    """Run `source` as module `name` whose code points at `filename` (for tracebacks and Triton).

    Compiled here rather than through the import system: a bytecode cache keyed by mtime and size
    could hand back a previous candidate of the same length written within the same second.
    """
    linecache.cache.pop(str(filename), None)
    return exec_code(compile(source, str(filename), "exec"), name, filename)


def exec_code(code: types.CodeType, name: str, filename: Path) -> types.ModuleType:
    """Run compiled module code as module `name` (registered in sys.modules while it lives)."""
    # user code (a candidate, a task's reference) written before the `ksearch` package imports it as `gpu`
    former_names.install()
    module = types.ModuleType(name)
    module.__file__ = str(filename)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_file_module(path: Path, name: str | None = None) -> types.ModuleType:
    path = path.resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    mod_name = name or f"_ksearch_{module_name(path.stem)}_{digest}"
    return exec_module(path.read_text(), mod_name, path)


def module_name(name: str) -> str:
    safe = re.sub(r"\W", "_", name) or "candidate"
    return f"_{safe}" if safe[0].isdigit() else safe


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def call_with_params(fn: Callable[..., Any], params: dict[str, Any], where: str) -> Any:
    """Call fn with the params its signature names (all of them if it takes **kwargs)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(**params)
    ps = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps):
        return fn(**params)
    names = {
        p.name
        for p in ps
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    missing = [
        p.name for p in ps if p.default is inspect.Parameter.empty and p.name not in params
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]  # fmt: skip
    if missing:
        raise TypeError(f"{where} needs parameter(s) {', '.join(missing)} that the workload does not give")
    return fn(**{k: v for k, v in params.items() if k in names})


def to_device(value: Any, device: str | torch.device) -> Any:
    """Move every tensor inside lists/tuples/dicts to `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return (
            type(value)(*(to_device(v, device) for v in value))
            if hasattr(value, "_fields")
            else tuple(to_device(v, device) for v in value)
        )
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def clone_data(value: Any) -> Any:
    """A deep copy of the tensors inside a (nested) input structure."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [clone_data(v) for v in value]
    if isinstance(value, tuple):
        return (
            type(value)(*(clone_data(v) for v in value))
            if hasattr(value, "_fields")
            else tuple(clone_data(v) for v in value)
        )
    if isinstance(value, dict):
        return {k: clone_data(v) for k, v in value.items()}
    return value


def as_result(value: Any) -> Any:
    """Outputs as the contract has them: a tensor, or a tuple of tensors (lists become tuples)."""
    if isinstance(value, list):
        return tuple(value)
    return value
