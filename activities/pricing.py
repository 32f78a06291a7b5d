"""What a model call costs: a per-model price table, and the estimate the ``think`` activity records.

The cost is estimated where the call is made, by the worker that knows the prices (from its settings),
and recorded with the call's tokens in the run's history; the workflow only adds numbers up. A workflow
that priced tokens itself would need the price table inside deterministic code, and a price change would
then change what an old run reports on replay.

A call is priced by the model its response names, and the model's budget per ticket
(``model.max_cost_usd_per_ticket``) is held to these estimates. So a model the table does not know is priced at
the dearest one it does, token kind by token kind, never at nothing: a gateway that answers with a renamed model
(``bedrock/sonnet``, a deployment's alias) would otherwise switch the budget off without a word. The operator is
told, once per model name and process, to add the name to ``AGENT_ANTHROPIC_PRICES``.
"""

from __future__ import annotations

import structlog
from pydantic import BaseModel, ConfigDict, NonNegativeFloat

from activities.contracts.conversation import Usage

PER_MILLION = 1_000_000
log = structlog.get_logger(__name__)


class ModelPrice(BaseModel):
    """US dollars per million tokens, as on Anthropic's pricing page."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: NonNegativeFloat
    output: NonNegativeFloat
    cache_write: NonNegativeFloat
    """A 5-minute cache write (the TTL this agent asks for): 1.25 times the input price."""
    cache_read: NonNegativeFloat

    def cost(self, usage: Usage) -> float:
        dollars = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        )
        return dollars / PER_MILLION


DEFAULT_PRICES: dict[str, ModelPrice] = {
    # Published list prices as of November 2026 (standard tier, prompts up to Haiku 5.5's 100k-token band).
    # Override with AGENT_ANTHROPIC_PRICES='{"model": {"input": ..., ...}}' when they change.
    "claude-opus-5-5": ModelPrice(input=4.0, output=20.0, cache_write=5.0, cache_read=0.20),
    "claude-sonnet-5-5": ModelPrice(input=2.0, output=10.0, cache_write=2.50, cache_read=0.10),
    "claude-haiku-5-5": ModelPrice(input=0.10, output=0.50, cache_write=0.125, cache_read=0.01),
    "claude-opus-5": ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
    "claude-sonnet-5": ModelPrice(input=2.0, output=10.0, cache_write=2.50, cache_read=0.20),
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
}


def priced(usage: Usage, model: str, prices: dict[str, ModelPrice]) -> Usage:
    """``usage`` with its estimated cost filled in, at ``model``'s price, or for a model the table does not know,
    at the dearest price it holds (``dearest``); unchanged (cost 0) only if the table is empty.

    The API answers with the model's full id; a table keyed by an alias (``claude-haiku-4-5``) still
    prices a dated id (``claude-haiku-4-5-20251001``), by the longest alias that is a prefix of it."""
    price = price_of(model, prices)
    if price is None:
        price = dearest(prices)
        if model not in _UNPRICED:
            _UNPRICED.add(model)
            log.warning(
                "no price for this model: its calls are priced at the dearest known model's, per token kind; "
                "add it to AGENT_ANTHROPIC_PRICES",
                model=model,
                priced_as=None if price is None else price.model_dump(),
            )
    if price is None:
        return usage
    return usage.model_copy(update={"cost_usd": price.cost(usage)})


def price_of(model: str, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The table's price for ``model``: its own, else the longest alias it is a dated id of; None if neither."""
    price = prices.get(model)
    if price is None:
        aliases = sorted((name for name in prices if model.startswith(f"{name}-")), key=len, reverse=True)
        price = prices[aliases[0]] if aliases else None
    return price


def dearest(prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The highest price of each token kind in the table, which no known model's call costs more than; None for an
    empty table."""
    if not prices:
        return None
    kinds = ModelPrice.model_fields
    return ModelPrice(**{kind: max(getattr(price, kind) for price in prices.values()) for kind in kinds})


_UNPRICED: set[str] = set()
"""The model names this process warned about: once each, however many calls name them."""
