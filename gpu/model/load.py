"""A whole model from its file or import path, built as `ksearch model` profiles it (imports torch).

Accepted references:

- `FILE.py`: a module defining `class Model(torch.nn.Module)`, `get_inputs()` and `get_init_inputs()`, as a
  KernelBench problem does (`get_init_inputs` may be left out: no arguments);
- `FILE.py:Class`: another class of that file, with the file's `get_inputs` / `get_init_inputs`;
- `pkg.module:Class`: an importable class, with its module's `get_inputs` / `get_init_inputs`.

`inputs` / `init_inputs` (`FILE.py:fn` or `pkg.module:fn`) name other functions for them. The model is built after
`torch.manual_seed(seed)` on the CPU, in eval mode, then moved to the device (and cast to `dtype` where asked: its
floating-point parameters, buffers and inputs). While it is built, every module's constructor arguments are kept
(`ctor_args`), so a task file can build the same module again.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.model.report import is_file_ref, split_ref
from ksearch.gpu.task import TaskError

ACCEPTED = (
    "a .py file defining class Model(torch.nn.Module), get_inputs() and get_init_inputs() (KernelBench style), "
    "FILE.py:Class for another class of the file, or pkg.module:Class (an importable class whose module defines "
    "get_inputs and get_init_inputs, or name them with --inputs / --init-inputs MODULE:FUNCTION)"
)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


ModelError = TaskError  # the model cannot be loaded, built or run: what was wrong and what is accepted


@dataclass
class Ctor:
    """How a module was constructed: its class's __init__ arguments as bound at the call."""

    args: dict[str, Any]
    varargs: str | None = None
    varkw: str | None = None


@dataclass
class Loaded:
    ref: str
    model: torch.nn.Module
    make_inputs: Callable[[int], list[Any]]
    init_inputs: list[Any]
    device: torch.device
    dtype: torch.dtype | None
    source_path: Path | None
    module: types.ModuleType
    ctor: dict[int, Ctor] = field(default_factory=dict)  # id(module) -> its constructor call

    def ctor_of(self, m: torch.nn.Module) -> Ctor | None:
        return self.ctor.get(id(m))


def _where(exc: BaseException, path: Path | None) -> str:
    """' (FILE, line N)' for the deepest frame of `exc` in `path`."""
    if path is None:
        return ""
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            line = fr.lineno
    return f" ({path.name}, line {line})" if line else ""


def _import_file(path: Path) -> types.ModuleType:
    if not path.is_file():
        raise ModelError(f"no such model file: {path}; give {ACCEPTED}")
    if path.suffix != ".py":
        raise ModelError(f"{path}: not a Python file; give {ACCEPTED}")
    name = f"_ksearch_model_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"{path}: cannot be imported; give {ACCEPTED}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # inspect.getsource finds its classes through it
    sys.path.insert(0, str(path.resolve().parent))  # its sibling modules import as they would beside it
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise ModelError(f"{path}: line {e.lineno}: syntax error: {e.msg}") from None
    except BaseException as e:
        raise ModelError(
            f"{path} raised while being imported: {type(e).__name__}: {e}{_where(e, path)}; a model file must "
            "import cleanly (it is run as a module)"
        ) from None
    return mod


def _import_name(name: str, what: str) -> types.ModuleType:
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise ModelError(f"{what}: no module {e.name!r} to import; give {ACCEPTED}") from None
    except BaseException as e:
        raise ModelError(f"{what}: importing {name} raised {type(e).__name__}: {e}") from None


def _module_of(head: str, what: str) -> tuple[types.ModuleType, Path | None]:
    if is_file_ref(head):
        path = Path(head).expanduser()
        return _import_file(path), path.resolve()
    if not all(p.isidentifier() for p in head.split(".")):
        raise ModelError(f"{what}: {head!r} is neither a .py file nor a module name; give {ACCEPTED}")
    mod = _import_name(head, what)
    file = getattr(mod, "__file__", None)
    return mod, Path(file).resolve() if file else None


def _function(ref: str, what: str) -> Callable[[], Any]:
    head, attr = split_ref(ref)
    if attr is None:
        raise ModelError(
            f"{what} {ref!r}: give MODULE:FUNCTION (FILE.py:get_inputs or pkg.module:make_inputs)"
        )
    mod, _ = _module_of(head, what)
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ModelError(f"{what} {ref!r}: {head} defines no function {attr!r}")
    return fn


