"""A small price table for cost estimates, in US dollars per million tokens.

These are list prices for standard (non-cached, non-priority) use as published
by the providers when this table was written; they are estimates, not bills.
Batch APIs are priced at `BATCH_DISCOUNT` of the standard price by both
providers. A model is priced only when the table names it: exactly, as a
dated snapshot of a listed name (`claude-sonnet-4-5-20250929`,
`gpt-4.1-mini-2025-04-14`), or through `ALIASES`. Anything else, a variant
of a listed family included (`o3-mini` is not `o3`, `gpt-5-pro` is not
`gpt-5`), and every `compatible` endpoint, has no known price: estimates say
so instead of showing a wrong number or 0.
"""

from __future__ import annotations

import re

PRICES: dict[str, dict[str, tuple[float, float]]] = {
    # provider: {model: (input, output) USD per million tokens}
    "anthropic": {
        "claude-opus-4-1": (15.0, 75.0),
        "claude-opus-4-0": (15.0, 75.0),
        "claude-opus-4": (15.0, 75.0),
        "claude-opus-4-5": (5.0, 25.0),
        "claude-sonnet-4": (3.0, 15.0),
        "claude-sonnet-4-5": (3.0, 15.0),
        "claude-3-7-sonnet": (3.0, 15.0),
        "claude-haiku-4-5": (1.0, 5.0),
        "claude-3-5-haiku": (0.8, 4.0),
    },
    "openai": {
        "gpt-4.1": (2.0, 8.0),
        "gpt-4.1-mini": (0.4, 1.6),
        "gpt-4.1-nano": (0.1, 0.4),
        "gpt-4o": (2.5, 10.0),
        "gpt-4o-mini": (0.15, 0.6),
        "gpt-5": (1.25, 10.0),
        "gpt-5-mini": (0.25, 2.0),
        "gpt-5-nano": (0.05, 0.4),
        "o4-mini": (1.1, 4.4),
        "o3": (2.0, 8.0),
    },
    "compatible": {},
}
ALIASES: dict[str, dict[str, str]] = {
    # provider: {another name of a listed model: the listed name}
    "anthropic": {
        "claude-sonnet-4-0": "claude-sonnet-4",
        "claude-3-7-sonnet-latest": "claude-3-7-sonnet",
        "claude-3-5-haiku-latest": "claude-3-5-haiku",
    },
}
SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
"""A dated snapshot suffix: -20250929 (Anthropic), -2025-04-14 (OpenAI)."""
BATCH_DISCOUNT = 0.5
CHARS_PER_TOKEN = 4
"""Rough size of a token for estimates before a run (English text)."""


def price_for(provider: str, model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when unknown."""
    table = PRICES.get(provider, {})
    aliases = ALIASES.get(provider, {})
    for name in (model, SNAPSHOT.sub("", model)):
        name = aliases.get(name, name)
        if name in table:
            return table[name]
    return None


def cost_usd(provider: str, model: str, input_tokens: int | None, output_tokens: int | None,
             batch: bool = False) -> float | None:
    """The estimated cost of one call, or None when the price or token counts are unknown."""
    price = price_for(provider, model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    cost = (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
    return round(cost * (BATCH_DISCOUNT if batch else 1.0), 8)


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)
