"""A tiny HTML builder that escapes by default.

Candidate code, model notes and titles are hostile input: every string goes through `esc` unless it
is `Markup` built here. Fragments are composed with `h()` so forgetting to escape takes effort.
"""

from __future__ import annotations

import html
from collections.abc import Iterable


class Markup(str):
    """A string that is already safe HTML."""

    __slots__ = ()


def esc(value: object) -> Markup:
    """Escape any value for element text or a quoted attribute."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def _children(items: Iterable[object]) -> str:
    out: list[str] = []
    for c in items:
        if c is None or c is False:
            continue
        if isinstance(c, str | int | float):
            out.append(esc(c))
        else:
            out.append(_children(c))  # type: ignore[arg-type]
    return "".join(out)


def h(tag: str, attrs: dict[str, object] | None = None, *children: object) -> Markup:
    """`<tag attrs>children</tag>`. Attributes with None/False values are left out; True → bare name."""
    parts = [tag]
    for k, v in (attrs or {}).items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        parts.append(name if v is True else f'{name}="{esc(v)}"')
    return Markup(f"<{' '.join(parts)}>{_children(children)}</{tag}>")


def join(items: Iterable[object], sep: str = "") -> Markup:
    """Concatenate fragments (strings among them are escaped)."""
    return Markup(esc(sep).join(Markup(_children([i])) for i in items))
