"""Find the CUDA C sources inside a candidate's Python text, without running it.

A CUDA candidate passes source strings to `ksearch.gpu.nvrtc.compile(src, name, options=...)`, to
`torch.utils.cpp_extension.load_inline(cuda_sources=...)` or `ksearch.gpu.cpp_ext.load(...)`, or keeps them
in a module-level constant (e.g. `CUDA_SRC`). We evaluate those expressions with a tiny constant
folder (literals, module constants such as `BLOCK = 256`, f-strings, `.format`, `.replace`, `%`,
`+`) and remember where each literal sits so compiler messages can point at the candidate's own
lines.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal

# What load_inline puts in front of the joined cuda_sources (torch.utils.cpp_extension).
CPP_EXT_PRELUDE = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]

_UNKNOWN = object()


@dataclass
class Segment:
    """One piece of a compile unit, taken from one Python expression."""

    text: str
    first_line: int  # 1-based line of this segment inside the unit
    py_line: int | None  # Python line where the expression starts
    literal: bool  # a plain string literal: lines map one-to-one


@dataclass
class CudaUnit:
    kind: Literal["nvrtc", "cpp_ext"]
    text: str
    segments: list[Segment]
    options: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # kernel names the candidate asks for
    py_line: int | None = None  # the call or assignment
    # other files the unit includes by name (a FlashInfer-Bench solution's headers), written beside it
    files: dict[str, str] = field(default_factory=dict)
    file_name: str = ""  # the unit's own file name where it has one (a solution's kernel.cu)


@dataclass
class Extraction:
    units: list[CudaUnit]
    notes: list[tuple[int | None, str]]  # (python line, message) for sources we could not evaluate


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


class _Folder:
    """Evaluates a small, side-effect-free subset of Python expressions to constants."""

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env

    def eval(self, node: ast.AST | None) -> Any:
        if node is None:
            return _UNKNOWN
        try:
            return self._eval(node)
        except Exception:  # any failure means "not a constant": the caller reports it as such
            return _UNKNOWN

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id, _UNKNOWN)
        if isinstance(node, (ast.List, ast.Tuple)):
            vals = [self._eval(e) for e in node.elts]
            return (
                _UNKNOWN
                if any(v is _UNKNOWN for v in vals)
                else (list(vals) if isinstance(node, ast.List) else tuple(vals))
            )
        if isinstance(node, ast.Dict):
            keys = [self._eval(k) if k is not None else _UNKNOWN for k in node.keys]
            vals = [self._eval(v) for v in node.values]
            if any(x is _UNKNOWN for x in keys + vals):
                return _UNKNOWN
            return dict(zip(keys, vals, strict=True))
        if isinstance(node, ast.JoinedStr):
            out = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out.append(str(part.value))
                elif isinstance(part, ast.FormattedValue):
                    v = self._eval(part.value)
                    if v is _UNKNOWN:
                        return _UNKNOWN
                    if part.conversion == ord("r"):
                        v = repr(v)
                    elif part.conversion == ord("s"):
                        v = str(v)
                    spec = self._eval(part.format_spec) if part.format_spec is not None else ""
                    if spec is _UNKNOWN:
                        return _UNKNOWN
                    out.append(format(v, spec))
                else:
                    return _UNKNOWN
            return "".join(out)
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left), self._eval(node.right)
            if left is _UNKNOWN or right is _UNKNOWN:
                return _UNKNOWN
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                return left % right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.FloorDiv):
                return left // right
            if isinstance(node.op, ast.Sub):
                return left - right
            return _UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        return _UNKNOWN

    def _call(self, node: ast.Call) -> Any:
        args = [self._eval(a) for a in node.args]
        kwargs = {k.arg: self._eval(k.value) for k in node.keywords if k.arg is not None}
        if any(a is _UNKNOWN for a in args) or any(v is _UNKNOWN for v in kwargs.values()):
            return _UNKNOWN
        if len(node.keywords) != len(kwargs):  # **kwargs
            return _UNKNOWN
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("str", "int", "float") and len(args) == 1:
            return {"str": str, "int": int, "float": float}[func.id](args[0])
        if _dotted(func) in ("textwrap.dedent", "dedent") and len(args) == 1:
            return textwrap.dedent(args[0])
        if isinstance(func, ast.Attribute):
            base = self._eval(func.value)
            if isinstance(base, str) and func.attr in (
                "format",
                "replace",
                "strip",
                "lstrip",
                "rstrip",
                "join",
            ):
                return getattr(base, func.attr)(*args, **kwargs)
        return _UNKNOWN


def _module_env(tree: ast.Module) -> dict[str, Any]:
    """Module-level names bound to constants, in order (later bindings win)."""
    env: dict[str, Any] = {}
    folder = _Folder(env)
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        for t in targets:
            if isinstance(t, ast.Name):
                v = folder.eval(value)
                if v is not _UNKNOWN:
                    env[t.id] = v
                else:
                    env.pop(t.id, None)
    return env


def _local_env(func: ast.AST, module_env: dict[str, Any]) -> dict[str, Any]:
    env = dict(module_env)
    folder = _Folder(env)
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = folder.eval(node.value)
            if v is not _UNKNOWN:
                env[node.targets[0].id] = v
    return env


def _literal_node(node: ast.AST, env_nodes: dict[str, ast.AST]) -> ast.AST:
    """The node holding the source text: follows a Name to its module-level assignment."""
    if isinstance(node, ast.Name) and node.id in env_nodes:
        return env_nodes[node.id]
    return node


def _is_plain_literal(node: ast.AST, text: str, py_source: str) -> bool:
    """A single string literal whose physical lines are the value's lines (no escaped newlines)."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    seg = ast.get_source_segment(py_source, node)
    return seg is not None and seg.count("\n") == text.count("\n")


