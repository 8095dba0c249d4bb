"""A candidate's declared tunables: read them, and set them by rewriting their assignment lines.

A tunable candidate declares `TUNABLES = {"BLOCK_M": [32, 64, 128], "num_warps": [4, 8]}` and, for
each name, one module-level line `BLOCK_M = 64` (the current value) that its launch code uses.
Setting a value rewrites exactly that line, so the rest of the source is untouched.
"""

from __future__ import annotations

import ast
from typing import Any

from pydantic import BaseModel

from ksearch.worldmodel.errors import KsearchError


class TunableError(ValueError, KsearchError):
    """The candidate's TUNABLES block or its assignment lines are malformed, or a value is not allowed."""


class Tunable(BaseModel):
    name: str
    values: list[Any]
    current: Any
    line: int  # 1-based line of the `NAME = value` assignment


def read_tunables(source: str) -> dict[str, Tunable]:
    """Name -> Tunable for every entry of TUNABLES; {} when the source declares none."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TunableError(f"line {exc.lineno}: syntax error: {exc.msg}") from None
    assigns: dict[str, list[ast.Assign]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigns.setdefault(stmt.targets[0].id, []).append(stmt)
    if "TUNABLES" not in assigns:
        return {}
    try:
        table = ast.literal_eval(assigns["TUNABLES"][-1].value)
    except ValueError:
        raise TunableError("TUNABLES must be a literal {name: [allowed values]} mapping") from None
    if not isinstance(table, dict):
        raise TunableError("TUNABLES must be a {name: [allowed values]} mapping")
    out: dict[str, Tunable] = {}
    for name, values in table.items():
        if not isinstance(values, list | tuple) or not values:
            raise TunableError(f"TUNABLES[{name!r}] must be a non-empty list of allowed values")
        stmts = assigns.get(name, [])
        if len(stmts) != 1:
            found = "no" if not stmts else f"{len(stmts)}"
            raise TunableError(
                f"tunable {name!r} needs exactly one module-level `{name} = <value>` line; found {found}"
            )
        stmt = stmts[0]
        if stmt.lineno != stmt.end_lineno:
            raise TunableError(f"line {stmt.lineno}: the assignment of {name!r} must fit on one line")
        try:
            current = ast.literal_eval(stmt.value)
        except ValueError:
            raise TunableError(f"line {stmt.lineno}: {name} must be assigned a literal value") from None
        out[name] = Tunable(name=name, values=list(values), current=current, line=stmt.lineno)
    return out


def apply_tunables(source: str, settings: dict[str, Any]) -> str:
    """The source with each named tunable's line rewritten to the given value (which must be allowed)."""
    tunables = read_tunables(source)
    lines = source.splitlines(keepends=True)
    for name, value in settings.items():
        if name not in tunables:
            raise TunableError(
                f"{name!r} is not a declared tunable; declared: {', '.join(tunables) or 'none'}"
            )
        t = tunables[name]
        if value not in t.values:
            raise TunableError(f"{name}={value!r} is not allowed; allowed: {t.values}")
        old = lines[t.line - 1]
        comment = old[old.index("#") :].rstrip("\n") if "#" in old else ""
        ending = "\n" if old.endswith("\n") else ""
        lines[t.line - 1] = f"{name} = {value!r}" + (f"  {comment}" if comment else "") + ending
    return "".join(lines)
