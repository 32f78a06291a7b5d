"""Which model the ``think`` activity asks, and how it asks Claude (``AGENT_MODEL_BACKEND``,
``AGENT_ANTHROPIC_*``, ``AGENT_SCRIPTED_THINK_SECONDS``).

The Anthropic connection is not here: the ``anthropic`` SDK reads its own ``ANTHROPIC_API_KEY`` (or
``ANTHROPIC_AUTH_TOKEN``, or a profile) and ``ANTHROPIC_BASE_URL`` (a gateway or proxy) as it documents them, so a
worker is pointed at Claude exactly as any other program using the SDK would be."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt
from pydantic_settings import SettingsConfigDict

from activities.pricing import DEFAULT_PRICES, ModelPrice
from activities.prompt import SUPPORT_POLICY
from agent_worker.config.concern import Concern

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The current Sonnet in the SDK's own model list (``anthropic.types.Model``): fast, capable and a fifth
of Opus's price per token, which suits a support agent's short tool-using turns."""


class ClaudeSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_ANTHROPIC_")

    backend: Literal["auto", "claude", "scripted"] = Field(default="auto", validation_alias="AGENT_MODEL_BACKEND")
    """``auto``: Claude when the ``anthropic`` SDK finds credentials (``ANTHROPIC_API_KEY`` and the like), otherwise
    the scripted stand-in; ``claude`` refuses to start without credentials instead of falling back."""
    scripted_think_seconds: float = Field(default=0.0, ge=0, validation_alias="AGENT_SCRIPTED_THINK_SECONDS")
    """How long the scripted model pretends to think: zero for tests and benchmarks."""
    model: str = DEFAULT_MODEL
    max_tokens: PositiveInt = 8192
    """Room for the answer and any thinking before it; a reply cut off here is handled, not fatal."""
    temperature: float | None = Field(default=None, ge=0, le=1)
    """Unset by default: the model's own default. Claude's 5-series models refuse (400) any other value."""
    timeout_seconds: PositiveFloat = 90.0
    """One HTTP request to the API. The worker refuses to start unless it is below the ``think`` activity's attempt
    (``agent_worker.wiring.check_client_timeouts``), so a slow call fails as a retryable timeout in the activity
    rather than as a timed-out attempt."""
    system_prompt: str = SUPPORT_POLICY
    prices: dict[str, ModelPrice] = DEFAULT_PRICES
    """Dollars per million tokens per model, for the cost estimate in the ``usage`` query and the outcome."""
