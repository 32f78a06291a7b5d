"""What every payment provider behind the ``Payments`` port must do, tried through the port alone.

A provider comes with one thing besides the port: a way to charge an order, so there is something to refund
(the embedded provider's charges are the shop's orders; Stripe's are payment intents on the local fake of its
API, ``tests/support/fake_stripe.py``, which the real SDK talks HTTP to). The tests use nothing else, so
another implementation passes or fails the same module by adding itself to ``provider``'s parameters. What
only one provider does, or says in its own words, is in ``test_payment_provider.py`` (the embedded one: keys
expiring on a turned clock, the guard switched off, connections racing) and ``test_stripe.py``.

The limits across tickets are part of the contract: whichever provider pays, a refund without a person is
counted in the worker's own database, and the provider's clock (the database's, which the test turns) is what
the 24 hours are measured on.

So is store credit: it is issued from the worker's own database whichever provider refunds, and what was paid
back against an order is refunds and credits together, never more than the charge, whichever came first and
however many tickets pay at once (``activities.business.paid_back``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import pytest
from pydantic import ValidationError

from activities.business import Business
from activities.business.credits import StoreCredits
from activities.business.payments import Payments
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    NeedsApprovalError,
    OrderNotFoundError,
    PolicyChangedError,
    RefundExceedsChargeError,
)
from activities.contracts.policy import Limits
from activities.contracts.world import Order, RefundReceipt, RefundRequest
from tests.support.fake_stripe import FakeStripe, stripe_business


class Provider(Protocol):
    store: Business
    """The worker's business database beside the provider: what its ledgers booked, for the assertions."""

    @property
    def payments(self) -> Payments: ...

    @property
    def credits(self) -> StoreCredits:
        """The store credit ledger beside the provider, as a worker refunding through it builds it."""
        ...

    def charge(self, amount_cents: int, customer: str = "c@example.com") -> str:
        """Charge ``customer`` for a new order of ``amount_cents`` and return its id."""
        ...


class Clock:
    """The business database's clock, which a test turns."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Embedded:
    """The embedded provider, whose charges are the orders of the shop it shares a database with."""

    store: Business

    @property
    def payments(self) -> Payments:
        return self.store.payments

    @property
    def credits(self) -> StoreCredits:
        return self.store.credits

    def charge(self, amount_cents: int, customer: str = "c@example.com") -> str:
        order_id = f"C-{uuid.uuid4().hex[:8]}"
        self.store.orders.add(Order(order_id=order_id, amount_cents=amount_cents, customer_email=customer))
        return order_id


@dataclass
class Stripe:
    """Stripe's API (a local fake of it, through the real SDK), whose charges are payment intents made on it."""

    store: Business
    account: FakeStripe

    @property
    def payments(self) -> Payments:
        return self.store.payments

    @property
    def credits(self) -> StoreCredits:
        return self.store.credits

    def charge(self, amount_cents: int, customer: str = "c@example.com") -> str:
        order_id = f"C-{uuid.uuid4().hex[:8]}"
        payment = self.account.charge(amount_cents)
        self.store.orders.add(
            Order(order_id=order_id, amount_cents=amount_cents, customer_email=customer), stripe_payment=payment
        )
        return order_id


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["embedded-sqlite", "embedded-postgresql", "stripe-sqlite", "stripe-postgresql"])
def provider(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Provider]:
    url = request.getfixturevalue("postgres_url") if request.param.endswith("postgresql") else None
    if request.param.startswith("stripe"):
        with FakeStripe().running() as account:
            store = stripe_business(account, tmp_path, {"database_url": url} if url else None)
            store.database.clock = clock  # a worker's settings name no clock; the database's is the one counted on
            yield Stripe(store.create(seed_demo_orders=False), account)
            store.close()
        return
    store = Business.at(url or f"sqlite:///{tmp_path / 'business.sqlite3'}", clock=clock)
    yield Embedded(store.create(seed_demo_orders=False))
    store.close()


def refund(order_id: str, amount: int, key: str) -> RefundRequest:
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


