"""A candidate's declared tunables: read them, and set them in its source (a text transformation, no sandbox).

A tunable candidate declares `TUNABLES = {"BLOCK_M": [32, 64, 128], ...}` and one module-level line
`BLOCK_M = 64` per name (ksearch.gpu.tasks.tunables). These are the operations the faces use on them
(the offline tuner rewrites a base candidate with them, `ksearch task show` lists a seed's), so that no
face reaches into the sandbox's task code. A malformed declaration or a value that is not allowed raises
`TunableError` (in the KsearchError tree), whose message says what was wrong and what is accepted.
"""

from __future__ import annotations

from typing import Any

from ksearch.gpu.tasks import tunables as declared
from ksearch.gpu.tasks.tunables import TunableError
from ksearch.tools.schema import ToolModel

__all__ = ["CandidateTunables", "TunableError", "TunableInfo", "read_tunables", "set_tunables"]


class TunableInfo(ToolModel):
    """One entry of a candidate's TUNABLES."""

    values: list[Any]
    """The allowed values, as TUNABLES declares them."""
    current: Any
    """The value the candidate's `NAME = value` line sets now."""
    line: int
    """1-based line of that assignment in the source."""


class CandidateTunables(ToolModel):
    """A candidate's source and the tunables it declares."""

    source: str
    """The candidate's source (after `set_tunables`: with the new values written in)."""
    tunables: dict[str, TunableInfo]
    """Name -> its allowed and current values, in TUNABLES' order; empty when the source declares none."""

    def space(self) -> dict[str, list[Any]]:
        """Name -> allowed values: the space a tuner searches."""
        return {n: t.values for n, t in self.tunables.items()}

    def current(self) -> dict[str, Any]:
        """Name -> the value the source sets: what an attempt with this source measures."""
        return {n: t.current for n, t in self.tunables.items()}


def read_tunables(source: str) -> CandidateTunables:
    """The tunables `source` declares (declaring none is no error); TunableError when they are malformed."""
    found = declared.read_tunables(source)
    return CandidateTunables(
        source=source,
        tunables={n: TunableInfo(values=t.values, current=t.current, line=t.line) for n, t in found.items()},
    )


def set_tunables(source: str, settings: dict[str, Any]) -> CandidateTunables:
    """`source` with each named tunable's line rewritten to its new value, and the tunables it then declares.

    Every name must be declared and every value one of its allowed values, else TunableError (naming the
    declared tunables or the allowed values); the rest of the source is left as it was."""
    return read_tunables(declared.apply_tunables(source, settings))
