"""The embedded payment provider keeps Stripe's idempotency rules, because a retried activity relies on them;
on SQLite and on PostgreSQL alike. What any provider behind the port must do is in
``test_payments_contract.py``; here is what the embedded one does besides, and says in its own words."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.business import Business, Options
from activities.business.payments import RefundFingerprint
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    NeedsApprovalError,
    OrderNotFoundError,
    RefundExceedsChargeError,
)
from activities.business.unattended import Totals
from activities.contracts.policy import Limits
from activities.contracts.world import EmailRequest, Order, RefundReceipt, RefundRequest
from tests.support.demonstrations import Demonstration
from tests.support.stores import StoreFactory


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def pays_past_the_charge(store: Business) -> Business:
    """``store`` with a provider that checks each refund against the charge alone, for the rules of keys that two
    refunds of one order show (the product's provider would refuse the second)."""
    return Demonstration(refund_guard=False).guard(store)


def refund(amount: int, key: str = "refund:A-1001", order: str = "A-1001") -> RefundRequest:
    return RefundRequest(order_id=order, amount_cents=amount, idempotency_key=key)


def test_the_same_key_with_another_amount_is_refused(make_store: StoreFactory) -> None:
    store = make_store()
    store.payments.refund(refund(4900))
    with pytest.raises(IdempotencyConflictError, match=r"used for a refund of USD 49\.00 on A-1001, not USD 59\.00"):
        store.payments.refund(refund(5900))
    assert len(store.payments.refunds()) == 1


def test_a_key_expires_and_a_repeat_after_that_is_a_new_request(make_store: StoreFactory) -> None:
    clock = Clock()
    store = pays_past_the_charge(make_store(key_ttl=timedelta(hours=24), clock=clock))
    store.payments.refund(refund(4900))
    clock.now += timedelta(hours=23, minutes=59)
    assert store.payments.refund(refund(4900)).replayed
    clock.now += timedelta(minutes=2)

    late = store.payments.refund(refund(4900))
    assert not late.replayed
    assert [r.amount_cents for r in store.payments.refunds()] == [4900, 4900]
    assert store.payments.settle_refund("refund:A-1001") == late.model_copy(update={"replayed": True})


def test_each_key_is_its_own_refund_and_pays(make_store: StoreFactory) -> None:
    store = pays_past_the_charge(make_store())
    store.payments.refund(refund(4900, key="refund:T-1/1"))
    store.payments.refund(refund(4900, key="refund:T-2/1"))
    assert len(store.payments.refunds()) == 2


def test_the_guard_refuses_a_refund_above_what_was_charged(make_store: StoreFactory) -> None:
    store = make_store()
    store.payments.refund(refund(4000, key="a"))
    with pytest.raises(
        RefundExceedsChargeError, match=r"USD 40\.00 of USD 49\.00 is already paid back \(refunds USD 40\.00\)"
    ):
        store.payments.refund(refund(1000, key="b"))
    store.payments.refund(refund(900, key="c"))
    assert sum(r.amount_cents for r in store.payments.refunds()) == 4900


def test_no_option_of_the_business_lets_its_provider_pay_past_the_charge(make_store: StoreFactory) -> None:
    """A provider that pays past the charge is a demonstration's, built by the tests (``PaysPastTheCharge``), never a
    mode of the product's: the business takes no option that lifts the rule."""
    assert "refund_guard" not in Options.__annotations__
    with pytest.raises(TypeError, match="refund_guard"):
        make_store(refund_guard=False)


def test_an_unknown_order_is_not_found(make_store: StoreFactory) -> None:
    store = make_store()
    with pytest.raises(OrderNotFoundError, match="There is no order Z-1"):
        store.orders.order("Z-1")
    with pytest.raises(OrderNotFoundError):
        store.payments.refund(refund(100, order="Z-1"))


def test_eight_connections_racing_one_key_pay_once_and_the_losers_get_the_winners_result(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    results = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        results.append(store.payments.refund(refund(4900)))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(store.payments.refunds()) == 1
    assert {r.refund_id for r in results} == {store.payments.refunds()[0].refund_id}
    assert sorted(r.replayed for r in results) == [False] + [True] * 7


def test_an_email_key_sends_once_and_refuses_a_different_email(make_store: StoreFactory) -> None:
    store = make_store()
    email = EmailRequest(to="ann@example.com", subject="Refund", body="49.00", idempotency_key="email:1")
    first = store.mail.send_email(email)
    assert store.mail.send_email(email).email_id == first.email_id
    with pytest.raises(IdempotencyConflictError):
        store.mail.send_email(email.model_copy(update={"body": "59.00"}))
    assert len(store.mail.sent()) == 1


def test_operators_can_add_orders_and_demo_orders_are_seeded_once(make_store: StoreFactory) -> None:
    store = make_store()
    store.orders.add(Order(order_id="B-2000", amount_cents=100, customer_email="zed@example.com"))
    store.create()
    assert store.orders.order("A-1001").amount_cents == 4900
    assert store.orders.order("B-2000").customer_email == "zed@example.com"
    assert len([o for o in store.orders.all() if o.order_id == "A-1001"]) == 1


def test_eight_connections_racing_refunds_of_one_order_under_different_keys_never_pay_above_the_charge(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    barrier = threading.Barrier(8)
    refused = []

    def race(n: int) -> None:
        barrier.wait()
        try:
            store.payments.refund(refund(1000, key=f"key-{n}"))
        except RefundExceedsChargeError:
            refused.append(n)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [r.amount_cents for r in store.payments.refunds()] == [1000] * 4
    assert len(refused) == 4


def test_a_password_in_the_database_url_is_hidden_when_the_store_is_logged() -> None:
    from activities.business import Business  # noqa: PLC0415

    store = Business.at("postgresql+psycopg://agent:hunter2@db.internal/business")
    assert "hunter2" not in str(store)
    assert "db.internal/business" in str(store)
    store.close()


# --- a refund whose outcome was unknown is settled for good (issue 13, case 7) ---------------------------------


def test_a_key_settled_as_unpaid_refuses_a_late_attempt_for_ever(make_store: StoreFactory) -> None:
    """Reconciliation said "not made": the attempt still running somewhere (a thread nobody can cancel) must
    not pay when it finally gets to the provider, not even after the key would have expired."""
    clock = Clock()
    store = make_store(key_ttl=timedelta(hours=24), clock=clock)
    assert store.payments.settle_refund("refund:T-1/A-1001/1") is None

    with pytest.raises(KeyClosedError, match="was settled as not paid"):
        store.payments.refund(refund(4900, key="refund:T-1/A-1001/1"))
    clock.now += timedelta(days=30)
    with pytest.raises(KeyClosedError):
        store.payments.refund(refund(4900, key="refund:T-1/A-1001/1"))
    assert store.payments.refunds() == []
    assert store.payments.refund(refund(4900, key="refund:T-1/A-1001/2")).amount_cents == 4900  # the next part pays


def test_a_late_attempt_racing_the_settlement_either_pays_and_is_found_or_never_pays(make_store: StoreFactory) -> None:
    """Four attempts and four settlements of one key at once, many times over: whichever commits first, the
    settlement's answer is the truth, and nothing is paid after "not made"."""
    store = pays_past_the_charge(make_store())
    for n in range(10):
        key = f"refund:T-race/A-1001/{n}"
        barrier = threading.Barrier(8)
        settled: list[RefundReceipt | None] = []
        paid: list[RefundReceipt] = []

        def attempt(key: str = key, barrier: threading.Barrier = barrier, paid: list[RefundReceipt] = paid) -> None:
            barrier.wait()
            with contextlib.suppress(KeyClosedError):
                paid.append(store.payments.refund(refund(100, key=key)))

        def settle(
            key: str = key, barrier: threading.Barrier = barrier, settled: list[RefundReceipt | None] = settled
        ) -> None:
            barrier.wait()
            settled.append(store.payments.settle_refund(key))

        threads = [threading.Thread(target=f) for f in (attempt, settle) * 4]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        made = [r for r in store.payments.refunds() if r.refund_id in {p.refund_id for p in paid}]
        assert len(made) <= 1
        if made:  # paid before any settlement closed the key: every settlement found it
            assert all(s is not None and s.refund_id == made[0].refund_id for s in settled)
        else:  # closed first: every attempt was refused
            assert paid == []
            assert settled == [None] * 4


# --- what a key's row says it was used for ---------------------------------------------------------------------


def test_a_refunds_fingerprint_is_stored_in_the_words_databases_already_hold() -> None:
    """Keys taken before an upgrade must still hold, so the text in ``idempotency_keys.request`` is fixed."""
    fingerprint = RefundFingerprint.of(refund(4900))
    assert fingerprint.to_text() == "refund A-1001 4900"
    assert RefundFingerprint.from_text("refund A-1001 4900") == fingerprint
    assert RefundFingerprint.from_text(RefundFingerprint("order 7 of 9", 100).to_text()) == RefundFingerprint(
        "order 7 of 9", 100
    )
    assert RefundFingerprint.from_text("email ann@example.com\nRefund\n49.00") is None
    assert RefundFingerprint.from_text("") is None  # a key a settlement took before any request came


def test_a_key_an_email_took_refuses_a_refund_as_another_request(make_store: StoreFactory) -> None:
    store = make_store()
    store.mail.send_email(EmailRequest(to="ann@example.com", subject="Refund", body="49.00", idempotency_key="k-1"))
    with pytest.raises(IdempotencyConflictError, match=r"k-1 was used for another request, not USD 49\.00 on A-1001"):
        store.payments.refund(refund(4900, key="k-1"))
    assert store.payments.refunds() == []


# --- the limits across tickets, against a model of the rule ---------------------------------------------------


@dataclass(frozen=True)
class Step:
    customer: int
    shouted: bool
    """The address in capitals: the same customer."""
    amount: int
    approved: bool
    """A person approved it: neither checked nor counted."""
    replay: bool
    """Send the last refund paid without a person again, under its key while the key lives: its first receipt,
    counted once."""
    minutes_later: int


STEPS = st.lists(
    st.builds(
        Step,
        customer=st.integers(0, 2),
        shouted=st.booleans(),
        amount=st.integers(1, 3000),
        approved=st.booleans(),
        replay=st.booleans(),
        minutes_later=st.sampled_from([0, 1, 90, 600, 1439, 1440]),
    ),
    min_size=1,
    max_size=15,
)
LIMITS = st.builds(
    Limits,
    customer_cents_per_day=st.none() | st.integers(0, 6000),
    customer_refunds_per_day=st.none() | st.integers(0, 4),
    desk_cents_per_day=st.none() | st.integers(0, 10_000),
)


def expected_breaches(limits: Limits, theirs: list[int], desk: list[int], amount: int) -> tuple[str, ...]:
    """The rule, stated again from the issue rather than from the code: what a refund without a person meets."""
    met = []
    if limits.customer_refunds_per_day is not None and len(theirs) >= limits.customer_refunds_per_day:
        met.append("customer_refunds_per_day")
    if limits.customer_cents_per_day is not None and sum(theirs) + amount > limits.customer_cents_per_day:
        met.append("customer_cents_per_day")
    if limits.desk_cents_per_day is not None and sum(desk) + amount > limits.desk_cents_per_day:
        met.append("desk_cents_per_day")
    return tuple(met)


def test_whatever_the_limits_and_the_order_of_refunds_the_ledger_counts_as_the_rule_says(
    make_store: StoreFactory,
) -> None:
    """Refunds with and without a person, replays, case-different addresses and a clock that moves by up to a
    day at a time: each is paid or refused as a model of the rule says, and the ledger's totals agree with it."""
    clock = Clock()
    store = make_store(clock=clock)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(limits=LIMITS, steps=STEPS)
    def holds(limits: Limits, steps: list[Step]) -> None:
        clock.now += timedelta(days=2)  # nothing from an earlier example is still counted
        run = uuid.uuid4().hex[:8]
        customers = [f"c{n}-{run}@example.com" for n in range(3)]
        counted: list[tuple[datetime, str, int]] = []
        last_paid: tuple[datetime, RefundRequest] | None = None
        for n, step in enumerate(steps):
            clock.now += timedelta(minutes=step.minutes_later)
            if step.replay and last_paid is not None and last_paid[0] > clock.now - timedelta(hours=24):
                assert store.payments.refund(last_paid[1].model_copy(update={"limits": limits})).replayed
                continue
            customer = customers[step.customer]
            order = f"P-{run}{n:04d}"
            store.orders.add(Order(order_id=order, amount_cents=step.amount, customer_email=customer))
            request = RefundRequest(
                order_id=order,
                amount_cents=step.amount,
                idempotency_key=f"refund:{run}/{n}",
                customer_email=customer.upper() if step.shouted else customer,
                limits=None if step.approved else limits,
            )
            window = [(who, amount) for at, who, amount in counted if at > clock.now - timedelta(hours=24)]
            met = (
                ()
                if step.approved
                else expected_breaches(
                    limits, [a for who, a in window if who == customer], [a for _who, a in window], step.amount
                )
            )
            if met:
                with pytest.raises(NeedsApprovalError) as refused:
                    store.payments.refund(request)
                assert refused.value.met == met
            else:
                assert not store.payments.refund(request).replayed
                if not step.approved:
                    counted.append((clock.now, customer, step.amount))
                    last_paid = (clock.now, request)
            for customer in customers:
                theirs = [a for at, who, a in counted if who == customer and at > clock.now - timedelta(hours=24)]
                assert store.unattended.totals(customer.upper()) == Totals(cents=sum(theirs), refunds=len(theirs))

    holds()


# --- refunds and store credit of one order, in any order, against a model of the rule ------------------------------


@dataclass(frozen=True)
class Asked:
    """A payout asked for, in the sequence a property is checked over."""

    credit: bool
    """Store credit; else a refund."""
    amount: int
    again: bool
    """Ask for the last payout that was paid again, under its key: its first receipt, nothing more paid."""


PAYOUTS = st.lists(
    st.builds(Asked, credit=st.booleans(), amount=st.integers(1, 2500), again=st.booleans()), min_size=1, max_size=12
)


def test_whatever_the_sequence_of_refunds_and_credits_what_is_paid_back_never_passes_the_charge(
    make_store: StoreFactory,
) -> None:
    """Refunds and store credit of one order, of any amounts, in any order, with repeats under their keys: each is
    paid exactly when what was paid back before, every kind together, leaves room for it, and what the charge
    reports paid back is what both ledgers hold, never more than the charge."""
    store = make_store()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(charged=st.integers(1, 5000), payouts=PAYOUTS)
    def holds(charged: int, payouts: list[Asked]) -> None:
        order = f"L-{uuid.uuid4().hex[:8]}"
        store.orders.add(Order(order_id=order, amount_cents=charged, customer_email="ann@example.com"))
        total = 0
        last: tuple[Callable[[RefundRequest], RefundReceipt], RefundRequest, RefundReceipt] | None = None
        for n, payout in enumerate(payouts):
            if payout.again and last is not None:
                paid_by, asked, first = last
                assert paid_by(asked) == first.model_copy(update={"replayed": True})
                continue
            pay = store.credits.issue if payout.credit else store.payments.refund
            request = RefundRequest(order_id=order, amount_cents=payout.amount, idempotency_key=f"{order}/{n}")
            if total + payout.amount > charged:
                with pytest.raises(RefundExceedsChargeError):
                    pay(request)
            else:
                last = (pay, request, pay(request))
                total += payout.amount
            refunded = sum(r.amount_cents for r in store.payments.refunds(order))
            credited = sum(c.amount_cents for c in store.credits.credits(order))
            assert refunded + credited == store.payments.charge(order).refunded_cents == total <= charged

    holds()


# A worker process up to the point where it refunds one of ann's orders without a person, then waiting for the word.
WORKER_REFUND = """
import sys
from activities.business import Business
from activities.business.refusals import NeedsApprovalError
from activities.contracts.policy import Limits
from activities.contracts.world import RefundRequest
store = Business.at(sys.argv[1])
request = RefundRequest(
    order_id=sys.argv[2], amount_cents=1900, idempotency_key=f"refund:ticket:{sys.argv[2]}/1",
    customer_email="ann@example.com", limits=Limits(customer_cents_per_day=5000, customer_refunds_per_day=None),
)
store.payments.charge(sys.argv[2])  # connected, and the order read, before the word
print("ready", flush=True)
sys.stdin.readline()
try:
    print("paid", store.payments.refund(request).amount_cents, flush=True)
except NeedsApprovalError as refusal:
    print("refused", refusal, flush=True)
"""


def test_six_worker_processes_refunding_one_customer_at_once_on_postgresql_pay_within_the_cap(
    postgres_url: str,
) -> None:
    """Six tickets for ann, each 19.00 without a person, each in a worker process of its own against one
    PostgreSQL: against 50.00 a day, two are paid and four wait for a person, whichever commits first."""
    store = Business.at(postgres_url).create(seed_demo_orders=False)
    orders = [f"S-{n:04d}" for n in range(6)]
    for order in orders:
        store.orders.add(Order(order_id=order, amount_cents=1900, customer_email="ann@example.com"))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER_REFUND, postgres_url, order],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for order in orders
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n", worker.communicate(timeout=60)[1]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    answers = [worker.communicate(timeout=60) for worker in workers]

    assert [worker.returncode for worker in workers] == [0] * 6, "\n".join(err for _out, err in answers)
    said = sorted(out.split(" ", 1)[0] for out, _err in answers)
    assert said == ["paid"] * 2 + ["refused"] * 4
    assert sum(refund.amount_cents for refund in store.payments.refunds()) == 3800
    assert store.unattended.totals("ann@example.com") == Totals(cents=3800, refunds=2)
    store.close()