class _CtorWatch:
    """Keeps every module's constructor arguments while a model is built (a profile function on __init__ calls:
    the first __init__ called on a new module is its class's own, with the arguments as bound)."""

    def __init__(self) -> None:
        self.found: dict[int, tuple[weakref.ref, Ctor]] = {}

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name != "__init__":
            return
        self_ = frame.f_locals.get("self")
        if not isinstance(self_, torch.nn.Module):
            return
        key = id(self_)
        old = self.found.get(key)
        if old is not None and old[0]() is self_:
            return
        co = frame.f_code
        n = co.co_argcount + co.co_kwonlyargcount
        names = list(co.co_varnames[:n])
        varargs = co.co_varnames[n] if co.co_flags & 0x04 else None
        varkw = co.co_varnames[n + (1 if varargs else 0)] if co.co_flags & 0x08 else None
        loc = frame.f_locals
        args = {k: loc[k] for k in names[1:] if k in loc}
        if varargs:
            args[varargs] = loc.get(varargs, ())
        if varkw:
            args[varkw] = loc.get(varkw, {})
        self.found[key] = (weakref.ref(self_), Ctor(args=args, varargs=varargs, varkw=varkw))

    def kept(self, model: torch.nn.Module) -> dict[int, Ctor]:
        live = {id(m) for m in model.modules()}
        return {k: c for k, (r, c) in self.found.items() if k in live and r() is not None}


def _cast(x: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.to(dtype) if dtype is not None and x.is_floating_point() else x
    if isinstance(x, list | tuple):
        return type(x)(_cast(v, device, dtype) for v in x)
    return x


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("--device cuda: this machine has no GPU torch can use; give --device cpu or auto")
    return torch.device(device)


def load_model(
    ref: str,
    *,
    inputs: str | None = None,
    init_inputs: str | None = None,
    device: str = "auto",
    dtype: str | None = None,
    seed: int = 0,
) -> Loaded:
    """The model built and on its device, with a function drawing its inputs (a seed per draw); ModelError says
    what is wrong with the reference, the file or the model, and what is accepted."""
    head, attr = split_ref(ref)
    mod, path = _module_of(head, ref)
    name = attr or "Model"
    cls = getattr(mod, name, None)
    if cls is None:
        where = path.name if path is not None else head
        raise ModelError(
            f"{where} defines no `{name}`"
            + ("" if attr else f"; give {ACCEPTED}")
            + (f" (its classes: {', '.join(_classes(mod))})" if _classes(mod) else "")
        )
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ModelError(
            f"{ref}: `{name}` is a {type(cls).__name__}, not a torch.nn.Module class; give {ACCEPTED}"
        )
    get_inputs = _function(inputs, "--inputs") if inputs else getattr(mod, "get_inputs", None)
    if not callable(get_inputs):
        raise ModelError(
            f"{ref}: no get_inputs(): it returns the list of the model's forward inputs (or give --inputs "
            "MODULE:FUNCTION)"
        )
    get_init = (
        _function(init_inputs, "--init-inputs") if init_inputs else getattr(mod, "get_init_inputs", None)
    )
    torch_dtype = None
    if dtype is not None:
        if dtype not in DTYPES:
            raise ModelError(f"unknown dtype {dtype!r}; accepted: {', '.join(DTYPES)}")
        torch_dtype = DTYPES[dtype]
    dev = pick_device(device)
    try:
        torch.manual_seed(seed)
        init = list(get_init()) if callable(get_init) else []
    except Exception as e:
        raise ModelError(
            f"{ref}: get_init_inputs() raised {type(e).__name__}: {e}{_where(e, path)}"
        ) from None
    watch = _CtorWatch()
    old = sys.getprofile()
    try:
        torch.manual_seed(seed)
        sys.setprofile(watch)
        try:
            with torch.device("cpu"):
                model = cls(*init)
        finally:
            sys.setprofile(old)
    except Exception as e:
        raise ModelError(
            f"{ref}: building {name}(*get_init_inputs()) raised {type(e).__name__}: {e}{_where(e, path)}"
        ) from None
    model = model.eval().to(dev)
    if torch_dtype is not None:
        model = model.to(torch_dtype)

    def make_inputs(draw_seed: int) -> list[Any]:
        torch.manual_seed(draw_seed)
        try:
            with torch.device("cpu"):
                got = get_inputs()
        except Exception as e:
            raise ModelError(f"{ref}: get_inputs() raised {type(e).__name__}: {e}{_where(e, path)}") from None
        if not isinstance(got, list | tuple):
            raise ModelError(
                f"{ref}: get_inputs() returned a {type(got).__name__}; it returns a list of inputs"
            )
        return [_cast(x, dev, torch_dtype) for x in got]

    return Loaded(
        ref=ref,
        model=model,
        make_inputs=make_inputs,
        init_inputs=init,
        device=dev,
        dtype=torch_dtype,
        source_path=path,
        module=mod,
        ctor=watch.kept(model),
    )


def _classes(mod: types.ModuleType) -> list[str]:
    return sorted(
        n
        for n, v in vars(mod).items()
        if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == mod.__name__
    )


def run_forward(loaded: Loaded, inputs: list[Any]) -> Any:
    """The model's output on `inputs` (no grad), or ModelError naming what its forward raised."""
    try:
        with torch.no_grad():
            return loaded.model(*inputs)
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(
            f"{loaded.ref}: the model's forward raised {type(e).__name__}: {e}{_where(e, loaded.source_path)}"
        ) from None
