"""Refunds through Stripe (``AGENT_PAYMENTS=stripe``): the official ``stripe`` SDK, unpatched, over HTTP to a
local fake of Stripe's API (``tests/support/fake_stripe.py``) that keeps Stripe's idempotency rules.

What "once" means with Stripe: the ticket's key is Stripe's ``Idempotency-Key``, so every retry of an attempt
gets Stripe's first answer back; the key is in the refund's metadata too, so a refund whose answer was lost is
found among the payment's refunds, even after Stripe has forgotten the key. The rules common to every provider
are in ``test_payments_contract.py``; here are Stripe's own words, its failures and whole tickets.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import Client

from activities.business import Business
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    NeedsApprovalError,
    OrderNotFoundError,
    PaymentsUnusableError,
    RefundExceedsChargeError,
)
from activities.business.stripe_payments import PaymentDeferredError, StripePayments
from activities.business.unattended import Totals
from activities.contracts.policy import Limits
from activities.contracts.ticket import Status
from activities.contracts.world import Order, RefundReceipt, RefundRequest
from agent_worker import wiring
from agent_worker.config import Settings
from agent_worker.config.payment_settings import StripeSettings
from tests.support.crashlab import Lab
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_business, stripe_env
from tests.support.harness import Harness
from tests.support.history import activity_attempts
from tests.support.holds import Holds
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import ticket

NO_APPROVAL_NEEDED = 10_000
KEY = "refund:ticket:T-1/A-1001/1"


@pytest.fixture
def account() -> Iterator[FakeStripe]:
    with FakeStripe().running() as account:
        yield account


@pytest.fixture
def shop(account: FakeStripe, tmp_path: Path) -> Business:
    """The business of a worker refunding through ``account``, its demo order A-1001 paid there (49.00)."""
    store = stripe_business(account, tmp_path).create()
    pay_at_stripe(account, store, "A-1001")
    return store


def stripe(store: Business) -> StripePayments:
    assert isinstance(store.payments, StripePayments)
    return store.payments


def refund(amount: int = 4900, key: str | None = KEY, order_id: str = "A-1001") -> RefundRequest:
    return RefundRequest(order_id=order_id, amount_cents=amount, idempotency_key=key)


async def pay(store: Business, request: RefundRequest) -> RefundReceipt:
    """As the ``issue_refund`` activity calls the port: in a thread."""
    return await asyncio.to_thread(store.payments.refund, request)


# --- the adapter and Stripe's rules, without Temporal ------------------------------------------------------------


async def test_a_refund_carries_the_tickets_key_to_stripe_and_books_what_stripe_made(
    shop: Business, account: FakeStripe
) -> None:
    receipt = await pay(shop, refund())

    [made] = account.refunds()
    [sent] = account.refund_requests()
    assert sent["idempotency-key"] == KEY
    assert made["metadata"] == {"idempotency_key": KEY, "order_id": "A-1001"}
    assert (made["amount"], made["payment_intent"]) == (4900, "pi_fake0001")  # the shop fixture's one payment
    assert receipt == RefundReceipt(
        refund_id=1, order_id="A-1001", amount_cents=4900, provider_refund_id=made["id"], status="succeeded"
    )
    assert stripe(shop).refunds() == [receipt]


async def test_a_retry_under_the_key_is_replayed_by_stripe_and_pays_nothing(
    shop: Business, account: FakeStripe
) -> None:
    first = await pay(shop, refund())
    again = await pay(shop, refund())

    assert again == first.model_copy(update={"replayed": True})
    assert len(account.refunds()) == 1
    assert len(account.refund_requests()) == 2  # Stripe was asked again, and answered with its first refund


async def test_a_key_longer_than_stripe_takes_is_sent_as_its_digest_and_still_pays_once_and_is_found(
    shop: Business, account: FakeStripe
) -> None:
    """A ticket's id is the caller's, of any length, and the key is built from it: Stripe takes 255 characters."""
    long_key = f"refund:ticket:{'T' * 300}/A-1001/1"
    account.fail("500_after_refund")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, refund(key=long_key))

    settled = await asyncio.to_thread(shop.payments.settle_refund, long_key)

    [sent] = account.refund_requests()
    assert sent["idempotency-key"] == f"sha256:{hashlib.sha256(long_key.encode()).hexdigest()}"
    assert settled is not None
    assert (settled.amount_cents, settled.replayed) == (4900, True)
    assert len(account.refunds()) == 1


async def test_stripe_is_the_judge_of_a_key_reused_for_another_amount_in_its_own_words(shop: Business) -> None:
    await pay(shop, refund(1000))

    with pytest.raises(IdempotencyConflictError, match="Stripe refused the idempotency key: Keys for idempotent"):
        await pay(shop, refund(2000))


async def test_more_than_is_left_of_the_charge_is_stripes_refusal_in_its_words(shop: Business) -> None:
    await pay(shop, refund(4000, key="a"))

    with pytest.raises(RefundExceedsChargeError, match=r"greater than unrefunded amount on charge \(\$9.00\)"):
        await pay(shop, refund(1000, key="b"))
    await pay(shop, refund(900, key="c"))
    with pytest.raises(RefundExceedsChargeError, match="has already been refunded"):
        await pay(shop, refund(100, key="d"))


async def test_what_was_charged_and_refunded_is_stripes_word_not_the_shops(shop: Business, account: FakeStripe) -> None:
    """The shop says A-1001 cost 49.00; the customer paid 45.00 (a coupon at checkout): Stripe's figure counts."""
    order = shop.orders.order("A-1001")
    shop.orders.add(order, stripe_payment=account.charge(4500))
    await pay(shop, refund(500, key="x"))

    charge = shop.payments.charge("A-1001")
    assert (charge.amount_cents, charge.refunded_cents) == (4500, 500)
    bare_charge = account.charge(1500, intent=False)  # an order paid before PaymentIntents: a Charge's id
    shop.orders.add(
        Order(order_id="A-0001", amount_cents=1500, customer_email="old@example.com"), stripe_payment=bare_charge
    )
    await pay(shop, refund(1500, key="y", order_id="A-0001"))
    assert shop.payments.charge("A-0001").refunded_cents == 1500