def test_a_request_without_a_key_is_refused_before_any_provider_sees_it(provider: Provider) -> None:
    """A keyless refund is the one a retried activity pays twice: the contract has no such request, so no
    provider is ever asked for one, whatever the caller sends."""
    payments, order = provider.payments, provider.charge(4900)
    for keyless in ({}, {"idempotency_key": None}):
        with pytest.raises(ValidationError, match="idempotency_key"):
            RefundRequest.model_validate({"order_id": order, "amount_cents": 1000, **keyless})
    assert payments.charge(order).refunded_cents == 0


def test_two_keys_are_two_refunds_even_for_the_same_order_and_amount(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    first = payments.refund(refund(order, 1000, "refund:T-1/1"))
    second = payments.refund(refund(order, 1000, "refund:T-2/1"))

    assert first.refund_id != second.refund_id
    assert not second.replayed
    assert payments.charge(order).refunded_cents == 2000


def test_a_payout_for_a_ticket_writes_its_audit_entry_as_it_is_booked_once_per_key(provider: Provider) -> None:
    """The ledger and the ticket's trail cannot disagree about a payment: the booking writes the entry in its own
    transaction, a repeat under the key writes nothing more, and a refused payout writes nothing at all."""
    order, other = provider.charge(4900), provider.charge(1000)
    request = refund(order, 4900, "refund:ticket:T-1/1").model_copy(update={"ticket_id": "T-1"})
    first = provider.payments.refund(request)
    provider.payments.refund(request)  # the activity retried
    with pytest.raises(RefundExceedsChargeError):
        provider.payments.refund(refund(order, 100, "refund:ticket:T-1/2").model_copy(update={"ticket_id": "T-1"}))
    credit = refund(other, 1000, "credit:ticket:T-1/1").model_copy(update={"ticket_id": "T-1"})
    voucher = provider.credits.issue(credit)

    assert provider.store.audit.entries("T-1") == [
        f"refund #{first.refund_id} of USD 49.00 on order {order} made under key refund:ticket:T-1/1",
        f"store credit #{voucher.refund_id} of USD 10.00 on order {other} made under key credit:ticket:T-1/1",
    ]
    provider.payments.refund(refund(provider.charge(500), 500, "refund:script/1"))  # no ticket: no trail to write
    assert len(provider.store.audit.entries()) == 2


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
    payments.refund(refund(other, 1500, "credit-desk:7"))

    assert (payments.charge(order).refunded_cents, payments.charge(other).refunded_cents) == (1500, 1500)
    assert (payments.charge(order).amount_cents, payments.charge(other).amount_cents) == (4900, 1500)


def test_a_key_that_paid_settles_to_its_refund_and_a_key_never_used_settles_to_nothing(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    paid = payments.refund(refund(order, 4900, "refund:T-1/1"))

    assert payments.settle_refund("refund:T-1/1") == paid.model_copy(update={"replayed": True})
    assert payments.settle_refund("refund:T-never/1") is None


def test_a_key_settled_as_unpaid_refuses_the_late_attempt_and_the_next_key_pays(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    assert payments.settle_refund("refund:T-1/1") is None

    with pytest.raises(KeyClosedError):
        payments.refund(refund(order, 4900, "refund:T-1/1"))
    assert payments.settle_refund("refund:T-1/1") is None  # asked again, the answer stands
    assert payments.charge(order).refunded_cents == 0
    assert payments.refund(refund(order, 4900, "refund:T-1/2")).amount_cents == 4900


def test_settling_a_key_that_paid_returns_the_refund_and_a_retry_still_gets_it(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4900)
    paid = payments.refund(refund(order, 4900, "refund:T-1/1"))

    assert payments.settle_refund("refund:T-1/1") == paid.model_copy(update={"replayed": True})
    assert payments.refund(refund(order, 4900, "refund:T-1/1")) == paid.model_copy(update={"replayed": True})
    assert payments.charge(order).refunded_cents == 4900


# --- refunds and store credit: one order, one charge, every kind of payout counted together ---------------------


def credit(order_id: str, amount: int, key: str | None) -> RefundRequest:
    return RefundRequest(order_id=order_id, amount_cents=amount, idempotency_key=key)


def paid_back(provider: Provider, order_id: str) -> tuple[int, int]:
    """What was refunded and what was credited of the order, each as its own ledger lists it."""
    refunded = sum(r.amount_cents for r in provider.store.payments.refunds(order_id))
    credited = sum(c.amount_cents for c in provider.store.credits.credits(order_id))
    return refunded, credited


def test_after_store_credit_of_the_whole_order_a_refund_of_it_is_refused_and_nothing_is_paid_twice(
    provider: Provider,
) -> None:
    """Issue #33's first defect: a credit of 15.00 on a 15.00 order, then a refund of 15.00 in another ticket."""
    order = provider.charge(1500)
    provider.credits.issue(credit(order, 1500, "store_credit:ticket:T-1/o/1"))

    with pytest.raises(RefundExceedsChargeError) as refused:
        provider.payments.refund(refund(order, 1500, "refund:ticket:T-2/o/1"))

    assert str(refused.value) == (
        f"Refusing to refund USD 15.00 on {order}: USD 15.00 of USD 15.00 is already paid back (store credit USD 15.00)"
    )
    assert paid_back(provider, order) == (0, 1500)
    assert provider.payments.charge(order).refunded_cents == 1500


def test_after_a_refund_of_the_whole_order_store_credit_of_it_is_refused(provider: Provider) -> None:
    order = provider.charge(1500)
    provider.payments.refund(refund(order, 1500, "refund:ticket:T-1/o/1"))

    with pytest.raises(RefundExceedsChargeError, match=r"is already paid back \(refunds USD 15\.00\)$"):
        provider.credits.issue(credit(order, 1500, "store_credit:ticket:T-2/o/1"))

    assert paid_back(provider, order) == (1500, 0)
    assert provider.payments.charge(order).refunded_cents == 1500


def test_refunds_and_credits_in_turns_pay_back_exactly_the_charge_and_not_a_cent_more(provider: Provider) -> None:
    payments, vouchers, order = provider.payments, provider.credits, provider.charge(4900)
    vouchers.issue(credit(order, 1000, "c1"))
    payments.refund(refund(order, 3000, "r1"))

    with pytest.raises(
        RefundExceedsChargeError, match=r"USD 40\.00 of USD 49\.00 .* \(refunds USD 30\.00, store credit USD"
    ):
        payments.refund(refund(order, 1000, "r2"))
    with pytest.raises(RefundExceedsChargeError):
        vouchers.issue(credit(order, 901, "c2"))
    assert payments.refund(refund(order, 400, "r3")).amount_cents == 400
    assert vouchers.issue(credit(order, 500, "c3")).amount_cents == 500
    with pytest.raises(RefundExceedsChargeError):
        payments.refund(refund(order, 1, "r4"))
    with pytest.raises(RefundExceedsChargeError):
        vouchers.issue(credit(order, 1, "c4"))

    assert paid_back(provider, order) == (3400, 1500)
    assert payments.charge(order).refunded_cents == 4900


def test_the_charge_reports_refunds_and_store_credit_together_per_order(provider: Provider) -> None:
    """What ``lookup_order`` tells the workflow as ``refunded_cents``: a further payment of an order paid back
    before, in any way, needs a person."""
    payments, order, other = provider.payments, provider.charge(4900), provider.charge(1500)
    provider.credits.issue(credit(order, 1000, "c1"))
    assert (payments.charge(order).refunded_cents, payments.charge(other).refunded_cents) == (1000, 0)

    payments.refund(refund(order, 500, "r1"))
    provider.credits.issue(credit(other, 200, "c2"))

    assert (payments.charge(order).refunded_cents, payments.charge(other).refunded_cents) == (1500, 200)
    assert (payments.charge(order).amount_cents, payments.charge(other).amount_cents) == (4900, 1500)


def test_a_repeated_refund_under_its_key_after_store_credit_is_its_first_receipt_not_a_refusal(
    provider: Provider,
) -> None:
    """The refund took what the credit left; its retry is the same refund, not a further one past the charge."""
    payments, order = provider.payments, provider.charge(1500)
    provider.credits.issue(credit(order, 500, "c1"))
    first = payments.refund(refund(order, 1000, "r1"))

    assert payments.refund(refund(order, 1000, "r1")) == first.model_copy(update={"replayed": True})
    assert paid_back(provider, order) == (1000, 500)


def test_refunds_and_credits_racing_on_one_order_never_pay_back_more_than_its_charge(provider: Provider) -> None:
    """Eight connections at once, four refunding 10.00 and four crediting 10.00 of one 40.00 order, each under a
    key of its own (eight tickets): whatever order they commit in, four are paid and four refused."""
    order = provider.charge(4000)
    barrier = threading.Barrier(8)
    paid: list[int] = []
    refused: list[int] = []

    def race(n: int) -> None:
        pay = provider.payments.refund if n % 2 else provider.credits.issue
        barrier.wait()
        try:
            paid.append(pay(refund(order, 1000, f"payout:T-{n}/{order}/1")).amount_cents)
        except RefundExceedsChargeError:
            refused.append(n)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (sum(paid), len(refused)) == (4000, 4)
    assert sum(paid_back(provider, order)) == 4000
    assert provider.payments.charge(order).refunded_cents == 4000


# --- limits across tickets: what is refunded without a person, per customer and for the desk ---------------------

ANN = "ann@example.com"
FIFTY_A_DAY = Limits(customer_cents_per_day=5000, customer_refunds_per_day=None, desk_cents_per_day=None)


def unattended(
    order_id: str, amount: int, key: str, *, customer: str = ANN, limits: Limits = FIFTY_A_DAY
) -> RefundRequest:
    """A refund nobody approved, held to ``limits``."""
    return RefundRequest(
        order_id=order_id, amount_cents=amount, idempotency_key=key, customer_email=customer, limits=limits
    )


def attempt(payments: Payments, request: RefundRequest) -> RefundReceipt | NeedsApprovalError:
    try:
        return payments.refund(request)
    except NeedsApprovalError as refusal:
        return refusal


def test_six_refunds_of_19_for_one_customer_against_50_a_day_pay_two_without_a_person(provider: Provider) -> None:
    """Each refund is under any per-ticket limit and each is another order: only the count across tickets sees
    them, and the third one says which limit it met, with figures."""
    payments = provider.payments
    orders = [provider.charge(1900, ANN) for _ in range(6)]

    results = [attempt(payments, unattended(order, 1900, f"refund:T-{n}/{order}/1")) for n, order in enumerate(orders)]

    assert [type(r).__name__ for r in results] == ["RefundReceipt"] * 2 + ["NeedsApprovalError"] * 4
    refusal = results[2]
    assert isinstance(refusal, NeedsApprovalError)
    assert (
        str(refusal) == f"{ANN}'s refunds without a person in the last 24 hours: USD 57.00 of USD 50.00 with this one"
    )
    assert refusal.met == ("customer_cents_per_day",)
    assert [payments.charge(order).refunded_cents for order in orders] == [1900, 1900, 0, 0, 0, 0]


def test_a_refund_past_a_limit_can_still_be_made_with_a_person_and_is_then_neither_checked_nor_counted(
    provider: Provider,
) -> None:
    payments = provider.payments
    orders = [provider.charge(1900, ANN) for _ in range(3)]
    payments.refund(unattended(orders[0], 1900, "refund:T-1/1"))
    second = payments.refund(unattended(orders[1], 1900, "refund:T-2/1"))
    with pytest.raises(NeedsApprovalError):
        payments.refund(unattended(orders[2], 1900, "refund:T-3/1"))

    approved = payments.refund(  # the same key, now with a person's approval: the refusal took nothing under it
        RefundRequest(order_id=orders[2], amount_cents=1900, idempotency_key="refund:T-3/1", customer_email=ANN)
    )

    assert not approved.replayed
    assert approved.refund_id == second.refund_id + 1  # nor a refund number: the customer reads #2, then #3
    assert payments.charge(orders[2]).refunded_cents == 1900
    last = provider.charge(1200, ANN)  # 38.00 counted without a person, so 12.00 more is exactly the cap
    assert payments.refund(unattended(last, 1200, "refund:T-4/1")).amount_cents == 1200
    with pytest.raises(NeedsApprovalError, match=r"USD 50\.01 of USD 50\.00"):
        payments.refund(unattended(provider.charge(1, ANN), 1, "refund:T-5/1"))


def test_a_customers_fourth_refund_in_a_day_meets_the_count_limit(provider: Provider) -> None:
    payments = provider.payments
    three = Limits(customer_cents_per_day=None, customer_refunds_per_day=3, desk_cents_per_day=None)
    for n in range(3):
        payments.refund(unattended(provider.charge(100, ANN), 100, f"refund:T-{n}/1", limits=three))

    with pytest.raises(NeedsApprovalError) as refused:
        payments.refund(unattended(provider.charge(100, ANN), 100, "refund:T-3/1", limits=three))

    assert str(refused.value) == f"{ANN}'s refunds without a person in the last 24 hours: 3 of 3 refunds already"
    assert refused.value.met == ("customer_refunds_per_day",)


def test_the_desk_limit_counts_every_customers_refunds_without_a_person(provider: Provider) -> None:
    payments = provider.payments
    desk = Limits(customer_cents_per_day=None, customer_refunds_per_day=None, desk_cents_per_day=5000)
    for customer in ("ann@example.com", "bob@example.com"):
        payments.refund(
            unattended(provider.charge(2000, customer), 2000, f"refund:{customer}", customer=customer, limits=desk)
        )

    with pytest.raises(NeedsApprovalError) as refused:
        payments.refund(
            unattended(
                provider.charge(2000, "cleo@example.com"), 2000, "refund:cleo", customer="cleo@example.com", limits=desk
            )
        )

    assert str(refused.value) == (
        "the desk's refunds without a person in the last 24 hours: USD 60.00 of USD 50.00 with this one"
    )
    assert refused.value.met == ("desk_cents_per_day",)
    dev = provider.charge(1000, "dev@example.com")
    assert payments.refund(unattended(dev, 1000, "refund:dev", customer="dev@example.com", limits=desk)).amount_cents


def test_every_limit_met_is_named_the_customers_before_the_desks(provider: Provider) -> None:
    payments = provider.payments
    tight = Limits(customer_cents_per_day=1000, customer_refunds_per_day=1, desk_cents_per_day=1500)
    payments.refund(unattended(provider.charge(1000, ANN), 1000, "refund:T-1/1", limits=tight))

    with pytest.raises(NeedsApprovalError) as refused:
        payments.refund(unattended(provider.charge(1000, ANN), 1000, "refund:T-2/1", limits=tight))

    assert refused.value.met == ("customer_refunds_per_day", "customer_cents_per_day", "desk_cents_per_day")
    assert str(refused.value) == (
        f"{ANN}'s refunds without a person in the last 24 hours: 1 of 1 refund already; "
        f"{ANN}'s refunds without a person in the last 24 hours: USD 20.00 of USD 10.00 with this one; "
        "the desk's refunds without a person in the last 24 hours: USD 20.00 of USD 15.00 with this one"
    )


def test_addresses_that_differ_in_ascii_case_are_one_customer(provider: Provider) -> None:
    payments = provider.payments
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-1/1", customer="Ann@Example.com"))
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-2/1", customer=" ann@example.com"))

    with pytest.raises(NeedsApprovalError, match=rf"^{ANN}'s refunds .*: USD 57\.00 of USD 50\.00"):
        payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-3/1", customer="ANN@EXAMPLE.COM"))
    other = "ann@example.org"  # another mailbox is another customer
    assert payments.refund(unattended(provider.charge(1900, other), 1900, "refund:T-4/1", customer=other))


def test_a_refund_counts_for_24_hours_and_not_a_moment_longer(provider: Provider, clock: Clock) -> None:
    payments = provider.payments
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-1/1"))
    clock.now += timedelta(hours=12)
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-2/1"))

    clock.now += timedelta(hours=11, minutes=59, seconds=59)
    with pytest.raises(NeedsApprovalError, match=r"USD 57\.00 of USD 50\.00"):
        payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-3/1"))
    clock.now += timedelta(seconds=1)  # the first is 24 hours old: only the second counts

    assert payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-3/1")).amount_cents == 1900
    with pytest.raises(NeedsApprovalError, match=r"USD 57\.00 of USD 50\.00"):
        payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-4/1"))


def test_a_replayed_key_is_counted_once_and_never_refused_by_the_limits_it_was_paid_under(provider: Provider) -> None:
    payments, order = provider.payments, provider.charge(4000, ANN)
    first = payments.refund(unattended(order, 4000, "refund:T-1/1"))

    again = payments.refund(unattended(order, 4000, "refund:T-1/1"))  # 80.00 would pass the cap: it is a repeat
    stricter = payments.refund(unattended(order, 4000, "refund:T-1/1", limits=Limits(customer_cents_per_day=0)))

    assert again == stricter == first.model_copy(update={"replayed": True})
    assert payments.refund(unattended(provider.charge(1000, ANN), 1000, "refund:T-2/1")).amount_cents == 1000
    with pytest.raises(NeedsApprovalError, match=r"USD 50\.01 of USD 50\.00"):
        payments.refund(unattended(provider.charge(1, ANN), 1, "refund:T-3/1"))


# --- the money policy that judged a payout without a person, checked where it is booked ------------------------

JUDGED, IN_FORCE = "sha256:0123456789abcdef", "sha256:fedcba9876543210"


@pytest.mark.parametrize("in_force", [IN_FORCE, None], ids=["another policy in force", "the booking names none"])
def test_a_payout_judged_by_another_policy_than_the_one_in_force_pays_and_counts_nothing(
    provider: Provider, in_force: str | None
) -> None:
    """A refund and a store credit nobody approved, judged by a policy no longer in force (or where the booking
    cannot say which is): refused, nothing paid, credited or counted, and the key left free for the payout judged
    again."""
    order = provider.charge(4000, ANN)
    judged = unattended(order, 1000, "refund:T-1/1").model_copy(update={"policy": JUDGED})
    credit = judged.model_copy(update={"idempotency_key": "store_credit:T-1/1"})

    with pytest.raises(PolicyChangedError, match=f"judged by money policy {JUDGED}"):
        provider.payments.refund(judged, in_force)
    with pytest.raises(PolicyChangedError):
        provider.credits.issue(credit, in_force)

    assert provider.payments.charge(order).refunded_cents == 0
    assert provider.store.unattended.totals(ANN).cents == 0
    again = judged.model_copy(update={"policy": IN_FORCE})
    assert provider.payments.refund(again, IN_FORCE).amount_cents == 1000  # the same key, judged again: paid
    assert provider.credits.issue(credit.model_copy(update={"policy": IN_FORCE}), IN_FORCE).amount_cents == 1000
    assert provider.store.unattended.totals(ANN).cents == 2000


def test_a_stale_policy_is_refused_before_its_limits_are_judged(provider: Provider) -> None:
    """Where the two checks of a payout without a person meet: the limits a stale policy set are not the ones to
    judge it by, so the refusal is the policy's (judge it again), never a limit's (ask a person under old rules),
    and nothing is counted against the customer either way."""
    payments, order = provider.payments, provider.charge(4000, ANN)
    past_the_cap = unattended(order, 1000, "refund:T-1/1", limits=Limits(customer_cents_per_day=500))

    with pytest.raises(PolicyChangedError):
        payments.refund(past_the_cap.model_copy(update={"policy": JUDGED}), IN_FORCE)
    with pytest.raises(NeedsApprovalError):  # judged by the policy in force, the same limit is met
        payments.refund(past_the_cap.model_copy(update={"policy": IN_FORCE}), IN_FORCE)

    assert provider.store.unattended.totals(ANN).cents == 0
    assert payments.charge(order).refunded_cents == 0


def test_a_payout_booked_before_is_its_first_receipt_whatever_policy_is_in_force_now(provider: Provider) -> None:
    """An attempt that booked the payout and died before it answered is taken again on a worker under a new
    policy: the repeat is the first payout's receipt, never a refusal that would tell the ticket nothing was
    paid."""
    payments, order = provider.payments, provider.charge(4000, ANN)
    judged = unattended(order, 1000, "refund:T-1/1").model_copy(update={"policy": JUDGED})
    first = payments.refund(judged, JUDGED)

    assert payments.refund(judged, IN_FORCE) == first.model_copy(update={"replayed": True})
    assert payments.charge(order).refunded_cents == 1000


def test_a_payout_a_person_approved_is_not_judged_by_a_policy_where_it_is_booked(provider: Provider) -> None:
    order = provider.charge(4000, ANN)
    approved = RefundRequest(order_id=order, amount_cents=1000, idempotency_key="refund:T-1/1", customer_email=ANN)

    assert provider.payments.refund(approved, IN_FORCE).amount_cents == 1000
    with pytest.raises(ValidationError, match="needs limits"):
        RefundRequest.model_validate(approved.model_dump() | {"policy": JUDGED})
    held = unattended(order, 1000, "refund:T-1/2").model_dump()
    for digest in ("x" * 10_000, "sha256:", "sha256:0123456789ABCDEF", f"{JUDGED}\n"):
        with pytest.raises(ValidationError, match="policy"):
            RefundRequest.model_validate(held | {"policy": digest})


def test_a_refund_the_provider_refuses_is_not_counted(provider: Provider) -> None:
    payments = provider.payments
    with pytest.raises(RefundExceedsChargeError):
        payments.refund(unattended(provider.charge(1000, ANN), 4000, "refund:T-1/1"))
    with pytest.raises(OrderNotFoundError):
        payments.refund(unattended("Z-404", 4000, "refund:T-2/1"))

    assert payments.refund(unattended(provider.charge(5000, ANN), 5000, "refund:T-3/1")).amount_cents == 5000


def test_refunds_are_counted_whatever_their_key_looks_like(provider: Provider) -> None:
    """The limits count a customer's refunds, not a ticket's keys: keys of any shape, from any caller, all count."""
    payments = provider.payments
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "refund:T-1/1"))
    payments.refund(unattended(provider.charge(1900, ANN), 1900, "from-a-script"))
    with pytest.raises(NeedsApprovalError):
        payments.refund(unattended(provider.charge(1900, ANN), 1900, "x"))


def test_sixteen_refunds_of_four_customers_at_once_stay_within_every_limit(provider: Provider) -> None:
    """Sixteen connections at once, each a ticket refunding 19.00 without a person: whatever order they commit
    in, no customer passes 50.00 (two refunds each) and the desk does not pass 100.00 (five refunds)."""
    payments = provider.payments
    limits = Limits(customer_cents_per_day=5000, customer_refunds_per_day=None, desk_cents_per_day=10_000)
    customers = [f"c{n}@example.com" for n in range(4)]
    tickets = [(customer, provider.charge(1900, customer)) for customer in customers for _ in range(4)]
    barrier = threading.Barrier(len(tickets))
    results: list[tuple[str, RefundReceipt | NeedsApprovalError]] = []

    def ticket(n: int, customer: str, order: str) -> None:
        request = unattended(order, 1900, f"refund:T-{n}/{order}/1", customer=customer, limits=limits)
        barrier.wait()
        results.append((customer, attempt(payments, request)))

    threads = [threading.Thread(target=ticket, args=(n, *t)) for n, t in enumerate(tickets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    paid = [(customer, r.amount_cents) for customer, r in results if isinstance(r, RefundReceipt)]
    assert len(results) == len(tickets)
    assert all(sum(a for c, a in paid if c == customer) <= 5000 for customer in customers)
    assert sum(a for _c, a in paid) == 5 * 1900  # the desk's 100.00 holds: 95.00, and no sixth
    assert sum(payments.charge(order).refunded_cents for _c, order in tickets) == 5 * 1900


def test_a_request_held_to_limits_says_whose_refund_it_is_and_an_old_request_reads_as_approved() -> None:
    with pytest.raises(ValidationError, match="must say whose it is"):
        RefundRequest(order_id="A-1001", amount_cents=100, idempotency_key="k", limits=Limits())
    old = RefundRequest.model_validate_json('{"order_id": "A-1001", "amount_cents": 100, "idempotency_key": "k"}')
    assert (old.customer_email, old.limits) == (None, None)