def _kwarg(call: ast.Call, name: str, pos: int | None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if pos is not None and len(call.args) > pos:
        return call.args[pos]
    return None


def _as_list(v: Any) -> list[str] | None:
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    return None


def _segment_nodes(expr: ast.AST, env_nodes: dict[str, ast.AST]) -> list[ast.AST]:
    """The element expressions of a list/tuple argument (each becomes one segment), else [expr]."""
    node = _literal_node(expr, env_nodes)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal_node(e, env_nodes) for e in node.elts]
    return [node]


def extract_cuda(py_source: str) -> Extraction:
    """All CUDA compile units a candidate defines. Raises SyntaxError if the module does not parse."""
    tree = ast.parse(py_source)
    env = _module_env(tree)
    env_nodes: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    env_nodes[t.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            env_nodes[stmt.target.id] = stmt.value

    # names under which the helpers were imported: `from ksearch.gpu.nvrtc import compile as nv_compile`, etc.
    nvrtc_funcs, inline_funcs = set(), {"load_inline"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module.endswith("nvrtc") and a.name == "compile":
                    nvrtc_funcs.add(a.asname or a.name)
                if (node.module.endswith("cpp_extension") and a.name == "load_inline") or (
                    node.module.endswith("cpp_ext") and a.name == "load"
                ):
                    inline_funcs.add(a.asname or a.name)

    # map every call to its enclosing function (for function-local constant assignments)
    enclosing: dict[int, ast.AST] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(fn):
                enclosing.setdefault(id(sub), fn)

    units: list[CudaUnit] = []
    notes: list[tuple[int | None, str]] = []
    used: set[int] = set()  # ids of literal nodes consumed by calls

    def folder_for(call: ast.AST) -> _Folder:
        fn = enclosing.get(id(call))
        return _Folder(_local_env(fn, env) if fn is not None else env)

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = _dotted(node.func)
        last = fname.rsplit(".", 1)[-1]
        is_nvrtc = (last == "compile" and (fname.split(".")[-2:-1] == ["nvrtc"])) or fname in nvrtc_funcs
        is_inline = last == "load_inline" or fname in inline_funcs or fname.endswith("cpp_ext.load")
        if not (is_nvrtc or is_inline):
            continue
        folder = folder_for(node)
        if is_nvrtc:
            src_expr = _kwarg(node, "source", 0)
            text = folder.eval(src_expr)
            if not isinstance(text, str):
                notes.append(
                    (
                        node.lineno,
                        "the CUDA source passed to nvrtc.compile is built at run time; "
                        "it is compiled (and checked) when the candidate runs",
                    )
                )
                continue
            lit = _literal_node(src_expr, env_nodes) if src_expr is not None else node
            used.add(id(lit))
            name = folder.eval(_kwarg(node, "name", 1))
            opts = _as_list(folder.eval(_kwarg(node, "options", 2))) or []
            seg = Segment(
                text=text,
                first_line=1,
                py_line=getattr(lit, "lineno", node.lineno),
                literal=_is_plain_literal(lit, text, py_source),
            )
            units.append(
                CudaUnit(
                    kind="nvrtc",
                    text=text,
                    segments=[seg],
                    options=opts,
                    names=[name] if isinstance(name, str) else [],
                    py_line=node.lineno,
                )
            )
        else:
            src_expr = _kwarg(node, "cuda_sources", None)
            if src_expr is None:
                continue  # a C++-only extension: nothing for nvcc
            seg_nodes = _segment_nodes(src_expr, env_nodes)
            texts = [folder.eval(n) for n in seg_nodes]
            if len(seg_nodes) == 1 and isinstance(texts[0], (list, tuple)):
                texts = list(texts[0])
                seg_nodes = seg_nodes * len(texts)
            if not all(isinstance(t, str) for t in texts):
                notes.append(
                    (
                        node.lineno,
                        "the cuda_sources passed to load_inline are built at run time; "
                        "they are compiled (and checked) when the candidate runs",
                    )
                )
                continue
            segments = []
            line = len(CPP_EXT_PRELUDE) + 1
            for n, t in zip(seg_nodes, texts, strict=True):
                used.add(id(n))
                segments.append(
                    Segment(
                        text=t,
                        first_line=line,
                        py_line=getattr(n, "lineno", node.lineno),
                        literal=_is_plain_literal(n, t, py_source),
                    )
                )
                line += t.count("\n") + 1
            flags = _as_list(folder.eval(_kwarg(node, "extra_cuda_cflags", None))) or []
            funcs = _as_list(folder.eval(_kwarg(node, "functions", None))) or []
            units.append(
                CudaUnit(
                    kind="cpp_ext",
                    text="\n".join(CPP_EXT_PRELUDE + texts),
                    segments=segments,
                    options=flags,
                    names=funcs,
                    py_line=node.lineno,
                )
            )

    units += _solution_units(tree, env_nodes, py_source, used)

    # module-level CUDA text not consumed by a call we recognised (e.g. CUDA_SRC used indirectly)
    for stmt in tree.body:
        if (
            isinstance(stmt, (ast.Assign, ast.AnnAssign))
            and stmt.value is not None
            and id(stmt.value) not in used
        ):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = env.get(names[0]) if names else None
            if isinstance(value, str) and "__global__" in value:
                literal = _is_plain_literal(stmt.value, value, py_source)
                if "torch::" in value or "<torch/" in value:
                    seg = Segment(value, len(CPP_EXT_PRELUDE) + 1, stmt.value.lineno, literal)
                    units.append(
                        CudaUnit(
                            kind="cpp_ext",
                            text="\n".join([*CPP_EXT_PRELUDE, value]),
                            segments=[seg],
                            py_line=stmt.lineno,
                        )
                    )
                else:
                    seg = Segment(value, 1, stmt.value.lineno, literal)
                    units.append(CudaUnit(kind="nvrtc", text=value, segments=[seg], py_line=stmt.lineno))
    return Extraction(units=units, notes=notes)


def _solution_units(
    tree: ast.Module, env_nodes: dict[str, ast.AST], py_source: str, used: set[int]
) -> list[CudaUnit]:
    """A FlashInfer-Bench CUDA solution as ksearch runs it (gpu/tasks/flashinfer/solution.py writes the module): its
    files in a module-level `SOURCES` dict, built by `fib_build.build`. Each `.cu` file is a unit, compiled with
    the solution's other files beside it so its own includes resolve."""
    calls = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func).endswith("fib_build.build")
    ]
    node = env_nodes.get("SOURCES")
    if not calls or not isinstance(node, ast.Dict):
        return []
    files: dict[str, tuple[str, ast.Constant]] = {}
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant):
            if isinstance(v.value, str):
                files[k.value] = (v.value, v)
    units = []
    for name, (text, lit) in files.items():
        if not name.endswith(".cu"):
            continue
        used.add(id(lit))
        seg = Segment(
            text=text, first_line=1, py_line=lit.lineno, literal=_is_plain_literal(lit, text, py_source)
        )
        others = {n: t for n, (t, _) in files.items() if n != name}
        units.append(
            CudaUnit(
                kind="cpp_ext", text=text, segments=[seg], py_line=lit.lineno, files=others, file_name=name
            )
        )
    return units


