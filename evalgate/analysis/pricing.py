"""Per-model token prices from the package's data file; cost 'unknown', never $0, when missing."""

import json
import re
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float
    output: float
    cache_write: float
    cache_read: float
    # The shortest prompt prefix the provider caches (shorter ones are sent at input price).
    cache_min_tokens: int = 0


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
        )


@cache
def price_table() -> dict[str, Price]:
    text = resources.files("evalgate").joinpath("data/prices.json").read_text(encoding="utf-8")
    return {name: Price(**p) for name, p in json.loads(text)["models"].items()}


# A snapshot's suffix: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06, claude-3-5-haiku-latest.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d\d-\d\d|latest)$")


def price_for(model: str) -> Price | None:
    """The price of a model id; dated ids (claude-sonnet-4-5-20250929) match their family.

    Only a date (or ``latest``) may follow the family's name: claude-opus-4-6 is another model
    than claude-opus-4, and its cost is unknown until the table has it, never a guess.
    """
    table = price_table()
    if model in table:
        return table[model]
    family = _SNAPSHOT.sub("", model)
    return table.get(family) if family != model else None


# Message Batches API calls cost half the price of the same calls made one by one.
BATCH_DISCOUNT = 0.5


def cost(usage: Usage, model: str, *, batch: bool = False) -> float | None:
    price = price_for(model)
    if price is None:
        return None
    full = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    ) / 1_000_000
    return full * BATCH_DISCOUNT if batch else full


def uncached_cost(usage: Usage, model: str, *, batch: bool = False) -> float | None:
    """What the same calls would have cost with no prompt caching (every token at input price)."""
    whole = Usage(
        input_tokens=usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens,
        output_tokens=usage.output_tokens,
    )
    return cost(whole, model, batch=batch)