async def test_an_order_with_no_payment_at_stripe_or_one_stripe_does_not_know_is_refused_saying_so(
    shop: Business,
) -> None:
    with pytest.raises(OrderNotFoundError, match=r"A-1002 names no Stripe payment.*--stripe-payment"):
        await pay(shop, refund(1500, order_id="A-1002"))
    shop.orders.add(shop.orders.order("A-1002"), stripe_payment="pi_nobody_made")
    with pytest.raises(OrderNotFoundError, match="No such payment_intent: 'pi_nobody_made'"):
        await pay(shop, refund(1500, order_id="A-1002"))


async def test_a_rate_limit_is_worth_retrying_and_saves_nothing_under_the_key(
    shop: Business, account: FakeStripe
) -> None:
    account.fail("rate_limited")

    with pytest.raises(PaymentDeferredError, match="Too many requests"):
        await pay(shop, refund())
    assert account.refunds() == []
    receipt = await pay(shop, refund())
    assert not receipt.replayed
    assert len(account.refunds()) == 1


async def test_a_500_after_stripe_made_the_refund_is_replayed_to_every_retry_and_settling_finds_the_refund(
    shop: Business, account: FakeStripe
) -> None:
    """Stripe saves a 500 under the key like any answer, so retries cannot learn the outcome: the settlement can,
    by the key in the refund's metadata. The refund is booked once, and the key stays open for its receipt."""
    account.fail("500_after_refund")

    for _attempt in range(3):
        with pytest.raises(PaymentDeferredError, match="Stripe answered 500"):
            await pay(shop, refund())
    [made] = account.refunds()
    assert stripe(shop).refunds() == []

    settled = await asyncio.to_thread(shop.payments.settle_refund, KEY)

    assert settled is not None
    assert (settled.provider_refund_id, settled.amount_cents, settled.replayed) == (made["id"], 4900, True)
    assert stripe(shop).refunds() == [settled.model_copy(update={"replayed": False})]
    assert len(account.refunds()) == 1


async def test_a_dropped_connection_after_the_refund_is_retried_and_the_retry_gets_the_first_refund(
    shop: Business, account: FakeStripe
) -> None:
    account.fail("drop_after_refund")

    with pytest.raises(PaymentDeferredError, match="Stripe could not take the request now"):
        await pay(shop, refund())
    receipt = await pay(shop, refund())

    [made] = account.refunds()
    assert (receipt.provider_refund_id, receipt.replayed) == (made["id"], True)  # Stripe paid nothing this time
    assert [r.provider_refund_id for r in stripe(shop).refunds()] == [made["id"]]


