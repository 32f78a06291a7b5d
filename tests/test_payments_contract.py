"""What every payment provider behind the ``Payments`` port must do, tried through the port alone.

A provider comes with one thing besides the port: a way to charge an order, so there is something to refund
(the embedded provider's charges are the shop's orders; Stripe's are payment intents on the local fake of its
API, ``tests/support/fake_stripe.py``, which the real SDK talks HTTP to). The tests use nothing else, so
another implementation passes or fails the same module by adding itself to ``provider``'s parameters. What
only one provider does, or says in its own words, is in ``test_payment_provider.py`` (the embedded one: keys
expiring on a turned clock, the guard switched off, connections racing) and ``test_stripe.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from activities.business import Business
from activities.business.payments import Payments
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    OrderNotFoundError,
    RefundExceedsChargeError,
)
from activities.contracts.world import Order, RefundRequest
from tests.support.fake_stripe import FakeStripe, stripe_business


class Provider(Protocol):
    @property
    def payments(self) -> Payments: ...

    def charge(self, amount_cents: int) -> str:
        """Charge a new order ``amount_cents`` and return its id."""
        ...


@dataclass
class Embedded:
    """The embedded provider, whose charges are the orders of the shop it shares a database with."""

    store: Business

    @property
    def payments(self) -> Payments:
        return self.store.payments

    def charge(self, amount_cents: int) -> str:
        order_id = f"C-{uuid.uuid4().hex[:8]}"
        self.store.orders.add(Order(order_id=order_id, amount_cents=amount_cents, customer_email="c@example.com"))
        return order_id


@dataclass
class Stripe:
    """Stripe's API (a local fake of it, through the real SDK), whose charges are payment intents made on it."""

    store: Business
    account: FakeStripe

    @property
    def payments(self) -> Payments:
        return self.store.payments

    def charge(self, amount_cents: int) -> str:
        order_id = f"C-{uuid.uuid4().hex[:8]}"
        payment = self.account.charge(amount_cents)
        self.store.orders.add(
            Order(order_id=order_id, amount_cents=amount_cents, customer_email="c@example.com"), stripe_payment=payment
        )
        return order_id


@pytest.fixture(params=["embedded-sqlite", "embedded-postgresql", "stripe"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Provider]:
    if request.param == "stripe":
        with FakeStripe().running() as account:
            store = stripe_business(account, tmp_path).create(seed_demo_orders=False)
            yield Stripe(store, account)
            store.close()
        return
    if request.param == "embedded-postgresql":
        store = Business.at(request.getfixturevalue("postgres_url"))
    else:
        store = Business.sqlite(tmp_path / "business.sqlite3")
    yield Embedded(store.create(seed_demo_orders=False))
    store.close()


def refund(order_id: str, amount: int, key: str | None) -> RefundRequest:
    return RefundRequest(order_id=order_id, amount_cents=amount, idempotency_key=key)


def test_a_repeated_request_under_its_key_pays_nothing_and_returns_the_first_receipt(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    first = payments.refund(refund(order, 4900, "refund:T-1/1"))
    again = payments.refund(refund(order, 4900, "refund:T-1/1"))

    assert not first.replayed
    assert again == first.model_copy(update={"replayed": True})
    assert payments.charge(order).refunded_cents == 4900


def test_a_key_used_once_refuses_another_amount_or_another_order(provider: Provider) -> None:
    payments, order, other = provider.payments, provider.charge(4900), provider.charge(4900)
    payments.refund(refund(order, 1000, "refund:T-1/1"))

    with pytest.raises(IdempotencyConflictError):
        payments.refund(refund(order, 2000, "refund:T-1/1"))
    with pytest.raises(IdempotencyConflictError):
        payments.refund(refund(other, 1000, "refund:T-1/1"))
    assert (payments.charge(order).refunded_cents, payments.charge(other).refunded_cents) == (1000, 0)


def test_requests_without_a_key_each_pay(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    first = payments.refund(refund(order, 1000, None))
    second = payments.refund(refund(order, 1000, None))

    assert first.refund_id != second.refund_id
    assert not second.replayed
    assert payments.charge(order).refunded_cents == 2000


def test_a_refund_above_what_is_left_of_the_charge_is_refused_and_what_is_left_still_pays(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    payments.refund(refund(order, 4000, "a"))

    with pytest.raises(RefundExceedsChargeError):
        payments.refund(refund(order, 1000, "b"))
    assert payments.refund(refund(order, 900, "c")).amount_cents == 900
    assert payments.charge(order).refunded_cents == 4900


def test_a_refund_of_an_order_never_charged_is_refused(provider: Provider) -> None:
    with pytest.raises(OrderNotFoundError):
        provider.payments.refund(refund("Z-404", 100, "refund:Z-404/1"))


def test_the_charge_and_its_refunded_total_are_per_order_and_count_every_key(provider: Provider) -> None:
    payments, order, other = provider.payments, provider.charge(4900), provider.charge(1500)
    assert payments.charge(order).refunded_cents == 0

    payments.refund(refund(order, 1000, "refund:T-1/1"))
    payments.refund(refund(order, 500, "refund:T-2/1"))
    payments.refund(refund(other, 1500, None))

    assert (payments.charge(order).refunded_cents, payments.charge(other).refunded_cents) == (1500, 1500)
    assert (payments.charge(order).amount_cents, payments.charge(other).amount_cents) == (4900, 1500)


def test_what_was_paid_under_a_key_can_be_found_and_a_key_never_used_finds_nothing(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    paid = payments.refund(refund(order, 4900, "refund:T-1/1"))

    assert payments.refund_by_key("refund:T-1/1") == paid.model_copy(update={"replayed": True})
    assert payments.refund_by_key("refund:T-never/1") is None


def test_a_key_settled_as_unpaid_refuses_the_late_attempt_and_the_next_key_pays(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    assert payments.settle_refund("refund:T-1/1") is None

    with pytest.raises(KeyClosedError):
        payments.refund(refund(order, 4900, "refund:T-1/1"))
    assert payments.settle_refund("refund:T-1/1") is None  # asked again, the answer stands
    assert payments.refund_by_key("refund:T-1/1") is None
    assert payments.charge(order).refunded_cents == 0
    assert payments.refund(refund(order, 4900, "refund:T-1/2")).amount_cents == 4900


def test_settling_a_key_that_paid_returns_the_refund_and_a_retry_still_gets_it(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    paid = payments.refund(refund(order, 4900, "refund:T-1/1"))

    assert payments.settle_refund("refund:T-1/1") == paid.model_copy(update={"replayed": True})
    assert payments.refund(refund(order, 4900, "refund:T-1/1")) == paid.model_copy(update={"replayed": True})
    assert payments.charge(order).refunded_cents == 4900
