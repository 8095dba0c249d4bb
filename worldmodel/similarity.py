"""Near-duplicate detection for intent titles.

Two titles are near-duplicates when, after normalisation (case, punctuation, filler words), their
word sets overlap by a Jaccard index of at least 0.8, or every word of the new one (at least 4) is in the
other's (the same idea said shorter; the other way round, a longer title may add to an idea), or their
character sequences match with a difflib ratio of at least 0.9 — unless they differ in a number ("BLOCK_M=64"
and "BLOCK_M=128" are different ideas) or carry different concrete `params`.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JACCARD_MIN = 0.8
RATIO_MIN = 0.9
SUBSET_MIN = 4  # words of a new title all found in an existing one: fewer are too generic to judge

_FILLER = frozenset(
    {"a", "an", "the", "of", "to", "in", "into", "for", "with", "on", "and", "by", "using", "use"}
)
_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class TitleKey:
    """A title prepared once for many comparisons."""

    text: str  # normalised words joined by spaces
    words: frozenset[str]
    numbers: tuple[str, ...]
    params: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def of(cls, title: str, params: Mapping[str, Any] | None = None) -> TitleKey:
        tokens = _TOKEN.findall(title.lower())
        words = [t for t in tokens if t not in _FILLER]
        numbers = tuple(t for t in tokens if _NUMBER.fullmatch(t))  # in order: M=64,N=128 != M=128,N=64
        frozen = tuple(sorted((str(k), repr(v)) for k, v in (params or {}).items()))
        return cls(text=" ".join(words), words=frozenset(words), numbers=numbers, params=frozen)


@functools.lru_cache(maxsize=65_536)
def stored_key(title: str, params_json: str) -> TitleKey:
    """The key of a stored node (params as its JSON column), cached: siblings are compared again and again."""
    value = json.loads(params_json)
    return TitleKey.of(title, value if isinstance(value, dict) else {})


def near_duplicate(a: TitleKey, b: TitleKey) -> bool:
    if a.numbers != b.numbers or a.params != b.params:
        return False
    if a.text == b.text:
        return True
    union = a.words | b.words
    if union and len(a.words & b.words) / len(union) >= JACCARD_MIN:
        return True
    if len(a.words) >= SUBSET_MIN and a.words <= b.words:
        return True  # `a` (the new title) says nothing `b` does not: the same idea, said shorter
    matcher = difflib.SequenceMatcher(None, a.text, b.text, autojunk=False)
    # The quick upper bounds skip most unrelated pairs before the full comparison.
    return (
        matcher.real_quick_ratio() >= RATIO_MIN
        and matcher.quick_ratio() >= RATIO_MIN
        and matcher.ratio() >= RATIO_MIN
    )
