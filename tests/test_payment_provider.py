"""The payment side keeps Stripe's idempotency rules, because a retried activity relies on them."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from activities.contracts import EmailRequest, Order, RefundRequest
from activities.store import BusinessStore, IdempotencyConflictError, OrderNotFoundError, RefundExceedsChargeError


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def refund(amount: int, key: str | None = "refund:A-1001", order: str = "A-1001") -> RefundRequest:
    return RefundRequest(order_id=order, amount_cents=amount, idempotency_key=key)


def test_the_same_key_and_request_pays_nothing_and_returns_the_first_result(store: BusinessStore) -> None:
    first = store.refund(refund(4900))
    again = store.refund(refund(4900))

    assert (again.refund_id, again.amount_cents, again.replayed) == (first.refund_id, 4900, True)
    assert not first.replayed
    assert len(store.refunds()) == 1


def test_the_same_key_with_another_amount_is_refused(store: BusinessStore) -> None:
    store.refund(refund(4900))
    with pytest.raises(IdempotencyConflictError, match=r"used for a refund of 49\.00 on A-1001, not 59\.00"):
        store.refund(refund(5900))
    assert len(store.refunds()) == 1


def test_a_key_expires_and_a_repeat_after_that_is_a_new_request(tmp_path: Path) -> None:
    clock = Clock()
    store = BusinessStore(tmp_path / "b.sqlite3", key_ttl=timedelta(hours=24), refund_guard=False, clock=clock).create()
    store.refund(refund(4900))
    clock.now += timedelta(hours=23, minutes=59)
    assert store.refund(refund(4900)).replayed
    clock.now += timedelta(minutes=2)

    late = store.refund(refund(4900))
    assert not late.replayed
    assert [r.amount_cents for r in store.refunds()] == [4900, 4900]
    assert store.refund_by_key("refund:A-1001") == late.model_copy(update={"replayed": True})


def test_without_a_key_every_request_pays(tmp_path: Path) -> None:
    store = BusinessStore(tmp_path / "b.sqlite3", refund_guard=False).create()
    store.refund(refund(4900, key=None))
    store.refund(refund(4900, key=None))
    assert len(store.refunds()) == 2


def test_the_guard_refuses_a_refund_above_what_was_charged(store: BusinessStore) -> None:
    store.refund(refund(4000, key="a"))
    with pytest.raises(RefundExceedsChargeError, match=r"40.00 of 49.00 is already refunded"):
        store.refund(refund(1000, key="b"))
    store.refund(refund(900, key="c"))
    assert sum(r.amount_cents for r in store.refunds()) == 4900


def test_with_the_guard_off_the_provider_pays_whatever_it_is_asked(tmp_path: Path) -> None:
    store = BusinessStore(tmp_path / "b.sqlite3", refund_guard=False).create()
    store.refund(refund(4900, key="a"))
    store.refund(refund(5900, key="b"))
    assert sum(r.amount_cents for r in store.refunds()) == 10_800


def test_an_unknown_order_is_not_found(store: BusinessStore) -> None:
    with pytest.raises(OrderNotFoundError, match="There is no order Z-1"):
        store.order("Z-1")
    with pytest.raises(OrderNotFoundError):
        store.refund(refund(100, order="Z-1"))


def test_two_threads_racing_one_key_pay_once(store: BusinessStore) -> None:
    results = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        results.append(store.refund(refund(4900)))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(store.refunds()) == 1
    assert {r.refund_id for r in results} == {store.refunds()[0].refund_id}
    assert sorted(r.replayed for r in results) == [False] + [True] * 7


def test_an_email_key_sends_once_and_refuses_a_different_email(store: BusinessStore) -> None:
    email = EmailRequest(to="ann@example.com", subject="Refund", body="49.00", idempotency_key="email:1")
    first = store.send_email(email)
    assert store.send_email(email).email_id == first.email_id
    with pytest.raises(IdempotencyConflictError):
        store.send_email(email.model_copy(update={"body": "59.00"}))
    assert len(store.emails()) == 1


def test_operators_can_add_orders_and_demo_orders_are_seeded_once(store: BusinessStore) -> None:
    store.add_order(Order(order_id="B-2000", amount_cents=100, customer_email="zed@example.com"))
    store.create()
    assert store.order("A-1001").amount_cents == 4900
    assert store.order("B-2000").customer_email == "zed@example.com"
    assert len([o for o in store.orders() if o.order_id == "A-1001"]) == 1