async def test_after_stripe_forgot_the_key_the_settlement_still_finds_the_refund_by_its_metadata(
    shop: Business, account: FakeStripe
) -> None:
    account.fail("500_after_refund")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, refund())
    account.advance(25 * 3600)  # a replay now would be a new refund: only the listing knows

    settled = await asyncio.to_thread(shop.payments.settle_refund, KEY)

    assert settled is not None
    assert len(account.refunds()) == 1
    assert len(account.refund_requests()) == 1  # found by listing, never by asking to refund again


async def test_a_key_settled_as_unpaid_refuses_the_late_attempt_before_stripe_hears_of_it(
    shop: Business, account: FakeStripe
) -> None:
    account.fail("rate_limited")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, refund())  # the request is under its key in the ledger; Stripe made nothing

    assert await asyncio.to_thread(shop.payments.settle_refund, KEY) is None
    with pytest.raises(KeyClosedError):
        await pay(shop, refund())
    assert account.refunds() == []
    assert len(account.refund_requests()) == 1


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_a_settlement_waits_for_an_attempt_in_flight_and_then_returns_its_refund(
    database: str, account: FakeStripe, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The attempt holds its key from before it asks Stripe until the refund is booked (on PostgreSQL a row lock,
    on SQLite the writer's lock): a settlement that comes while Stripe is still answering waits, and finds the
    refund rather than closing the key under it."""
    url = {"database_url": request.getfixturevalue("postgres_url")} if database == "postgresql" else {}
    store = stripe_business(account, tmp_path, url).create()
    pay_at_stripe(account, store, "A-1001")
    account.slow_seconds = 1.0
    account.fail("slow")
    attempt = asyncio.ensure_future(pay(store, refund()))
    while not account.refund_requests():
        await asyncio.sleep(0.01)

    settled = await asyncio.to_thread(store.payments.settle_refund, KEY)

    paid = await attempt
    assert settled == paid.model_copy(update={"replayed": True})
    assert len(account.refunds()) == 1
    store.close()


async def test_a_key_stripe_refuses_is_unusable_credentials_and_never_retried(
    account: FakeStripe, tmp_path: Path
) -> None:
    store = stripe_business(account, tmp_path, api_key="sk_test_revoked").create()
    store.orders.add(store.orders.order("A-1001"), stripe_payment=account.charge(4900))

    with pytest.raises(
        PaymentsUnusableError, match=r"Stripe refused this worker's API key: Invalid API Key provided: sk_test_\*\*\*\*"
    ):
        await pay(store, refund())
    with pytest.raises(PaymentsUnusableError):
        store.payments.charge("A-1001")
    assert account.refunds() == []


# --- refunds at Stripe and store credit in the worker's database: one charge --------------------------------------


def credit(amount: int, key: str, order_id: str = "A-1001") -> RefundRequest:
    return RefundRequest(order_id=order_id, amount_cents=amount, idempotency_key=key)


async def test_a_refund_after_store_credit_is_refused_before_stripe_hears_of_it(
    shop: Business, account: FakeStripe
) -> None:
    """Stripe knows nothing of the voucher, so its own guard would pay 49.00 on top of it."""
    await asyncio.to_thread(shop.credits.issue, credit(1000, "store_credit:ticket:T-1/A-1001/1"))

    with pytest.raises(RefundExceedsChargeError) as refused:
        await pay(shop, refund(4900))

    assert str(refused.value) == (
        "Refusing to refund USD 49.00 on A-1001: USD 10.00 of USD 49.00 is already paid back (store credit USD 10.00)"
    )
    assert account.refund_requests() == []
    assert (await pay(shop, refund(3900, key="refund:ticket:T-2/A-1001/1"))).amount_cents == 3900
    assert shop.payments.charge("A-1001").refunded_cents == 4900


async def test_a_refund_made_in_stripes_dashboard_counts_against_store_credit(
    shop: Business, account: FakeStripe
) -> None:
    """A person refunded 40.00 at Stripe, outside the worker: the worker's book has no row of it, Stripe's does."""
    stripe(shop).client.v1.refunds.create({"payment_intent": "pi_fake0001", "amount": 4000})

    with pytest.raises(RefundExceedsChargeError, match=r"USD 40\.00 of USD 49\.00 is already paid back \(refunds"):
        await asyncio.to_thread(shop.credits.issue, credit(1000, "store_credit:ticket:T-1/A-1001/1"))

    assert (await asyncio.to_thread(shop.credits.issue, credit(900, "store_credit:ticket:T-1/A-1001/2"))).amount_cents
    assert shop.payments.charge("A-1001").refunded_cents == 4900


async def test_store_credit_is_held_to_what_stripe_charged_not_to_what_the_shop_says(
    shop: Business, account: FakeStripe
) -> None:
    """The shop says A-1001 cost 49.00; the customer paid 45.00 at Stripe, 40.00 of which was refunded."""
    shop.orders.add(shop.orders.order("A-1001"), stripe_payment=account.charge(4500))
    await pay(shop, refund(4000))

    with pytest.raises(RefundExceedsChargeError, match=r"USD 40\.00 of USD 45\.00"):
        await asyncio.to_thread(shop.credits.issue, credit(900, "store_credit:ticket:T-1/A-1001/1"))

    assert shop.credits.credits() == []


async def test_a_retry_of_a_refund_stripe_made_after_store_credit_gets_that_refund_and_no_refusal(
    shop: Business, account: FakeStripe
) -> None:
    """The refund took what the voucher left and its answer was lost: Stripe's refunded total already holds it, so
    the retry would pass the charge were it a new refund. It is not: Stripe has a refund under its key."""
    await asyncio.to_thread(shop.credits.issue, credit(1000, "store_credit:ticket:T-1/A-1001/1"))
    account.fail("drop_after_refund")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, refund(3900))

    receipt = await pay(shop, refund(3900))

    [made] = account.refunds()
    assert (receipt.provider_refund_id, receipt.amount_cents, receipt.replayed) == (made["id"], 3900, True)
    assert [r.provider_refund_id for r in stripe(shop).refunds()] == [made["id"]]
    assert shop.payments.charge("A-1001").refunded_cents == 4900


# --- limits across tickets: Stripe's refunds counted in the worker's database -----------------------------------

FIFTY_A_DAY = Limits(customer_cents_per_day=5000, customer_refunds_per_day=None, desk_cents_per_day=None)


def unattended(amount: int = 4000, key: str | None = KEY, order_id: str = "A-1001") -> RefundRequest:
    """A refund of one of ann's orders that nobody approved, held to 50.00 a day."""
    return refund(amount, key, order_id).model_copy(update={"customer_email": "ann@example.com", "limits": FIFTY_A_DAY})


async def test_a_refund_whose_outcome_is_unknown_stays_counted_and_counts_once_when_settled_as_paid(
    shop: Business, account: FakeStripe
) -> None:
    """Stripe made the refund and answered 500 to every attempt: the reservation made before the first one is
    what holds ann's next refund back until the settlement, which keeps it, once."""
    pay_at_stripe(account, shop, "A-1005")  # ann's other order, 25.00
    account.fail("500_after_refund")
    for _attempt in range(3):
        with pytest.raises(PaymentDeferredError):
            await pay(shop, unattended())

    with pytest.raises(NeedsApprovalError, match=r"USD 60\.00 of USD 50\.00"):
        await pay(shop, unattended(2000, "refund:ticket:T-2/A-1005/1", "A-1005"))
    assert await asyncio.to_thread(shop.payments.settle_refund, KEY) is not None

    assert shop.unattended.totals("ann@example.com") == Totals(cents=4000, refunds=1)
    with pytest.raises(NeedsApprovalError, match=r"USD 60\.00 of USD 50\.00"):
        await pay(shop, unattended(2000, "refund:ticket:T-2/A-1005/1", "A-1005"))
    assert (await pay(shop, unattended(1000, "refund:ticket:T-3/A-1005/1", "A-1005"))).amount_cents == 1000


async def test_a_refund_stripe_never_made_stays_counted_until_the_settlement_closes_its_key(
    shop: Business, account: FakeStripe
) -> None:
    pay_at_stripe(account, shop, "A-1005")
    account.fail("rate_limited")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, unattended())
    with pytest.raises(NeedsApprovalError):
        await pay(shop, unattended(2000, "refund:ticket:T-2/A-1005/1", "A-1005"))

    assert await asyncio.to_thread(shop.payments.settle_refund, KEY) is None

    assert shop.unattended.totals("ann@example.com") == Totals()
    assert (await pay(shop, unattended(2000, "refund:ticket:T-2/A-1005/1", "A-1005"))).amount_cents == 2000


async def test_another_request_under_a_key_in_doubt_does_not_release_what_the_first_reserved(
    shop: Business, account: FakeStripe
) -> None:
    """Stripe refuses the second request as a reuse of the key; the first may have paid (it did), so its
    reservation stays until it is settled."""
    account.fail("500_after_refund")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, unattended(4000))

    with pytest.raises(IdempotencyConflictError):
        await pay(shop, unattended(1000))

    assert shop.unattended.totals("ann@example.com") == Totals(cents=4000, refunds=1)


