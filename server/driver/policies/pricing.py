"""Token prices, to turn a call's usage into USD for the money budget.

List prices in USD per million tokens (input, output). A model matches an entry by its name, optionally
followed by a date or `-latest` (`claude-sonnet-4-5-20250929`); a provider prefix (`openai/gpt-4o` on
OpenRouter) is ignored. A model not listed is *unpriced*: its calls cost 0 here and the record says so,
rather than guessing a price from a similar name.
"""

from __future__ import annotations

import re

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    # Anthropic
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    # OpenAI
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
}

_SUFFIX = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)?")


def price_for(model: str, table: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """(input, output) USD per Mtok for `model`, or None when it is not listed."""
    table = PRICES_PER_MTOK if table is None else table
    name = model.rsplit("/", 1)[-1].lower()
    if name in table:
        return table[name]
    for key in sorted(table, key=len, reverse=True):
        if name.startswith(key) and _SUFFIX.fullmatch(name[len(key) :]):
            return table[key]
    return None


def cost_usd(tokens_in: int, tokens_out: int, price: tuple[float, float] | None) -> float:
    if price is None:
        return 0.0
    return (tokens_in * price[0] + tokens_out * price[1]) / 1e6
