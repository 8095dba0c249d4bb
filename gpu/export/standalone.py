"""A candidate's source as a file that runs where ksearch is not installed (pure text: no torch, no store).

A GPU MODE `submission.py` or a KernelBench `ModelNew` file is run by its owner's evaluator, in an environment that
has torch and Triton but not ksearch. A Triton candidate already imports nothing of ksearch and goes out as it is.
A CUDA candidate imports `ksearch.gpu.nvrtc`, a C++ extension candidate `ksearch.gpu.cpp_ext`: for those the
helper's own standalone copy is written into the file (gpu/export/nvrtc.py, gpu/export/cpp_ext.py: the
same compile and launch, nothing of ksearch) and each import of it becomes a plain assignment from that copy, on
the import's own line, so the rest of the source is untouched. Any other import of ksearch (`ksearch.gpu.inputs`,
`fib_build`, ...) is refused with the line it is on: nothing can stand in for it. Sources recorded before the
package existed import the same helpers under the old top-level name `gpu` (`from gpu import nvrtc`); they are
read the same way.

`StandaloneError` (a KsearchError and a ValueError) is every refusal here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from ksearch.worldmodel.errors import KsearchError

__all__ = ["HELPERS", "Standalone", "StandaloneError", "ksearch_imports", "standalone"]


class StandaloneError(ValueError, KsearchError):
    """A candidate cannot be written as a file without ksearch; the message says why and what is accepted."""


@dataclass(frozen=True)
class Helper:
    """One of ksearch's helper modules that a standalone copy stands in for."""

    module: str
    """Its name under ksearch.gpu: nvrtc, cpp_ext."""
    file: str
    """The standalone copy, beside this module."""
    factory: str
    """The function in that copy that returns the helper's namespace."""
    names: tuple[str, ...]
    """What a candidate may use of it."""
    what: str
    """What the copy does, for the exported file's comment."""

    @property
    def instance(self) -> str:
        """The exported file's one instance of the helper (one compile cache for every import of it)."""
        return f"{self.factory}_lib"

    def text(self) -> str:
        """The copy's code: everything below its module docstring."""
        source = (Path(__file__).parent / self.file).read_text()
        tree = ast.parse(source)
        first = tree.body[1] if ast.get_docstring(tree) is not None else tree.body[0]
        return "\n".join(source.splitlines()[first.lineno - 1 :]).strip() + "\n"


HELPERS: dict[str, Helper] = {
    "nvrtc": Helper(
        "nvrtc",
        "nvrtc.py",
        "_ksearch_nvrtc",
        ("compile", "Kernel", "i32", "i64", "u32", "u64", "f32", "f64"),
        "ksearch.gpu.nvrtc without ksearch: CUDA C compiled by NVRTC through CuPy, launched on torch's stream",
    ),
    "cpp_ext": Helper(
        "cpp_ext",
        "cpp_ext.py",
        "_ksearch_cpp_ext",
        ("load",),
        "ksearch.gpu.cpp_ext without ksearch: torch's load_inline, named by the hash of the sources",
    ),
}
_ROOTS = ("ksearch", "gpu")  # the package, and its helpers' name before the package existed
_ACCEPTED = (
    "`from ksearch.gpu import nvrtc` (or cpp_ext), `import ksearch.gpu.nvrtc as nvrtc` or "
    "`from ksearch.gpu.nvrtc import compile`"
)


@dataclass
class Standalone:
    """A candidate's source made to run without ksearch."""

    text: str
    helpers: list[str] = field(default_factory=list)
    """The helpers written in (nvrtc, cpp_ext), in the order of HELPERS."""
    notes: list[str] = field(default_factory=list)
    """What changed besides the helpers, said for the user."""


def _path(module: str) -> list[str] | None:
    """The dotted module as a path under ksearch (["gpu", "nvrtc"]), or None when it is not ksearch's."""
    parts = module.split(".")
    if parts[0] == "ksearch":
        return parts[1:]
    if parts[0] == "gpu":
        return parts
    return None


def ksearch_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the module that names ksearch (or its old top-level name `gpu`)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in _ROOTS for a in node.names):
            found.append(node)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in _ROOTS
        ):
            found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _refuse(node: ast.stmt, what: str) -> StandaloneError:
    return StandaloneError(
        f"line {node.lineno}: the candidate imports {what}, which exists only where ksearch is installed; "
        f"a file written out may use ksearch's NVRTC launcher and C++ extension loader (their standalone copies "
        f"are written in: {_ACCEPTED}), nothing else of ksearch"
    )