async def test_a_retry_refused_for_the_workers_api_key_keeps_counting_what_the_first_attempt_may_have_paid(
    shop: Business, account: FakeStripe, tmp_path: Path
) -> None:
    """Stripe refuses a revoked key before it looks at the idempotency key, so the refusal says nothing of the
    first attempt, which in fact paid."""
    account.fail("500_after_refund")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, unattended())
    revoked = stripe_business(account, tmp_path, api_key="sk_test_revoked")  # the same database

    with pytest.raises(PaymentsUnusableError):
        await pay(revoked, unattended())

    assert shop.unattended.totals("ann@example.com") == Totals(cents=4000, refunds=1)
    assert await asyncio.to_thread(shop.payments.settle_refund, KEY) is not None
    assert shop.unattended.totals("ann@example.com") == Totals(cents=4000, refunds=1)
    revoked.close()


async def test_a_retry_stripe_refuses_for_good_releases_what_the_first_attempt_reserved(
    shop: Business, account: FakeStripe
) -> None:
    """The first attempt was rate limited (nothing made, nothing known); by the retry a person's refund had taken
    the whole charge, and Stripe, having looked at the key, refuses: nothing was paid under it."""
    account.fail("rate_limited")
    with pytest.raises(PaymentDeferredError):
        await pay(shop, unattended())
    await pay(shop, refund(4900, key="refund:ticket:T-9/A-1001/1"))  # approved by a person: not counted

    with pytest.raises(RefundExceedsChargeError):
        await pay(shop, unattended())

    assert shop.unattended.totals("ann@example.com") == Totals()


