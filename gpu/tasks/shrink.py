"""Smaller sizes for a smoke workload: the integers a KernelBench file builds its inputs from, scaled down.

KernelBench files size their inputs with module-level constants (`batch_size = 16; dim = 16384`),
with integer literals written where the inputs are made (`return [torch.randn(128, 4096, 4096)]`
in `get_inputs`; `return [4096, 1024]` in `get_init_inputs`, whose values size the weights) or,
in ksearch's own format, with workload parameters and the defaults of `get_inputs(M=4096, ...)`.
A file that declares no smoke workload gets one made by dividing those integers by a common
factor (the search for the factor, and the check that the reference still runs, happen in
gpu/tasks/rt/smoke.py). A literal is a knob named by where it stands (`get_inputs:12:25`, its line
and column), replaced in a copy of the file as a constant is. Pure data and `ast`: importing this
needs no torch.

What is kept: values at or below KEEP (kernel sizes, strides, small channel and head counts, a
`dim = -1`) and every other non-integer; the order of the values (a <= b stays so); equal values
stay equal; and a value that another one divided stays divisible by what that one became, so
`embed_dim % num_heads == 0` survives. Constants computed from others (`hidden = dim * 4`) are not
knobs: the file recomputes them from the smaller values when it runs.
"""

from __future__ import annotations

import ast
import math
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks.literals import NotLiteral, const_eval

KEEP = 8  # values at or below this are structural (kernel size, stride, heads): never changed
# Knobs this small need no shrinking (and no subprocess to find that out): each at most SMALL_KNOB,
# their product at most SMALL_PRODUCT
SMALL_KNOB = 1024
SMALL_PRODUCT = 1 << 16
FACTORS: tuple[int, ...] = tuple(2**i for i in range(15))  # 1, 2, 4, ... 16384
RESERVED = frozenset({"WORKLOADS", "TOLERANCE", "META", "COST", "TUNABLES"})

IntOrInts = int | list[int]


class SizeKnobs(BaseModel):
    """The integers a workload's sizes come from: module constants and workload parameters."""

    model_config = ConfigDict(extra="forbid")

    constants: dict[str, IntOrInts] = Field(default_factory=dict)
    params: dict[str, IntOrInts] = Field(default_factory=dict)

    def empty(self) -> bool:
        return not self.constants and not self.params

    def changes(self, smaller: SizeKnobs) -> list[str]:
        """'name 16384->256' for each knob `smaller` changes ('get_inputs line 12 4096->256' for a literal,
        said once for a line's equal literals)."""
        out: list[str] = []
        for kind in ("constants", "params"):
            old, new = getattr(self, kind), getattr(smaller, kind)
            for k, v in new.items():
                line = f"{_label(k)} {_fmt(old[k])}->{_fmt(v)}"
                if v != old.get(k) and line not in out:
                    out.append(line)
        return out

    def values(self) -> list[int]:
        out: list[int] = []
        for v in [*self.constants.values(), *self.params.values()]:
            out += v if isinstance(v, list) else [v]
        return out

    def worth_shrinking(self) -> bool:
        """False when there is nothing to shrink, or every size is already small (judged without running)."""
        sizes = [v for v in self.values() if v > 1]
        return bool(sizes) and (max(sizes) > SMALL_KNOB or math.prod(sizes) > SMALL_PRODUCT)


def _label(key: str) -> str:
    fn, _, where = key.partition(":")
    return f"{fn} line {where.split(':')[0]}" if where else key


def _fmt(v: IntOrInts) -> str:
    return "x".join(map(str, v)) if isinstance(v, list) else str(v)


