"""An item of a model (one operator, or a fused pair) written as a KernelBench-format task file (imports torch).

The file defines `Model`, `get_inputs()` and `get_init_inputs()` and nothing of ksearch's, so every tool that reads a
KernelBench problem reads it. Its inputs have the shapes, dtypes and layouts the model's forward passed (a transposed
operand stays transposed), drawn at random (integers in the range the model passed, masks of the same pattern); its
module is built again from the constructor arguments the model used, with fresh weights of the same shapes and
dtypes (plug-back gives a kernel the model's own weights). Sizes above gpu/tasks/shrink.py's KEEP are module-level
constants, equal sizes one constant, so that a smaller smoke workload is made from them as for any KernelBench file;
those the constructor uses are `Model.__init__`'s arguments, which `get_init_inputs()` returns (reading the constants
when called), so a candidate built as KernelBench builds one, `ModelNew(*get_init_inputs())`, gets the sizes the
reference gets, shrunk or not.
A module class of the model's own file is copied in, with the names it uses from that file; torch's are named.

A site that cannot be written (a constructor argument that is not plain data, a function without a public name,
an in-place call) raises Unwritable with the reason, shown in the ranking.
"""

from __future__ import annotations

import builtins
import inspect
import math
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ksearch.gpu.model.capture import Item, Site, Slot, literal_attrs
from ksearch.gpu.model.load import Loaded
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks.shrink import KEEP

RESERVED = frozenset({"Model", "get_inputs", "get_init_inputs", "torch", "nn"})
OPERATORS = {
    "__add__": "+",
    "__sub__": "-",
    "__mul__": "*",
    "__truediv__": "/",
    "__matmul__": "@",
    "__pow__": "**",
    "__floordiv__": "//",
    "__mod__": "%",
}
_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch.nn.functional", torch.nn.functional),
    ("torch", torch),
    ("torch.Tensor", torch.Tensor),
    ("torch.special", torch.special),
    ("torch.linalg", torch.linalg),
    ("torch.fft", torch.fft),
)


# Why an item cannot be written as a task file (a reason, shown in the ranking as "not written: ...")
Unwritable = TaskError


@dataclass
class Written:
    source: str
    weights: list[dict[str, list[str]]]  # per occurrence: task parameter name -> [module path, attribute]
    inputs: list[torch.Tensor]  # an occurrence's input copies, in forward order
    outputs: list[torch.Tensor]  # and its outputs, in the order the task's forward returns them
    occurrence: int = 0  # which occurrence they are of (its weights: weights[occurrence])