# --- settings ---------------------------------------------------------------------------------------------------


def test_stripe_without_a_secret_key_does_not_start_and_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRIPE_API_KEY", raising=False)
    with pytest.raises(ValidationError, match="AGENT_PAYMENTS=stripe needs STRIPE_API_KEY"):
        StripeSettings(payments="stripe")
    with pytest.raises(ValidationError, match="a publishable key \\(pk_\\) cannot refund"):
        StripeSettings(payments="stripe", api_key="pk_test_123")
    with pytest.raises(ValidationError, match="send STRIPE_API_KEY in clear to another machine"):
        StripeSettings(payments="stripe", api_key="sk_test_1", api_base="http://stripe-proxy.internal:8080")
    with pytest.raises(ValidationError, match="must be an http\\(s\\) address"):
        StripeSettings(payments="stripe", api_key="sk_test_1", api_base="ftp://api.stripe.com")


def test_the_key_is_read_as_stripe_names_it_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRIPE_API_KEY", "sk_test_secret_value_42")
    monkeypatch.setenv("AGENT_PAYMENTS", "stripe")
    monkeypatch.setenv("AGENT_STRIPE_API_BASE", "")  # compose passes an unset variable through as ""
    settings = Settings()

    assert settings.stripe.api_key is not None
    assert settings.stripe.api_key.get_secret_value() == "sk_test_secret_value_42"
    assert settings.stripe.api_base is None
    assert "sk_test_secret_value_42" not in repr(settings) + str(settings) + settings.model_dump_json()
    assert wiring.stripe_client(Settings(stripe=StripeSettings(payments="embedded"))) is None