def _int_literal(node: ast.expr) -> int | None:
    """An integer written with literals only (`16384`, `1024 * 2`, `2**14`, `-1`); None otherwise."""
    if any(isinstance(n, ast.Name) for n in ast.walk(node)):
        return None  # computed from another constant: the file recomputes it
    try:
        v = const_eval(node, {})
    except (NotLiteral, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _knob_value(node: ast.expr) -> IntOrInts | None:
    """An int literal, or a tuple/list of int literals (an `input_shape = (128, 4096)`)."""
    single = _int_literal(node)
    if single is not None:
        return single
    if isinstance(node, ast.Tuple | ast.List) and node.elts:
        items = [_int_literal(e) for e in node.elts]
        if all(i is not None for i in items):
            return [int(i) for i in items if i is not None]
    return None


Setter = Callable[[ast.expr], None]


def _literal_sites(tree: ast.Module) -> dict[str, tuple[IntOrInts, ast.expr, Setter]]:
    """Top-level `name = <int literal(s)>` (also `a, b = 16, 32`), each with a way to replace its value.

    Names assigned more than once at top level are left out: which value applies depends on flow.
    """
    sites: dict[str, tuple[IntOrInts, ast.expr, Setter]] = {}
    counts: dict[str, int] = {}
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    counts[node.id] = counts.get(node.id, 0) + 1
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None or not targets:
            continue
        value = stmt.value
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if len(names) == len(targets):  # `n = 16`, also `height = width = 256` (one value for both)
            v = _knob_value(value)
            if v is not None:
                for name in names:
                    sites[name] = (v, value, _stmt_setter(stmt))
        elif len(targets) == 1:
            target = targets[0]
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                if len(target.elts) == len(value.elts):
                    for i, (t, e) in enumerate(zip(target.elts, value.elts, strict=True)):
                        v = _knob_value(e)
                        if isinstance(t, ast.Name) and v is not None:
                            sites[t.id] = (v, e, _elt_setter(value, i))
    return {k: s for k, s in sites.items() if counts.get(k) == 1 and k not in RESERVED}


# Tensor factories whose arguments are sizes (torch's, and ksearch.gpu.inputs' helpers), and which of them:
# "all" (every positional argument, or one tuple/list of them), "first" (the first positional), "tuple" (a
# positional tuple/list only: randint's low and high are values, though a `high` equal to a size shrinks with it, see
# _literal_call_sites); a `size=` keyword in every case.
SIZED_CALLS: dict[str, str] = {
    "rand": "all", "randn": "all", "zeros": "all", "ones": "all", "empty": "all", "full": "first",
    "randint": "tuple", "randperm": "first", "normal": "size", "signed": "all", "mask": "all",
    "integers": "all", "random_tensor": "first",
}  # fmt: skip
LITERAL_FUNCTIONS = ("get_inputs", "get_init_inputs")


def literal_key(function: str, node: ast.expr) -> str:
    """The knob name of an integer literal inside a function: `get_inputs:12:25` (line, column)."""
    return f"{function}:{node.lineno}:{node.col_offset}"


def _arg_setter(call: ast.Call, i: int) -> Setter:
    def put(node: ast.expr) -> None:
        call.args[i] = node

    return put


def _keyword_setter(kw: ast.keyword) -> Setter:
    def put(node: ast.expr) -> None:
        kw.value = node

    return put


def _size_nodes(call: ast.Call) -> list[tuple[ast.expr, Setter]]:
    """The argument nodes of a tensor factory call that are sizes, each with a way to replace it."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    how = SIZED_CALLS.get(name)
    if how is None:
        return []
    out: list[tuple[ast.expr, Setter]] = []
    positional = [(i, a) for i, a in enumerate(call.args) if not isinstance(a, ast.Starred)]
    if how == "all":
        out += [(a, _arg_setter(call, i)) for i, a in positional]
    elif how == "first" and positional and positional[0][0] == 0:
        out.append((call.args[0], _arg_setter(call, 0)))
    elif how == "tuple":
        out += [(a, _arg_setter(call, i)) for i, a in positional if isinstance(a, ast.Tuple | ast.List)]
    out += [(kw.value, _keyword_setter(kw)) for kw in call.keywords if kw.arg == "size"]
    return out


def _literal_call_sites(tree: ast.Module) -> dict[str, tuple[IntOrInts, ast.expr, Setter]]:
    """Integer literals that size tensors where a file makes its inputs: the size arguments of tensor factory
    calls inside `get_inputs`, and the integers `get_init_inputs` returns (its Model's sizes)."""
    sites: dict[str, tuple[IntOrInts, ast.expr, Setter]] = {}

    def take(fn: str, node: ast.expr, put: Setter) -> None:
        if isinstance(node, ast.Tuple | ast.List):
            for i, e in enumerate(node.elts):
                take(fn, e, _elt_setter(node, i))
            return
        v = _int_literal(node)
        if v is not None and v >= 0:
            sites[literal_key(fn, node)] = (v, node, put)

    bounds: list[tuple[ast.expr, Setter]] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name not in LITERAL_FUNCTIONS:
            continue
        for node in ast.walk(stmt):
            if stmt.name == "get_inputs" and isinstance(node, ast.Call):
                for arg, put in _size_nodes(node):
                    take(stmt.name, arg, put)
                bounds += _index_bounds(node)
            elif stmt.name == "get_init_inputs" and isinstance(node, ast.Return):
                value = node.value
                if isinstance(value, ast.Tuple | ast.List):
                    for i, e in enumerate(value.elts):
                        if not isinstance(e, ast.Tuple | ast.List):  # a shape passed whole is not one size
                            take(stmt.name, e, _elt_setter(value, i))
    # A randint bound equal to a size (`randn(4096, 50257)` with `randint(0, 50257, (4096,))`: class targets, token
    # ids) indexes that size: it shrinks with it, as equal knobs do; a bound equal to no size is a value and stays
    sizes = {v for v, _, _ in sites.values()}
    for node, put in bounds:
        v = _int_literal(node)
        if v is not None and v > KEEP and v in sizes:
            sites[literal_key("get_inputs", node)] = (v, node, put)
    return sites


def _index_bounds(call: ast.Call) -> list[tuple[ast.expr, Setter]]:
    """A `randint` call's `high` (randint(high, size) or randint(low, high, size), or `high=`), with its setter."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("randint", "randint_like"):
        return []
    kw = [(k.value, _keyword_setter(k)) for k in call.keywords if k.arg == "high"]
    if kw:
        return kw
    plain = [a for a in call.args if not isinstance(a, ast.Starred)]
    if name == "randint_like":
        return [(call.args[1], _arg_setter(call, 1))] if len(plain) >= 2 else []
    sized = [i for i, a in enumerate(call.args) if isinstance(a, ast.Tuple | ast.List)]
    if not sized:
        return []
    high = sized[0] - 1  # the argument before the size tuple: randint(high, size) or randint(low, high, size)
    return [(call.args[high], _arg_setter(call, high))] if high >= 0 else []


def _stmt_setter(stmt: ast.Assign | ast.AnnAssign) -> Setter:
    def put(node: ast.expr) -> None:
        stmt.value = node

    return put


def _elt_setter(tup: ast.Tuple | ast.List, i: int) -> Setter:
    def put(node: ast.expr) -> None:
        tup.elts[i] = node

    return put


def _function_defaults(tree: ast.Module, names: tuple[str, ...]) -> dict[str, IntOrInts]:
    """Int (or int tuple) defaults of the named top-level functions' parameters."""
    out: dict[str, IntOrInts] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name not in names:
            continue
        a = stmt.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True))
        pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        for param, default in pairs:
            v = _knob_value(default)
            if v is not None:
                out.setdefault(param.arg, v)
    return out


