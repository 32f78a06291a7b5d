"""Refunds against Stripe's real API, in test mode. Skipped unless STRIPE_API_KEY is a test key (``sk_test_`` or
``rk_test_``): a live key is never used by the suite, whatever the environment holds.

Run it with ``STRIPE_API_KEY=sk_test_... ./dev test tests/test_stripe_live.py``. It checks what the local fake
cannot: that Stripe itself answers a repeated key with the first refund and ``Idempotent-Replayed``, refuses the
key for another amount, lists the refund by its metadata, and reports the charge's refunded total as the adapter
reads it. Each run makes one test-mode payment of 49.00 with Stripe's test card and refunds it.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from activities.business.refusals import IdempotencyConflictError
from activities.business.stripe_payments import StripePayments
from activities.contracts.world import Order, RefundRequest
from agent_worker import wiring
from agent_worker.config import Settings
from agent_worker.config.payment_settings import StripeSettings

KEY = os.environ.get("STRIPE_API_KEY", "")
pytestmark = pytest.mark.skipif(
    not KEY.startswith(("sk_test_", "rk_test_")),
    reason="talks to Stripe's API in test mode: set STRIPE_API_KEY to a test key (sk_test_...) to run it",
)


def test_stripe_replays_a_repeated_key_refuses_it_for_another_amount_and_finds_the_refund_by_its_key(
    tmp_path: Path,
) -> None:
    settings = Settings(db_path=tmp_path / "business.sqlite3", stripe=StripeSettings(payments="stripe", api_key=KEY))
    client = wiring.stripe_client(settings)
    assert client is not None
    intent = client.v1.payment_intents.create(
        {
            "amount": 4900,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "automatic_payment_methods": {"enabled": True, "allow_redirects": "never"},
        }
    )
    store = wiring.business(settings).create(seed_demo_orders=False)
    store.orders.add(Order(order_id="L-1", amount_cents=4900, customer_email="c@example.com"), stripe_payment=intent.id)
    payments = store.payments
    assert isinstance(payments, StripePayments)
    key = f"refund:live-test:{uuid.uuid4()}/L-1/1"
    request = RefundRequest(order_id="L-1", amount_cents=1000, idempotency_key=key)

    first = payments.refund(request)
    again = payments.refund(request)

    assert not first.replayed
    assert again == first.model_copy(update={"replayed": True})
    assert first.provider_refund_id is not None
    assert first.provider_refund_id.startswith("re_")
    with pytest.raises(IdempotencyConflictError):
        payments.refund(request.model_copy(update={"amount_cents": 2000}))
    assert payments.settle_refund(key) == again
    charge = payments.charge("L-1")
    assert (charge.amount_cents, charge.refunded_cents) == (4900, 1000)