def test_a_worker_told_to_refund_through_stripe_without_a_key_refuses_to_start_saying_why(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != "STRIPE_API_KEY"}
    env |= {"AGENT_PAYMENTS": "stripe", "AGENT_DB_PATH": str(tmp_path / "b.sqlite3")}
    agent_worker = str(Path(sys.executable).with_name("agent-worker"))
    done = subprocess.run([agent_worker, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2
    assert "AGENT_PAYMENTS=stripe needs STRIPE_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr


def test_settings_that_refuse_to_start_do_not_echo_any_part_of_the_key(tmp_path: Path) -> None:
    """Pydantic's own text quotes the input it read, cut to its first and last characters: the key would show
    whenever it came first or last. The worker says what is wrong instead, and nothing of what it read."""
    secret = "sk_live_" + "Q7fz" * 20
    env = {**os.environ, "STRIPE_API_KEY": secret, "AGENT_PAYMENTS": "stripe", "AGENT_DB_PATH": str(tmp_path / "b")}
    agent_worker = str(Path(sys.executable).with_name("agent-worker"))
    for base in ("http://stripe-proxy.internal", "ftp://api.stripe.com"):
        done = subprocess.run(
            [agent_worker, "worker"],
            env={**env, "AGENT_STRIPE_API_BASE": base},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

        assert done.returncode == 2, done.stderr
        assert "AGENT_STRIPE_API_BASE" in done.stderr
        assert "Q7fz" not in done.stdout + done.stderr


# --- whole tickets, on a real Temporal server ------------------------------------------------------------------


@pytest.fixture
def paying(client: Client, shop: Business) -> Harness:
    """A harness whose worker refunds through the fake Stripe account."""
    return Harness(client, shop, task_queue=f"stripe-{uuid.uuid4()}")


async def test_a_ticket_refunds_once_at_stripe_under_the_tickets_key_and_tells_the_customer(
    paying: Harness, account: FakeStripe
) -> None:
    outcome = await paying.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))

    assert outcome.status is Status.RESOLVED
    [made] = account.refunds()
    [sent] = account.refund_requests()
    assert sent["idempotency-key"].startswith(f"refund:ticket:{outcome.ticket_id}/A-1001")
    assert made["amount"] == 4900
    [booked] = stripe(paying.store).refunds()
    assert booked.provider_refund_id == made["id"]
    refund_call = next(c for c in outcome.tool_calls if c.name == "issue_refund")
    assert f"refund #{booked.refund_id}" in refund_call.result
    lookup = next(c for c in outcome.tool_calls if c.name == "lookup_order")
    assert '"refunded_cents":0' in lookup.result.replace(" ", "")


async def test_a_rate_limit_then_success_is_retried_by_temporal_and_pays_once(
    paying: Harness, account: FakeStripe
) -> None:
    account.fail("rate_limited")
    async with paying.worker():
        handle = await paying.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert outcome.status is Status.RESOLVED
    assert await activity_attempts(handle, "issue_refund") == [2]
    assert len(account.refunds()) == 1


@pytest.mark.slow
async def test_500s_after_the_refund_until_the_retries_run_out_are_reconciled_with_stripe_and_pay_once(
    paying: Harness, account: FakeStripe
) -> None:
    """Every retry gets Stripe's saved 500; once the attempts run out the workflow asks the provider, which
    finds the refund by its key in the metadata: the model hears it was made, and nothing pays twice."""
    account.fail("500_after_refund")
    async with paying.worker():
        handle = await paying.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert await activity_attempts(handle, "issue_refund") == [5]
    assert await activity_attempts(handle, "find_refund") == [1]
    assert len(account.refunds()) == 1
    assert outcome.status is Status.RESOLVED
    refund_call = next(c for c in outcome.tool_calls if c.name == "issue_refund")
    assert not refund_call.is_error
    assert "Refunded USD 49.00" in refund_call.result


async def test_a_refund_stripe_refuses_reaches_the_model_at_once_in_stripes_words(
    paying: Harness, account: FakeStripe
) -> None:
    """Someone refunds part of the charge in Stripe's dashboard after the workflow decided the refund: Stripe's
    ``amount_too_large`` is a refusal, not worth a retry, and the model reads it as Stripe wrote it."""
    model = PlaybackModel(
        [calls(("issue_refund", {"order_id": "A-1001", "amount_cents": 4900}), step=1), says("I could not refund.")]
    )
    holds = Holds("issue_refund")
    async with paying.worker(model, plugins=[holds]):
        handle = await paying.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        await holds.entered("issue_refund")
        account.refund_in_dashboard(2000)
        holds.release("issue_refund")
        outcome = await handle.result()

    assert await activity_attempts(handle, "issue_refund") == [1]
    [refused] = outcome.tool_calls
    assert refused.is_error
    assert "Stripe refused the request: Refund amount ($49.00) is greater than unrefunded amount" in refused.result
    assert [r["amount"] for r in account.refunds()] == [2000]  # the dashboard's, and nothing of the worker's


async def test_a_revoked_key_ends_the_ticket_as_failed_for_a_person_without_telling_the_customer_an_error(
    client: Client, account: FakeStripe, tmp_path: Path
) -> None:
    store = stripe_business(account, tmp_path, api_key="sk_test_revoked").create()
    store.orders.add(store.orders.order("A-1001"), stripe_payment=account.charge(4900))
    harness = Harness(client, store, task_queue=f"stripe-{uuid.uuid4()}")
    async with harness.worker():
        handle = await harness.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert outcome.status is Status.FAILED
    assert "could not use the payment provider" in outcome.answer
    assert "Invalid API Key provided" in outcome.answer
    assert "sk_test_revoked" not in outcome.answer
    assert await activity_attempts(handle, "lookup_order") == [1]  # refused for good: no retry spent on it
    assert account.refunds() == []
    assert store.mail.sent() == []


# --- real worker processes, killed ----------------------------------------------------------------------------


@pytest.fixture
async def lab(client: Client, shop: Business, account: FakeStripe) -> AsyncIterator[Lab]:
    """Worker processes that refund through ``account``; ``shop`` reads the database they share."""
    async with Lab(client, shop, settings=stripe_env(account)) as lab:
        yield lab


@pytest.mark.slow
async def test_a_worker_killed_after_stripe_made_the_refund_and_before_it_heard_pays_once(
    lab: Lab, account: FakeStripe
) -> None:
    """The seed's crash table, against Stripe: the refund exists at Stripe, the worker that asked for it is dead
    and booked nothing. The retry asks Stripe under the same key and gets the first refund back."""

    def kill_the_payer(_made: dict[str, Any]) -> None:
        os.kill(lab.workers[-1].pid, signal.SIGKILL)

    account.on_refund = kill_the_payer
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)
    account.on_refund = None

    assert len(lab.killed()) == 1
    assert await activity_attempts(handle, "issue_refund") == [2]
    [made] = account.refunds()
    assert len(account.refund_requests()) == 2
    assert {h["idempotency-key"] for h in account.refund_requests()} == {made["metadata"]["idempotency_key"]}
    [booked] = stripe(lab.store).refunds()
    assert booked.provider_refund_id == made["id"]
    assert outcome.status is Status.RESOLVED
    assert [email.to for email in lab.store.mail.sent()] == ["ann@example.com"]