@dataclass
class _Source:
    consts: dict[int, str] = field(default_factory=dict)
    imports: list[str] = field(default_factory=list)
    prelude: list[str] = field(default_factory=list)
    copied: dict[str, str] = field(default_factory=dict)  # name -> what it is, for the copies made

    # ------------------------------------------------------------------------------------------ literals

    def size(self, v: int) -> str:
        if abs(v) <= KEEP:
            return str(v)
        if v not in self.consts:
            self.consts[v] = f"size_{len(self.consts)}"
        return self.consts[v]

    def lit(self, v: Any) -> str:
        if v is None or isinstance(v, bool | str):
            return repr(v)
        if isinstance(v, int):
            return self.size(v)
        if isinstance(v, float):
            if math.isnan(v):
                return "float('nan')"
            if math.isinf(v):
                return "float('inf')" if v > 0 else "float('-inf')"
            return repr(v)
        if isinstance(v, torch.Size | tuple):
            inner = ", ".join(self.lit(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, list):
            return "[" + ", ".join(self.lit(x) for x in v) + "]"
        if isinstance(v, torch.dtype):
            return str(v)
        if isinstance(v, slice):
            return f"slice({self.lit(v.start)}, {self.lit(v.stop)}, {self.lit(v.step)})"
        if v is Ellipsis:
            return "..."
        if isinstance(v, torch.device):
            raise Unwritable("a device argument (a task file leaves placement to its evaluator)")
        raise Unwritable(
            f"an argument of type {type(v).__qualname__}, which a task file cannot write as a value"
        )

    def dims(self, shape: Any) -> str:
        return self.lit(tuple(int(s) for s in shape))

    # ------------------------------------------------------------------------------------------ inputs

    def tensor(self, t: torch.Tensor) -> str:
        """An expression drawing a tensor like `t`: its shape, dtype and layout; values of its kind."""
        dt = str(t.dtype)
        order = list(range(t.dim()))
        if t.dim() >= 2 and not t.is_contiguous():
            strides = t.stride()
            perm = sorted(order, key=lambda d: (-strides[d], d))
            if t.permute(perm).is_contiguous():
                order = perm
        shape = [t.shape[d] for d in order]
        if t.is_floating_point() or t.is_complex():
            base = f"torch.randn({self.dims(shape)}, dtype={dt})"
        elif t.dtype == torch.bool:
            base = self._mask(t, shape)
        else:
            lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 0)
            base = f"torch.randint({self.lit(lo)}, {self.lit(hi + 1)}, {self.dims(shape)}, dtype={dt})"
        if order != list(range(t.dim())):
            inverse = [order.index(d) for d in range(t.dim())]
            base += f".permute({', '.join(map(str, inverse))})"
        return base

    def _mask(self, t: torch.Tensor, shape: list[int]) -> str:
        dims = self.dims(shape)
        if t.numel() == 0 or bool(t.all()):
            return f"torch.ones({dims}, dtype=torch.bool)"
        if not bool(t.any()):
            return f"torch.zeros({dims}, dtype=torch.bool)"
        if t.dim() >= 2 and t.is_contiguous():
            ones = torch.ones_like(t)
            for name in ("tril", "triu"):
                for diag in (0, 1, -1):
                    if torch.equal(t, getattr(torch, name)(ones, diag)):
                        return f"torch.ones({dims}, dtype=torch.bool).{name}({diag})"
        p = float(t.float().mean())
        return f"(torch.rand({dims}) < {p:.4g})"

    # ------------------------------------------------------------------------------------------ classes

    def cls(self, c: type) -> str:
        """An expression naming class `c` in the task file (torch's by name; the model file's copied in)."""
        name = c.__name__
        if getattr(torch.nn, name, None) is c:
            return f"torch.nn.{name}"
        mod = c.__module__
        if mod == "torch" or mod.startswith("torch."):
            if "." not in c.__qualname__:
                self._import(f"import {mod}")
                return f"{mod}.{c.__qualname__}"
            raise Unwritable(f"{c.__qualname__} is not importable by name")
        self._copy(name, c)
        return name

    def _import(self, line: str) -> None:
        if line not in self.imports and line not in ("import torch", "import torch.nn as nn"):
            self.imports.append(line)

    def _copy(self, name: str, obj: Any) -> None:
        """Copy a class or function of the model's own code into the file, with what it uses (post order)."""
        if name in self.copied:
            return
        if name in RESERVED or name.startswith("size_"):
            raise Unwritable(f"the model's {name} shares a name the task file needs for its own")
        try:
            src = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            mod = obj.__module__
            if mod in sys.modules and not mod.startswith("_ksearch_model_") and "." not in obj.__qualname__:
                self._import(
                    f"from {mod} import {obj.__qualname__}"
                    + (f" as {name}" if name != obj.__qualname__ else "")
                )
                self.copied[name] = "import"
                return
            raise Unwritable(f"the source of {obj.__qualname__} cannot be read (defined in {mod})") from None
        if "." in obj.__qualname__ and "<locals>" in obj.__qualname__:
            raise Unwritable(
                f"{obj.__qualname__} is defined inside a function; a task file copies top-level code"
            )
        self.copied[name] = "copying"  # a cycle stops here
        module = sys.modules.get(obj.__module__)
        for used in _names(src):
            self._dependency(used, module)
        self.prelude.append(src.rstrip() + "\n")
        self.copied[name] = "copied"

    def _dependency(self, name: str, module: types.ModuleType | None) -> None:
        if module is None or name in self.copied or name in RESERVED:
            return
        g = vars(module)
        if name not in g:
            return  # a local or a builtin
        obj = g[name]
        if name in vars(builtins) and obj is vars(builtins)[name]:
            return
        if isinstance(obj, types.ModuleType):
            self._import(
                f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
            )
            self.copied[name] = "import"
        elif (
            isinstance(obj, type | types.FunctionType) and getattr(obj, "__module__", None) == module.__name__
        ):
            self._copy(name, obj)
        elif isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
            mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
            if not mod or "." in qual or mod.startswith("_ksearch_model_"):
                raise Unwritable(f"it uses {name}, which a task file cannot import")
            self._import(f"from {mod} import {qual}" + (f" as {name}" if name != qual else ""))
            self.copied[name] = "import"
        elif (
            obj is None
            or isinstance(obj, bool | int | float | str)
            or (isinstance(obj, tuple) and all(isinstance(x, bool | int | float | str) for x in obj))
        ):
            self.prelude.append(f"{name} = {obj!r}\n")
            self.copied[name] = "value"
        elif isinstance(obj, torch.dtype):
            self.prelude.append(f"{name} = {obj}\n")
            self.copied[name] = "value"
        else:
            raise Unwritable(
                f"it uses {name}, a {type(obj).__qualname__} of the model's file, which a task file cannot hold"
            )

    # ------------------------------------------------------------------------------------------ modules

    def construct(self, m: torch.nn.Module, loaded: Loaded) -> list[str]:
        """Lines after `x = ` building module `m` again: its class called with the arguments the model used, then
        cast and configured as the model's is."""
        ctor = loaded.ctor_of(m)
        if ctor is None:
            raise Unwritable(
                f"{type(m).__name__}'s constructor arguments were not seen (built outside the model's constructor)"
            )
        cls = type(m)
        pos: list[Any] = []
        kw: dict[str, Any] = {}
        for name, v in ctor.args.items():
            if name == ctor.varargs:
                pos.extend(v)
            elif name == ctor.varkw:
                kw.update(v)
            elif name == "device":
                continue
            elif ctor.varargs:
                pos.append(v)
            else:
                kw[name] = v
        try:
            with torch.device("meta"):
                again = cls(*pos, **kw)
        except Exception as e:
            raise Unwritable(
                f"building {cls.__name__} again from its arguments raised {type(e).__name__}: {e}"
            ) from None
        expr = (
            f"{self.cls(cls)}("
            + ", ".join([*(self.lit(v) for v in pos), *(f"{k}={self.lit(v)}" for k, v in kw.items())])
            + ")"
        )
        mine = dict([*m.named_parameters(), *m.named_buffers()])
        theirs = dict([*again.named_parameters(), *again.named_buffers()])
        if set(mine) != set(theirs) or any(tuple(mine[k].shape) != tuple(theirs[k].shape) for k in mine):
            raise Unwritable(
                f"building {cls.__name__} again from its arguments gives other tensors "
                f"({_tensors(theirs)}) than the model's ({_tensors(mine)})"
            )
        dtypes = {t.dtype for t in mine.values() if t.is_floating_point()}
        if dtypes and any(t.dtype != theirs[k].dtype for k, t in mine.items() if t.is_floating_point()):
            if len(dtypes) > 1:
                raise Unwritable(f"its tensors have several dtypes ({', '.join(sorted(map(str, dtypes)))})")
            expr += f".to({dtypes.pop()})"
        lines = [expr]
        wanted, got = literal_attrs(m), literal_attrs(again)
        for k, v in wanted.items():
            if got.get(k) != v:
                if isinstance(v, str) and v.startswith("<"):
                    raise Unwritable(f"its attribute {k} is a {v[1:-1]} set after construction")
                lines.append(f".{k} = {self.lit(getattr(m, k))}")
        return lines

    # ------------------------------------------------------------------------------------------ calls

    def call(self, target: str, site: Site, names: Iterator[str], method: bool = False) -> str:
        """`target(args)` as the site was called, each tensor argument the next of `names`."""
        args, kwargs = site.call
        slots: dict[int, str] = {}

        def walk(v: Any) -> str:
            if isinstance(v, Slot):
                if v.i not in slots:
                    slots[v.i] = next(names)
                return slots[v.i]
            if isinstance(v, tuple):
                inner = ", ".join(walk(x) for x in v)
                return f"({inner},)" if len(v) == 1 else f"({inner})"
            if isinstance(v, list):
                return "[" + ", ".join(walk(x) for x in v) + "]"
            if isinstance(v, dict):
                raise Unwritable("a mapping argument")
            return self.lit(v)

        parts = [walk(a) for a in args] + [f"{k}={walk(v)}" for k, v in kwargs.items()]
        if method and parts:
            op = OPERATORS.get(target.rpartition(".")[2])
            rop = OPERATORS.get(target.rpartition(".")[2].replace("__r", "__", 1))
            if op and len(parts) == 2:
                return f"({parts[0]} {op} {parts[1]})"
            if rop and len(parts) == 2 and target.rpartition(".")[2].startswith("__r"):
                return f"({parts[1]} {rop} {parts[0]})"
            return f"{parts[0]}.{target.rpartition('.')[2]}({', '.join(parts[1:])})"
        return f"{target}({', '.join(parts)})"


