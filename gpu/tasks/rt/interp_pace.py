"""Triton's interpreter spends a quarter of a launch finding the language's builtins again; this remembers them.

Before a launch, and again before every call of a `@triton.jit` helper inside a program (`tl.max`, `tl.sum`,
`tl.cdiv`, ... are such helpers), the interpreter swaps each builtin of `triton.language`, `triton.language.core`,
their tensor class and `math` for a host-side version. It finds them with `inspect.getmembers`, which reads and
sorts every attribute of each: a row softmax's 137 programs make 2,470 such scans (Triton 3.9). Which names hold
a builtin does not change, so they are listed once (when installed, before a worker's first launch) and each
later scan only looks at those names (still taking whatever each holds then, and still skipping one already
swapped: the interpreter's helper calls leave their swaps in place for good, with or without this). A second helper,
`_get_np_dtype`, rebuilds a 20-entry table on each of its thousands of calls; its answers are remembered per type.
The swaps themselves, their undoing and every result are the interpreter's own: `install` changes how fast the
interpreter works, never what it computes.
"""

from __future__ import annotations

import inspect
from typing import Any

MARK = "_ksearch_pace"


def _helpers() -> tuple[Any, Any, Any, Any] | None:
    """The interpreter's helpers this replaces and uses, where they are the ones it was written for (Triton 3.9's:
    older interpreters patch without a scope, and are left alone)."""
    import triton.language as tl
    from triton.runtime import interpreter

    patch_builtin = getattr(interpreter, "_patch_builtin", None)
    np_dtype = getattr(interpreter, "_get_np_dtype", None)
    patch_attr = getattr(interpreter, "_patch_attr", None)
    is_builtin = getattr(tl.core, "is_builtin", None)
    if (
        _params(patch_builtin) != ["pkg", "builder", "scope"]
        or _params(patch_attr) != ["obj", "name", "member", "builder", "scope"]
        or _params(np_dtype) != ["tt_dtype"]
        or not callable(is_builtin)
    ):
        return None
    return patch_builtin, np_dtype, patch_attr, is_builtin


def supported() -> bool:
    """Whether this Triton's interpreter is one `install` applies to (whether or not the interpreter is on)."""
    return _helpers() is not None


def install() -> bool:
    """Under TRITON_INTERPRET=1, make the interpreter's builtin scans and dtype lookups cheap; True when installed.

    Left alone (False) where the interpreter is off or its helpers are not the ones this was written against."""
    from triton import knobs

    if not knobs.runtime.interpret:
        return False
    import triton.language as tl
    from triton.runtime import interpreter

    if getattr(getattr(interpreter, "_patch_builtin", None), MARK, False):
        return True
    helpers = _helpers()
    if helpers is None:
        return False
    _, np_dtype, patch_attr, is_builtin = helpers

    names: dict[Any, tuple[str, ...]] = {}

    def builtin_names(pkg: Any) -> tuple[str, ...]:
        known = names.get(pkg)
        if known is None:
            known = names[pkg] = tuple(n for n, m in inspect.getmembers(pkg) if is_builtin(m))
        return known

    def fast_patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        for name in builtin_names(pkg):
            member = getattr(pkg, name, None)
            if is_builtin(member):  # not one swapped already
                patch_attr(pkg, name, member, builder, scope)

    dtypes: dict[Any, Any] = {}

    def fast_np_dtype(tt_dtype: Any) -> Any:
        try:
            return dtypes[tt_dtype]
        except KeyError:
            got = dtypes[tt_dtype] = np_dtype(tt_dtype)
            return got
        except TypeError:  # an unhashable type: asked anew
            return np_dtype(tt_dtype)

    # listed now, before any launch has swapped a builtin: a name is listed iff it holds a builtin
    for pkg in (tl, tl.core, tl.tensor, tl.math, getattr(tl.core, "tensor_descriptor_base", None)):
        if pkg is not None:
            builtin_names(pkg)
    setattr(fast_patch_builtin, MARK, True)
    interpreter._patch_builtin = fast_patch_builtin
    interpreter._get_np_dtype = fast_np_dtype
    return True


def _params(f: Any) -> list[str]:
    try:
        return list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return []
