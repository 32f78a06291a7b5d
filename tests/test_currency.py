"""Money reads as money: every amount names its order's currency and separates its thousands, from the shop's
record (or Stripe's word) through the ticket's request and results to the customer's email; an amount is always
a count of its currency's smallest unit, so yen have no decimals and dinars have three."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from activities import vouching
from activities.business import Business
from activities.contracts.approvals import ApprovalReceipt, ApprovalRequest, VouchedApproval
from activities.contracts.fields import MAX_CENTS, MINOR_UNITS, amount
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import RefundRecord
from activities.contracts.world import Order, OrderLookup
from agent_worker.config.web import WebSettings
from agent_worker.transcript.entry import Entry
from agent_worker.transcript.reader import currency_of, orders_of
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_business
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting


def test_an_order_looked_up_without_a_currency_is_not_read_as_dollars() -> None:
    """A look-up result that names no currency (a provider that forgot it, a hand-made history) is refused where
    it is read, and the inbox and the transcript then name no currency rather than guess USD."""
    bare = {"order_id": "A-1001", "amount_cents": 4900, "customer_email": "ann@example.com", "refunded_cents": 0}
    with pytest.raises(ValidationError, match="currency"):
        OrderLookup.model_validate(bare)
    told = [Entry("result", "lookup_order returned ...", 9, datetime.now(UTC), "lookup_order", bare)]
    assert orders_of(told) == []
    assert currency_of(orders_of(told)) is None
    told.append(
        Entry("result", "lookup_order returned ...", 15, datetime.now(UTC), "lookup_order", {**bare, "currency": "eur"})
    )
    assert currency_of(orders_of(told)) == "EUR"


CURRENCIES = st.sampled_from(["USD", "eur", "JPY", "KWD", "gbp", "CLP", "BHD"])


@given(units=st.integers(min_value=-MAX_CENTS, max_value=MAX_CENTS), currency=CURRENCIES)
def test_an_amount_reads_back_as_the_same_count_of_its_currencys_smallest_unit(units: int, currency: str) -> None:
    shown = amount(units, currency)

    code, _, number = shown.partition(" ")
    decimals = MINOR_UNITS.get(code, 2)
    assert code == currency.upper()
    assert re.fullmatch(r"-?\d{1,3}(,\d{3})*" + (rf"\.\d{{{decimals}}}" if decimals else ""), number), shown
    assert round(float(number.replace(",", "")) * 10**decimals) == units


def test_amounts_read_as_people_write_them() -> None:
    assert amount(214_748_364, "usd") == "USD 2,147,483.64"
    assert amount(4900, "JPY") == "JPY 4,900"
    assert amount(1_234_567, "KWD") == "KWD 1,234.567"
    assert amount(5, "EUR") == "EUR 0.05"
    assert amount(123_456, None) == "123,456 (1,234.56 in a two-decimal currency)"  # no currency known


def agent_worker(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_DB_PATH": str(db)}
    return subprocess.run([AGENT_WORKER, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_an_order_added_in_euros_lists_in_euros_and_a_currency_that_is_not_one_is_refused_adding_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "business.sqlite3"

    added = agent_worker("orders", "add", "A-7001", "123456", "ann@example.com", "--currency", "eur", db=db)
    refused = agent_worker("orders", "add", "A-7002", "500", "bob@example.com", "--currency", "euro", db=db)
    listed = agent_worker("orders", "list", db=db)

    assert added.returncode == 0, added.stderr
    assert added.stdout == "A-7001\tEUR 1,234.56\tann@example.com\n"
    assert refused.returncode == 2
    assert "'euro' is not a currency: three letters, such as USD, EUR or JPY" in refused.stderr
    assert listed.stdout == added.stdout  # nothing of the refused order was kept


def test_the_currency_an_order_is_charged_in_is_stripes_word_not_the_shops(tmp_path: Path) -> None:
    """The shop's record says USD (the default); the customer paid in euros: Stripe's currency counts."""
    with FakeStripe().running() as account:
        shop = stripe_business(account, tmp_path).create()
        try:
            order = shop.orders.order("A-1001")
            shop.orders.add(order, stripe_payment=account.charge(order.amount_cents, currency="eur"))
            assert shop.orders.order("A-1001").currency == "USD"
            assert shop.payments.charge("A-1001").currency == "EUR"
            shop.orders.add(Order(order_id="A-7003", amount_cents=500, customer_email="c@example.com", currency="JPY"))
            pay_at_stripe(account, shop, "A-7003")
            assert shop.payments.charge("A-7003").currency == "JPY"
        finally:
            shop.close()


KEY = "inbox-key-0123456789abcdef0123456789"
IN = {"EUR": (4900, "EUR 49.00", "EUR 20.00"), "JPY": (490_000, "JPY 490,000", "JPY 2,000")}
"""An order's amount in each currency, how it reads, and how the desk's limit of 2000 units reads in it."""


@pytest.mark.parametrize("currency", IN)
async def test_a_ticket_about_an_order_in_another_currency_names_it_in_the_request_the_results_and_the_email(
    agent: Harness, store: Business, currency: str
) -> None:
    units, shown, limit = IN[currency]
    store.orders.add(Order(order_id="A-7004", amount_cents=units, customer_email="ann@example.com", currency=currency))
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket("My parcel for order A-7004 never arrived."))
        request = await awaiting(handle, units)
        assert request is not None
        assert request.currency == currency
        assert request.why == f"{shown} is above the approval limit of {limit}"
        fields = answer(units, request_id=request.request_id)
        unsigned = VouchedApproval(**fields, signature="0" * 64)
        signed = {**fields, "signature": vouching.sign(KEY.encode(), handle.id, unsigned)}
        receipt = await handle.execute_update(APPROVE_SIGNAL, signed, result_type=ApprovalReceipt)
        await handle.result()

    assert receipt.result == f"Refunded {shown} on order A-7004 (refund #1)."
    (email,) = store.mail.sent()
    assert email.body == f"We have refunded {shown} for order A-7004 (refund #1)."


@pytest.mark.parametrize("currency", ["x" * 10_000, "US", "US$", "€€€", ""])
def test_a_currency_that_is_not_three_letters_is_refused_wherever_a_run_keeps_or_reports_one(currency: str) -> None:
    """A request, a refund record and an answer's row are read from carried state, memos and activities: a currency
    in them is an ISO code or nothing, never a text of any length."""
    deadline = datetime.now(UTC)
    with pytest.raises(ValidationError):
        ApprovalRequest(request_id="R1", amount_cents=4900, deadline=deadline, currency=currency)
    with pytest.raises(ValidationError):
        RefundRecord(refund_id=1, order_id="A-1001", amount_cents=4900, currency=currency)
    with pytest.raises(ValidationError):
        Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com", currency=currency)
    assert ApprovalRequest(request_id="R1", amount_cents=1, deadline=deadline, currency="eur").currency == "EUR"
