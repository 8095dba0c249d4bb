"""Read a Python file's module-level constants without running it (ast only, no imports)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from ksearch.worldmodel.errors import KsearchError

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


class NotLiteral(KsearchError):
    """The expression needs more than literals, names of literals and arithmetic."""


def const_eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate literals, names bound to literals, arithmetic, and dict(...)/list(...) of those."""
    match node:
        case ast.Constant(value=v):
            return v
        case ast.Name(id=name) if name in env:
            return env[name]
        case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
            items = [const_eval(e, env) for e in elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        case ast.Dict(keys=keys, values=values):
            out: dict[Any, Any] = {}
            for key, val in zip(keys, values, strict=True):
                if key is None:  # {**other}
                    out.update(const_eval(val, env))
                else:
                    out[const_eval(key, env)] = const_eval(val, env)
            return out
        case ast.UnaryOp(op=ast.USub(), operand=x):
            return -const_eval(x, env)
        case ast.UnaryOp(op=ast.UAdd(), operand=x):
            return +const_eval(x, env)
        case ast.BinOp(left=a, op=op, right=b) if type(op) in _BINOPS:
            return _BINOPS[type(op)](const_eval(a, env), const_eval(b, env))
        case ast.Call(func=ast.Name(id="dict"), args=[], keywords=kws) if all(k.arg for k in kws):
            return {k.arg: const_eval(k.value, env) for k in kws}
    raise NotLiteral(ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__)


class ModuleFacts:
    """What a module defines at top level, and the values of its literal assignments."""

    def __init__(self, source: str, filename: str) -> None:
        self.tree = ast.parse(source, filename=filename)
        self.docstring = ast.get_docstring(self.tree) or ""
        self.classes: set[str] = set()
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.assigned: dict[str, ast.expr] = {}  # name -> value expression of its last assignment
        self.imported: set[str] = set()
        self.values: dict[str, Any] = {}  # names whose value is a literal
        self.assign_lines: dict[str, list[int]] = {}
        for stmt in self.tree.body:
            self._visit(stmt)

    def _visit(self, stmt: ast.stmt) -> None:
        match stmt:
            case ast.ClassDef(name=name):
                self.classes.add(name)
            case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
                self.functions[name] = stmt
            case (
                ast.Assign(targets=[ast.Name(id=name)], value=value)
                | ast.AnnAssign(target=ast.Name(id=name), value=value)
            ) if value is not None:
                self.assigned[name] = value
                self.assign_lines.setdefault(name, []).append(stmt.lineno)
                try:
                    self.values[name] = const_eval(value, self.values)
                except (NotLiteral, TypeError, ValueError, ZeroDivisionError, KeyError):
                    self.values.pop(name, None)
            case ast.Import(names=names) | ast.ImportFrom(names=names):
                for alias in names:
                    self.imported.add((alias.asname or alias.name).split(".")[0])
            case ast.If(body=body, orelse=orelse) | ast.Try(body=body, orelse=orelse):
                for s in [*body, *orelse]:
                    self._visit(s)

    def defines(self, name: str) -> bool:
        return (
            name in self.classes or name in self.functions or name in self.assigned or name in self.imported
        )

    def literal(self, name: str) -> Any:
        """The literal value of a module-level name; NotLiteral if it is bound to anything else."""
        if name in self.values:
            return self.values[name]
        raise NotLiteral(name)

    def param_names(self, function: str) -> tuple[list[str], bool]:
        """(parameter names, accepts **kwargs) of a module-level function."""
        fn = self.functions[function]
        a = fn.args
        names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
        return names, a.kwarg is not None
