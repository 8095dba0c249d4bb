"""Kernel names as the kernel audit compares them.

The profiler names a launched kernel as its compiler wrote it: Triton's `softmax_kernel`, a demangled C++
signature `void ns::row_sum<float, 4>(float const*, int)`, or an Itanium-mangled `_Z7row_sumPKfi`. A candidate's
own kernels are known by their identifiers. Both sides are reduced to that identifier and compared exactly: a
substring test would credit a candidate whose kernel is called `kernel` with PyTorch's `elementwise_kernel`.
"""

from __future__ import annotations

import re

_ANON = re.compile(r"\((?:anonymous namespace|anonymous)\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _strip_templates(name: str) -> str:
    """Drop every balanced `<...>` (template arguments), keeping what is outside them."""
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _demangle_itanium(name: str) -> str | None:
    """The innermost identifier of an Itanium-mangled function name (`_Z7row_sumPfi`, `_ZN2ns3fooEv`), or
    None when it does not read as one."""
    i = 2
    if name.startswith("L", i):
        i += 1
    nested = name.startswith("N", i)
    if nested:
        i += 1
        while i < len(name) and name[i] in "rVK":  # cv-qualifiers of a nested name
            i += 1
    last: str | None = None
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        length = int(name[i:j])
        if length <= 0 or j + length > len(name):
            return None
        last = name[j : j + length]
        i = j + length
        if not nested:
            break
        if name.startswith("I", i):  # template arguments of this component: the identifier is already read
            break
    return last


def kernel_base_name(name: str) -> str:
    """The kernel function's own identifier in a name as the profiler, NVRTC or the source gives it."""
    name = name.strip()
    if name.startswith("_Z"):
        return _demangle_itanium(name) or name
    text = _strip_templates(_ANON.sub("anon", name))
    paren = text.find("(")
    if paren >= 0:
        text = text[:paren]  # the parameter list
    text = text.strip().rsplit("::", 1)[-1]
    idents = _IDENT.findall(text.rsplit(None, 1)[-1]) if text else []
    return idents[-1] if idents else name


def ran_own_kernel(launched: list[str], own: set[str]) -> bool:
    """Whether any launched kernel is, by exact identifier, one of the candidate's own."""
    own_bases = {kernel_base_name(o) for o in own}
    return any(kernel_base_name(k) in own_bases for k in launched)
