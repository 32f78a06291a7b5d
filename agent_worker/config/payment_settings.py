"""Who refunds: the embedded provider, or Stripe's API (``AGENT_PAYMENTS``, ``STRIPE_API_KEY``,
``AGENT_STRIPE_*``)."""

from __future__ import annotations

from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern, loopback


class StripeSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_STRIPE_")

    payments: Literal["embedded", "stripe"] = Field(default="embedded", validation_alias="AGENT_PAYMENTS")
    """``embedded``: the business database's provider, with Stripe's rules. ``stripe``: Stripe's API, on each
    order's Stripe payment (``agent-worker orders add ... --stripe-payment``)."""
    api_key: SecretStr | None = Field(default=None, validation_alias="STRIPE_API_KEY")
    """``STRIPE_API_KEY`` (unprefixed, as Stripe's own tools read it): a secret key (``sk_``) or a restricted key
    (``rk_``) with write access to refunds and read access to charges and payment intents. Never logged."""
    api_base: str | None = None
    """Where Stripe's API is: Stripe's own (``https://api.stripe.com``) unless set, for a proxy or tests. Plain
    ``http://`` only to this machine: the API key travels in every request."""
    timeout_seconds: float = Field(default=8.0, gt=0)
    """One request to Stripe. The worker refuses to start unless it is below the attempt of every activity that
    calls Stripe (``lookup_order`` and ``find_refund``, 10 s; ``issue_refund``, 30 s:
    ``agent_worker.wiring.check_client_timeouts``), so a slow answer ends an attempt with a retryable error rather
    than an attempt Temporal gave up on."""

    @model_validator(mode="after")
    def _come_together(self) -> Self:
        """A worker that would refund through Stripe without a key, with a key that cannot refund, or with the key
        in clear over a network, does not start."""
        if self.payments != "stripe":
            return self
        if self.api_key is None:
            raise ValueError("AGENT_PAYMENTS=stripe needs STRIPE_API_KEY: a secret (sk_) or restricted (rk_) key")
        if not self.api_key.get_secret_value().startswith(("sk_", "rk_")):
            raise ValueError(
                "STRIPE_API_KEY must be a secret (sk_) or restricted (rk_) key; a publishable key (pk_) cannot refund"
            )
        base = urlsplit(self.api_base or "https://api.stripe.com")
        if base.scheme not in {"https", "http"} or not base.hostname:
            raise ValueError(f"AGENT_STRIPE_API_BASE must be an http(s) address, not {self.api_base!r}")
        if base.scheme == "http" and not loopback(base.hostname):
            raise ValueError(
                "AGENT_STRIPE_API_BASE over plain http would send STRIPE_API_KEY in clear to another machine: use https"
            )
        return self
