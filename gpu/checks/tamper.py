"""Static look at a candidate's Python for things a kernel has no business doing.

A candidate runs in the same process as the timing and checking code of its worker, so it could
patch them. These checks read the AST only (nothing runs); the worker adds runtime checks (timing
functions and precision settings unchanged after the candidate ran).
"""

from __future__ import annotations

import ast

# Modules whose attributes a candidate must not reassign: the harness relies on them.
# `ksearch` is the harness's package; `gpu` the top-level name older candidates import it by (the worker
# aliases it to ksearch.gpu, so patching one patches the other).
_PROTECTED_ROOTS = {
    "ksearch",
    "gpu",
    "torch",
    "time",
    "triton",
    "sys",
    "os",
    "builtins",
    "numpy",
    "np",
    "cupy",
    "gc",
}
# Calls that reach into the interpreter or the process around the candidate.
_BAD_CALLS = {
    "sys._getframe": "inspects the caller's frames",
    "inspect.currentframe": "inspects the caller's frames",
    "inspect.stack": "inspects the caller's frames",
    "gc.get_objects": "walks the interpreter's objects",
    "gc.get_referrers": "walks the interpreter's objects",
    "os.write": "writes to raw file descriptors",
    "os.dup2": "rewires file descriptors",
    "os.kill": "signals processes",
    "os.fork": "forks the worker",
    "signal.signal": "installs signal handlers",
    "importlib.reload": "reloads modules",
    "builtins.__import__": "replaces the import machinery",
    "torch.set_float32_matmul_precision": "changes global matmul precision (the reference would run with it too)",
    "torch.set_default_dtype": "changes the global default dtype (the reference would run with it too)",
}
# Settings a kernel may change without affecting the measurement or the reference's numerics.
_BENIGN_SETTINGS = (
    "os.environ",
    "torch.backends.cudnn.benchmark",
    "torch._dynamo.config.",
    "torch._inductor.config.",
    "triton.Config",
)
# The harness's package under both its names (see _PROTECTED_ROOTS), and its modules a candidate must not
# import (prefixes: ksearch.gpu.worker covers its room and the former worker_core, worker_timing, ...).
_HARNESS_PACKAGES = ("ksearch.gpu", "gpu")
_HARNESS_MODULES = tuple(
    f"{pkg}.{mod}"
    for pkg in _HARNESS_PACKAGES
    for mod in ("worker", "timing", "checks", "checking", "protocol", "pool", "sandbox", "hardware")
)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Subscript):
        parts.append(_dotted(node.value) + "[]")
    return ".".join(reversed(parts))


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> module it refers to (import torch as t; from torch import cuda)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def scan(source: str) -> list[tuple[int | None, str]]:
    """(line, reason) for each construct that could tamper with measurement. Empty when clean."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    aliases = _module_aliases(tree)

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        base = aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    found: list[tuple[int | None, str]] = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        line: int = getattr(node, "lineno", 0)  # every statement has one; ast.walk types nodes as AST
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                full = resolve(_dotted(t))
                root = full.split(".")[0]
                if root in _PROTECTED_ROOTS and aliases.get(_dotted(t).split(".")[0]) is not None:
                    if full.startswith(_BENIGN_SETTINGS):
                        continue
                    if full.startswith("torch.backends.") and full.endswith(
                        (
                            "allow_tf32",
                            "allow_fp16_reduced_precision_reduction",
                            "allow_bf16_reduced_precision_reduction",
                        )
                    ):
                        found.append((line, f"sets `{full}`: lowers precision for the reference too"))
                    else:
                        found.append((line, f"assigns to `{full}` (patches a library the harness uses)"))
        if isinstance(node, ast.Call):
            full = resolve(_dotted(node.func))
            if full in _BAD_CALLS:
                found.append((node.lineno, f"calls `{full}`: {_BAD_CALLS[full]}"))
            elif full in ("setattr", "delattr") and node.args:
                obj = resolve(_dotted(node.args[0]))
                if obj.split(".")[0] in _PROTECTED_ROOTS and aliases.get(_dotted(node.args[0]).split(".")[0]):
                    found.append((node.lineno, f"{full} on `{obj}` (patches a library the harness uses)"))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.module in _HARNESS_PACKAGES:
                mods = [f"{node.module}.{a.name}" for a in node.names]
            for m in mods:
                if m.startswith(_HARNESS_MODULES):
                    found.append((node.lineno, f"imports the harness module `{m}`"))
    return found


def defines_any(source: str, names: tuple[str, ...]) -> bool:
    """Whether the module binds one of `names` at top level (class, def, assignment or import)."""
    tree = ast.parse(source)
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in names:
            return True
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in stmt.targets
        ):
            return True
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) in names for a in stmt.names
        ):
            return True
        if isinstance(stmt, (ast.If, ast.Try)):  # e.g. guarded definitions
            inner = ast.unparse(stmt)
            if any(f"class {n}" in inner or f"def {n}" in inner for n in names):
                return True
    return False


def triton_kernels(source: str) -> list[str]:
    """Names of functions decorated with triton.jit (directly or under autotune/heuristics)."""
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if _dotted(target).split(".")[-1] == "jit":
                    out.append(node.name)
                    break
    return out