def map_line(unit: CudaUnit, unit_line: int, py_source: str) -> int | None:
    """The candidate's Python line for line `unit_line` (1-based) of a compile unit, if known."""
    seg = None
    for s in unit.segments:
        if s.first_line <= unit_line < s.first_line + s.text.count("\n") + 1:
            seg = s
    if seg is None or seg.py_line is None:
        return None
    rel = unit_line - seg.first_line  # 0-based line inside the segment's text
    if seg.literal:
        return seg.py_line + rel
    return locate_line(py_source, seg.text, rel, hint=seg.py_line)


def locate_line(py_source: str, text: str, rel: int, hint: int | None = None) -> int | None:
    """Map line `rel` (0-based) of `text` to a Python line by matching the text's lines in the file.

    Used when a source was built (f-string, .format) so positions are not one-to-one: we pick the
    offset at which the most distinctive lines of `text` coincide with the file's lines.
    """
    py_lines = [ln.strip() for ln in py_source.splitlines()]
    cu_lines = [ln.strip() for ln in text.splitlines()]
    if not cu_lines or rel >= len(cu_lines):
        return hint
    index: dict[str, list[int]] = {}
    for i, ln in enumerate(py_lines):
        if len(ln) >= 4:
            index.setdefault(ln, []).append(i)
    votes: dict[int, int] = {}
    for j, ln in enumerate(cu_lines):
        for i in index.get(ln, ()):
            votes[i - j] = votes.get(i - j, 0) + 1
    if not votes:
        return hint
    best = max(votes.items(), key=lambda kv: (kv[1], -abs((kv[0] + 1) - (hint or 0))))[0]
    return best + rel + 1