def _tensors(d: dict[str, torch.Tensor]) -> str:
    return ", ".join(f"{k} {'x'.join(map(str, t.shape))}" for k, t in sorted(d.items())) or "none"


def _names(src: str) -> list[str]:
    import ast

    seen: list[str] = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name) and node.id not in seen:
            seen.append(node.id)
    return seen


def function_name(func: Any) -> tuple[str, bool]:
    """(expression, is a Tensor method) naming a torch function in a task file."""
    name = getattr(func, "__name__", None)
    if isinstance(name, str):
        for prefix, ns in _NAMESPACES:
            if getattr(ns, name, None) is func:
                return f"{prefix}.{name}", ns is torch.Tensor
    raise Unwritable(f"the function {getattr(func, '__qualname__', func)!r} has no public torch name")


def _part(src: _Source, site: Site, role: str, names: Iterator[str], loaded: Loaded, init: list[str]) -> str:
    """The call expression of one site in the task's forward (a module becomes `self.ROLE`)."""
    if site.kind == "module":
        assert site.module is not None
        lines = src.construct(site.module, loaded)
        init.append(f"        self.{role} = {lines[0]}")
        init += [f"        self.{role}{extra}" for extra in lines[1:]]
        return src.call(f"self.{role}", site, names)
    if site.inplace():
        raise Unwritable(f"{site.short} changes its input in place")
    target, method = function_name(site.func)
    return src.call(target, site, names, method=method)


