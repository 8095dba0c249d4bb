"""Token prices, to turn a call's usage into USD for the money budget.

List prices in USD per million tokens: input, output, and the two prompt-cache rates (input written to the
cache, input read from it). A model matches an entry by its name, optionally followed by a date or `-latest`
(`claude-sonnet-4-5-20250929`); a provider prefix (`openai/gpt-4o` on OpenRouter) is ignored. A model not listed
is *unpriced*: its calls cost 0 here and the record says so, rather than guessing a price from a similar name.

Where the rates come from:
- Anthropic (https://docs.anthropic.com/en/docs/about-claude/pricing, "Prompt caching"): a cache write with the
  default 5-minute lifetime costs 1.25x the model's base input price, a cache read 0.1x, for every model; the
  policy asks for that lifetime, so the multipliers below apply.
- OpenAI (https://platform.openai.com/docs/pricing, the "Cached input" column): caching is automatic and writes
  are not charged extra (a write costs the base input price); a read costs the model's listed cached-input price.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Price(NamedTuple):
    """USD per million tokens."""

    input: float  # input the provider read neither from nor into its prompt cache
    output: float
    cache_write: float  # input written to the prompt cache
    cache_read: float  # input read from it


ANTHROPIC_CACHE_WRITE = 1.25  # x the base input price, for a 5-minute cache entry
ANTHROPIC_CACHE_READ = 0.1


def anthropic(input_rate: float, output_rate: float) -> Price:
    return Price(
        input_rate, output_rate, input_rate * ANTHROPIC_CACHE_WRITE, input_rate * ANTHROPIC_CACHE_READ
    )


def openai(input_rate: float, output_rate: float, cached_input: float) -> Price:
    return Price(input_rate, output_rate, input_rate, cached_input)


PRICES_PER_MTOK: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-5": anthropic(5.0, 25.0),
    "claude-opus-4-1": anthropic(15.0, 75.0),
    "claude-opus-4": anthropic(15.0, 75.0),
    "claude-sonnet-4-5": anthropic(3.0, 15.0),
    "claude-sonnet-4": anthropic(3.0, 15.0),
    "claude-3-7-sonnet": anthropic(3.0, 15.0),
    "claude-haiku-4-5": anthropic(1.0, 5.0),
    "claude-3-5-haiku": anthropic(0.8, 4.0),
    # OpenAI
    "gpt-4o": openai(2.5, 10.0, 1.25),
    "gpt-4o-mini": openai(0.15, 0.6, 0.075),
    "gpt-4.1": openai(2.0, 8.0, 0.5),
    "gpt-4.1-mini": openai(0.4, 1.6, 0.1),
    "gpt-5": openai(1.25, 10.0, 0.125),
    "gpt-5-mini": openai(0.25, 2.0, 0.025),
}

_SUFFIX = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)?")


def price_for(model: str, table: dict[str, Price] | None = None) -> Price | None:
    """The price of `model`, or None when it is not listed."""
    table = PRICES_PER_MTOK if table is None else table
    name = model.rsplit("/", 1)[-1].lower()
    if name in table:
        return table[name]
    for key in sorted(table, key=len, reverse=True):
        if name.startswith(key) and _SUFFIX.fullmatch(name[len(key) :]):
            return table[key]
    return None


def as_price(
    price: Price | tuple[float, float] | None, *, cache_write: float = 1.25, cache_read: float = 1.0
) -> Price | None:
    """A price given as (input, output) alone takes its cache rates as multiples of its input rate: by default
    the most any provider listed here charges (writes at 1.25x, reads at the full rate), so that a spend
    estimated with them is never understated; a provider with known multipliers passes its own."""
    if price is None or isinstance(price, Price):
        return price
    inp, out = price
    return Price(inp, out, inp * cache_write, inp * cache_read)


class Cost(NamedTuple):
    """One call's dollars, by what they paid for."""

    total: float
    cache_read: float
    cache_write: float


def call_cost(
    tokens_in: int,
    tokens_out: int,
    price: Price | None,
    *,
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> Cost:
    """`tokens_in` counts every input token, cached or not; `cache_read` and `cache_write` (None: the provider
    did not say) are the parts of it billed at the cache rates, the rest is billed at the input rate."""
    if price is None:
        return Cost(0.0, 0.0, 0.0)
    read, write = cache_read or 0, cache_write or 0
    uncached = max(0, tokens_in - read - write)
    read_usd, write_usd = read * price.cache_read / 1e6, write * price.cache_write / 1e6
    total = (uncached * price.input + tokens_out * price.output) / 1e6 + read_usd + write_usd
    return Cost(total, read_usd, write_usd)