def _param_value(v: Any) -> IntOrInts | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, list | tuple) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        return [int(i) for i in v]
    return None


def size_knobs(source: str, path: Path | str, params: dict[str, Any]) -> SizeKnobs:
    """The integers `params` and the file give its inputs: constants, parameters, parameter defaults."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: line {exc.lineno}: syntax error: {exc.msg}") from None
    constants = {k: v for k, (v, _, _) in _literal_sites(tree).items()}
    constants.update({k: v for k, (v, _, _) in _literal_call_sites(tree).items()})
    knob_params: dict[str, IntOrInts] = {}
    for k, v in params.items():
        pv = _param_value(v)
        if pv is not None:
            knob_params[k] = pv
    for k, v in _function_defaults(tree, ("get_inputs", "get_init_inputs")).items():
        if k not in params:
            knob_params[k] = v
    return SizeKnobs(constants=constants, params=knob_params)


def _scaled(v: int, factor: int) -> int:
    return v if v <= KEEP else max(KEEP, math.ceil(v / factor))


def _scale_table(values: set[int], factor: int) -> dict[int, int]:
    """old -> new for every knob value, keeping order, equality and divisibility (see the module doc)."""
    table: dict[int, int] = {}
    for v in sorted(values):
        new = _scaled(v, factor)
        if v > KEEP:
            divisors = [a for a in table if 1 < a < v and v % a == 0]
            step = math.lcm(*(table[a] for a in divisors)) if divisors else 1
            new = math.ceil(new / step) * step
            if new > v:  # no smaller multiple exists: keep the value rather than break the relation
                new = v
            below = [table[a] for a in table if a < v]
            new = max(new, *below) if below else new  # a < b stays a <= b
        table[v] = new
    return table


def shrunk(knobs: SizeKnobs, factor: int) -> SizeKnobs:
    """`knobs` with every value above KEEP divided by `factor` (factor 1: unchanged)."""
    if factor <= 1:
        return knobs.model_copy(deep=True)
    table = _scale_table(set(knobs.values()), factor)

    def apply(v: IntOrInts) -> IntOrInts:
        return [table[i] for i in v] if isinstance(v, list) else table[v]

    return SizeKnobs(
        constants={k: apply(v) for k, v in knobs.constants.items()},
        params={k: apply(v) for k, v in knobs.params.items()},
    )


KnobRef = tuple[str, str]  # ("constants" | "params", name)


def halving_moves(knobs: SizeKnobs) -> list[list[KnobRef]]:
    """Single steps for when no common factor works (one size must stay large while others shrink):
    halve each group of equal-valued knobs together (keeps `in_features == out_features`), then each
    knob alone; the largest values first. Knobs at or below KEEP are left alone."""
    refs: dict[KnobRef, int] = {}
    for kind in ("constants", "params"):
        for name, v in getattr(knobs, kind).items():
            size = max(v) if isinstance(v, list) else v
            if size > KEEP:
                refs[(kind, name)] = size
    groups: dict[int, list[KnobRef]] = {}
    for ref, size in refs.items():
        groups.setdefault(size, []).append(ref)
    moves = [groups[size] for size in sorted(groups, reverse=True) if len(groups[size]) > 1]
    moves += [[ref] for ref in sorted(refs, key=lambda r: -refs[r])]
    return moves


def halved(knobs: SizeKnobs, refs: list[KnobRef]) -> SizeKnobs:
    """`knobs` with the named ones halved (values above KEEP only, never below it)."""

    def half(v: IntOrInts) -> IntOrInts:
        return [_scaled(i, 2) for i in v] if isinstance(v, list) else _scaled(v, 2)

    out = knobs.model_copy(deep=True)
    for kind, name in refs:
        table = getattr(out, kind)
        table[name] = half(table[name])
    return out


def _literal_node(value: IntOrInts, like: ast.expr) -> ast.expr:
    if isinstance(value, list):
        elts: list[ast.expr] = [_literal_node(i, like) for i in value]
        node: ast.expr = (
            ast.List(elts=elts, ctx=ast.Load())
            if isinstance(like, ast.List)
            else ast.Tuple(elts=elts, ctx=ast.Load())
        )
    elif value < 0:
        node = ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-value))
    else:
        node = ast.Constant(value)
    return ast.copy_location(node, like)


def patched_code(source: str, path: Path | str, constants: dict[str, Any]) -> types.CodeType:
    """The file compiled with its literal constants replaced (line numbers unchanged for tracebacks)."""
    tree = ast.parse(source, filename=str(path))
    sites = {**_literal_sites(tree), **_literal_call_sites(tree)}
    for name, value in constants.items():
        if name not in sites:
            fn, _, where = name.partition(":")
            what = (
                f"no integer literal sizing its inputs at {fn} line {where.replace(':', ', column ')}"
                if fn in LITERAL_FUNCTIONS and where
                else f"no single top-level `{name} = <integer>`"
            )
            raise TaskError(f"{path}: workload constant {name!r}: the file has {what} to replace")
        pv = _param_value(value)
        if pv is None:
            raise TaskError(f"{path}: workload constant {name!r}: must be an integer or a list of them")
        _, old, put = sites[name]
        put(ast.fix_missing_locations(_literal_node(pv, old)))
    return compile(ast.fix_missing_locations(tree), str(path), "exec")