@pytest.mark.slow
async def test_a_worker_killed_after_it_booked_the_refund_pays_once(lab: Lab, account: FakeStripe) -> None:
    lab.settings["AGENT_FAULTS"] = "after:issue_refund=kill"
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)

    assert len(lab.killed()) == 1
    assert len(account.refunds()) == 1
    assert len(stripe(lab.store).refunds()) == 1
    assert outcome.status is Status.RESOLVED


# --- naming an order's payment --------------------------------------------------------------------------------


def orders_command(*args: str, folder: Path) -> subprocess.CompletedProcess[str]:
    agent_worker = str(Path(sys.executable).with_name("agent-worker"))
    env = {**os.environ, "AGENT_DB_PATH": str(folder / "business.sqlite3")}
    return subprocess.run(
        [agent_worker, "orders", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_an_operator_names_an_orders_stripe_payment_and_the_list_shows_it(tmp_path: Path) -> None:
    assert orders_command("seed-demo", folder=tmp_path).returncode == 0  # beside orders that name no payment
    added = orders_command("add", "B-2001", "4500", "dee@example.com", "--stripe-payment", "pi_3Nk2", folder=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "B-2001\tUSD 45.00\tdee@example.com\tpi_3Nk2" in added.stdout.splitlines()

    changed = orders_command("add", "B-2001", "4600", "dee@example.com", folder=tmp_path)  # the payment stays
    assert "B-2001\tUSD 46.00\tdee@example.com\tpi_3Nk2" in changed.stdout.splitlines()
    assert "A-1001\tUSD 49.00\tann@example.com" in changed.stdout.splitlines()  # a demo order names none


@pytest.mark.parametrize("payment", ["pk_live_123", "pi_", "re_123", "pi_1 OR 1=1", ""])
def test_something_that_is_not_a_stripe_payment_is_refused_and_nothing_is_written(payment: str, tmp_path: Path) -> None:
    refused = orders_command("add", "B-2002", "4500", "dee@example.com", "--stripe-payment", payment, folder=tmp_path)

    assert refused.returncode == 2
    assert "is not a Stripe payment: a PaymentIntent (pi_...) or a Charge (ch_...) id" in refused.stderr
    listed = orders_command("list", folder=tmp_path)
    assert "B-2002" not in listed.stdout