def _bindings(node: ast.Import | ast.ImportFrom) -> tuple[list[str], dict[str, tuple[Helper, str | None]]]:
    """The statement's imports that stay (plain module names) and, per name it binds, the helper and the
    attribute it stands for (None: the helper itself)."""
    kept: list[str] = []
    bound: dict[str, tuple[Helper, str | None]] = {}
    if isinstance(node, ast.Import):
        for a in node.names:
            path = _path(a.name)
            if path is None:
                kept.append(a.name + (f" as {a.asname}" if a.asname else ""))
                continue
            helper = HELPERS.get(path[1]) if len(path) == 2 and path[0] == "gpu" else None
            if helper is None:
                raise _refuse(node, f"`ksearch.{'.'.join(path)}`" if path else "`ksearch`")
            if a.asname is None:
                raise _refuse(node, f"`{a.name}` without a name of its own (`import {a.name} as {path[1]}`)")
            bound[a.asname] = (helper, None)
        return kept, bound
    path = _path(node.module or "")
    assert path is not None  # ksearch_imports chose it
    for a in node.names:
        full = [*path, a.name]
        if len(full) == 2 and full[0] == "gpu" and full[1] in HELPERS:
            bound[a.asname or a.name] = (HELPERS[full[1]], None)
        elif len(full) == 3 and full[0] == "gpu" and full[1] in HELPERS:
            helper = HELPERS[full[1]]
            if full[2] not in helper.names:
                raise StandaloneError(
                    f"line {node.lineno}: the candidate imports `{full[2]}` from ksearch.gpu.{helper.module}, which "
                    f"the standalone copy written out does not have; it has {', '.join(helper.names)}"
                )
            bound[a.asname or a.name] = (helper, full[2])
        elif path == ["gpu"] or not path:
            raise _refuse(node, f"`ksearch.{'.'.join(full)}`")
        else:
            raise _refuse(node, f"`{a.name}` from `ksearch.{'.'.join(path)}`")
    return kept, bound


def _check_uses(tree: ast.Module, modules: dict[str, Helper]) -> None:
    """Every `nvrtc.X` the candidate reads must be in the copy (a name bound to a helper module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            helper = modules[node.value.id]
            if node.attr not in helper.names:
                raise StandaloneError(
                    f"line {node.lineno}: the candidate uses `{node.value.id}.{node.attr}` of ksearch.gpu."
                    f"{helper.module}, which the standalone copy written out does not have; it has "
                    f"{', '.join(helper.names)}"
                )


def _replace(lines: list[bytes], node: ast.stmt, text: str) -> None:
    """Replace the statement's span (AST offsets are UTF-8 byte columns) by `text`, in place."""
    end = node.end_lineno or node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else len(lines[end - 1])
    head, tail = lines[node.lineno - 1][: node.col_offset], lines[end - 1][end_col:]
    lines[node.lineno - 1 : end] = [head + text.encode() + tail]


def _future_imports(tree: ast.Module) -> list[ast.ImportFrom]:
    return [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]


def _docstring_end(tree: ast.Module) -> int:
    """The last line of the module docstring (0 without one)."""
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first.end_lineno or first.lineno
    return 0


def _insert_at(tree: ast.Module, drop_future: bool) -> int:
    """The line after which the helpers go: after the module docstring and the __future__ imports, which must stay
    first (or after the docstring alone, when those imports are taken out)."""
    at = _docstring_end(tree)
    if not drop_future:
        for stmt in _future_imports(tree):
            at = max(at, stmt.end_lineno or stmt.lineno)
    return at


def standalone(source: str, *, header: list[str], drop_future: bool = False) -> Standalone:
    """`source` with the helpers it imports from ksearch written in, and `header` (lines of text) as a comment on
    top. `drop_future`: take out `from __future__` imports (an evaluator that puts lines of its own before the
    file's, as KernelBench's does, makes them a syntax error)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise StandaloneError(f"the candidate does not parse as Python: line {e.lineno}: {e.msg}") from None
    lines = source.encode().split(b"\n")
    modules: dict[str, Helper] = {}
    used: set[str] = set()
    notes: list[str] = []
    edits: list[tuple[ast.stmt, str]] = []
    for node in ksearch_imports(tree):
        kept, bound = _bindings(node)
        parts = [f"import {', '.join(kept)}"] if kept else []
        for name, (helper, attr) in bound.items():
            used.add(helper.module)
            if attr is None:
                modules[name] = helper
            parts.append(f"{name} = {helper.instance}" + (f".{attr}" if attr else ""))
        edits.append((node, "; ".join(parts)))
    _check_uses(tree, modules)
    if drop_future:
        for node in _future_imports(tree):
            edits.append((node, ""))
            notes.append(
                f"line {node.lineno}: `{ast.unparse(node)}` taken out (the evaluator puts lines of its own before "
                "the file's, after which a __future__ import is a syntax error)"
            )
    at = _insert_at(tree, drop_future)
    for stmt, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        _replace(lines, stmt, text)
    body = b"\n".join(lines).decode()
    helpers = [name for name in HELPERS if name in used]
    block: list[str] = []
    for name in helpers:
        h = HELPERS[name]
        block += [
            f"# ---- written in by ksearch: {h.what} ----",
            h.text().rstrip("\n"),
            "",
            "",
            f"{h.instance} = {h.factory}()",
            "# ---- end of what ksearch wrote in ----",
            "",
        ]
    top = [f"# {line}" if line else "#" for line in header]
    out_lines = body.split("\n")
    text = "\n".join([*top, *out_lines[:at], *block, *out_lines[at:]])
    _check_result(text)
    return Standalone(text=text if text.endswith("\n") else text + "\n", helpers=helpers, notes=notes)


def _check_result(text: str) -> None:
    """The file written out parses and imports nothing of ksearch (else the fault is ksearch's, said as such)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:  # a replacement broke the file: never hand it out
        raise StandaloneError(
            f"writing the helpers in produced a file that does not parse (line {e.lineno}: {e.msg}); "
            "this is ksearch's fault: `ksearch attempt SEARCH N -o FILE` writes the candidate as it is"
        ) from None
    left = ksearch_imports(tree)
    if left:
        raise StandaloneError(
            f"line {left[0].lineno} of the file written out still imports ksearch; this is ksearch's fault: "
            "`ksearch attempt SEARCH N -o FILE` writes the candidate as it is"
        )