def _then(first: str, names: Iterator[str]) -> Iterator[str]:
    """Names for a follower's tensors: its first is the entry's result, the rest new inputs."""
    yield first
    yield from names


def _weights(site: Site, role: str) -> dict[str, list[str]]:
    if site.kind != "module" or site.module is None:
        return {}
    m = site.module
    return {f"{role}.{n}": [site.path, n] for n, _ in [*m.named_parameters(), *m.named_buffers()]}


ROLES = {"module": ("op",), "function": ("op",), "linear_act": ("linear", "act"), "add_norm": ("add", "norm")}


def write_item(item: Item, loaded: Loaded, title: str, doc: str) -> Written:
    """The task file of an item (raises Unwritable with the reason)."""
    kept = [
        i
        for i, occ in enumerate(item.occurrences)
        if all(s.inputs is not None and s.outputs is not None for s in occ)
    ]
    if not kept:
        raise Unwritable("its tensors were not kept (over the memory kept for checks)")
    first = item.occurrences[kept[0]]
    if not first[0].specs:
        raise Unwritable("it takes no tensor")
    if any(not s.out_specs for s in first):
        raise Unwritable("it returns no tensor")
    src = _Source()
    counter = iter(f"x{i}" for i in range(1000))
    init: list[str] = []
    roles = ROLES[item.kind]
    body: list[str]
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    entry = first[0]
    assert entry.inputs is not None and entry.outputs is not None
    if item.kind in ("module", "function"):
        body = [f"        return {_part(src, entry, roles[0], counter, loaded, init)}"]
        inputs, outputs = list(entry.inputs), list(entry.outputs)
    else:
        follower = first[1]
        assert follower.inputs is not None and follower.outputs is not None
        inner = _part(src, entry, roles[0], counter, loaded, init)
        if item.kind == "linear_act":
            outer = _part(src, follower, roles[1], _then(inner, counter), loaded, init)
            body = [f"        return {outer}"]
            inputs, outputs = list(entry.inputs), list(follower.outputs)
        else:
            outer = _part(src, follower, roles[1], _then("h", counter), loaded, init)
            body = [f"        h = {inner}", f"        return {outer}, h"]
            inputs = list(entry.inputs) + list(follower.inputs[1:])
            outputs = list(follower.outputs) + list(entry.outputs)
    # the constructor's sizes are its init inputs, as a KernelBench problem's are: each constant the constructor uses
    # becomes an argument of the same name (its lines stay as written) that get_init_inputs() passes
    used = set(re.findall(r"\bsize_\d+\b", "\n".join(init)))
    ctor_args = [name for name in src.consts.values() if name in used]
    n_inputs = len(inputs)
    draws = [src.tensor(t) for t in inputs]
    args = ", ".join(f"x{i}" for i in range(n_inputs))
    lines = ['"""' + title, "", *textwrap.wrap(doc, 110), '"""', "", "import torch", "import torch.nn as nn"]
    lines += src.imports
    lines.append("")
    for v, name in src.consts.items():
        lines.append(f"{name} = {v}")
    if src.prelude:
        lines += ["", "", *("\n".join(src.prelude).rstrip().splitlines())]
    lines += [
        "",
        "",
        "class Model(nn.Module):",
        f'    """{title}"""',
        "",
        f"    def __init__(self{''.join(', ' + a for a in ctor_args)}):",
        "        super().__init__()",
        *init,
        "",
        f"    def forward(self{', ' if args else ''}{args}):",
        *body,
        "",
        "",
        "def get_inputs():",
        "    return [",
        *(f"        {d}," for d in draws),
        "    ]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{', '.join(ctor_args)}]",
        "",
    ]
    weights = []
    for occ in item.occurrences:
        w: dict[str, list[str]] = {}
        for site, role in zip(occ, roles, strict=False):
            w.update(_weights(site, role))
        weights.append(w)
    return Written(
        source="\n".join(lines), weights=weights, inputs=inputs, outputs=outputs, occurrence=kept[0]
    )
