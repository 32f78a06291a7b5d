"""A kind of payout is declared once, by the tool that pays it, and every place that reads payouts reads it from
the registry of tools: shown with a paying tool the product does not have, declared only in the tests' support
(``tests.support.gift_cards``), which each of them then counts, tells and checks by its own noun."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.business import Business
from activities.business.refusals import RefundExceedsChargeError
from activities.business.stripe_payments import StripePayments
from activities.contracts.approvals import ApprovalDecision, ApprovalRecord
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.world import Order, RefundRequest
from activities.tools import TOOLS, Client, Rule, Tool, Tools
from agent_worker import tickets
from agent_worker.config import Settings
from agent_worker.config.payment_settings import StripeSettings
from agent_worker.inbox.server import start_inbox
from agent_worker.transcript import Entry, decided_plainly, payout_waited, plainly
from agent_worker.wiring import ClientTimeoutError, check_client_timeouts
from tests.support.fake_stripe import FakeStripe, stripe_business
from tests.support.gift_cards import GIFT_CARD, ISSUE_GIFT_CARD, WITH_GIFT_CARDS, send_gift_card, with_gift_card_ledger
from tests.support.harness import Harness
from tests.support.inbox import inbox_web, page_of, person, shown
from tests.support.models import PlaybackModel, calls, says
from tests.support.stores import StoreFactory
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, poll

ORDER = "G-1001"


def charged(store: Business, amount_cents: int = 4900) -> str:
    store.orders.add(Order(order_id=ORDER, amount_cents=amount_cents, customer_email="ann@example.com"))
    return ORDER


def request(amount_cents: int, key: str) -> RefundRequest:
    return RefundRequest(order_id=ORDER, amount_cents=amount_cents, idempotency_key=key)


def test_a_gift_card_declared_only_by_a_test_counts_against_the_charge_and_is_named_in_the_refusal(
    make_store: StoreFactory,
) -> None:
    """The ledgers' view sums every kind the registry declares, from the table each declares: a card of 40.00 on an
    order of 49.00 leaves 9.00 to pay back, by refund or by store credit, and the refusal says what took the rest."""
    store = with_gift_card_ledger(make_store(kinds=WITH_GIFT_CARDS.payout_kinds()))
    order = charged(store)
    send_gift_card(store, order, 4000)

    assert store.payments.charge(order).refunded_cents == 4000
    said = r"USD 40\.00 of USD 49\.00 is already paid back \(gift cards USD 40\.00\)$"
    with pytest.raises(RefundExceedsChargeError, match=said):
        store.payments.refund(request(1000, "refund:G/1"))
    with pytest.raises(RefundExceedsChargeError, match=said):
        store.credits.issue(request(1000, "store_credit:G/1"))
    assert store.payments.refund(request(900, "refund:G/2")).amount_cents == 900
    assert store.payments.charge(order).refunded_cents == 4900


PAYOUTS = st.lists(st.tuples(st.sampled_from(["refund", "credit", "gift card"]), st.integers(1, 2500)), max_size=10)


def test_whatever_gift_cards_were_sent_refunds_and_credits_pay_exactly_what_every_kind_together_leaves(
    make_store: StoreFactory,
) -> None:
    """Gift cards booked by their own ledger (which checks nothing), refunds and store credit, in any order and
    amounts: a refund or a credit is paid exactly when what was paid back before, gift cards included, leaves room
    for it, and the charge reports every kind together."""
    store = with_gift_card_ledger(make_store(kinds=WITH_GIFT_CARDS.payout_kinds()))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(charged=st.integers(1, 5000), payouts=PAYOUTS)
    def holds(charged: int, payouts: list[tuple[str, int]]) -> None:
        order = f"L-{uuid.uuid4().hex[:8]}"
        store.orders.add(Order(order_id=order, amount_cents=charged, customer_email="ann@example.com"))
        total = 0
        for n, (kind, cents) in enumerate(payouts):
            asked = RefundRequest(order_id=order, amount_cents=cents, idempotency_key=f"{order}/{n}")
            if kind == "gift card":
                send_gift_card(store, order, cents)
                total += cents
                continue
            pay = store.credits.issue if kind == "credit" else store.payments.refund
            if total + cents > charged:
                with pytest.raises(RefundExceedsChargeError) as refused:
                    pay(asked)
                assert ("gift cards" in str(refused.value)) == any(k == "gift card" for k, _ in payouts[:n])
            else:
                pay(asked)
                total += cents
            assert store.payments.charge(order).refunded_cents == total

    holds()


def test_under_stripe_a_gift_card_is_counted_beside_stripes_own_refunds(tmp_path: Path) -> None:
    """Stripe knows nothing of gift cards: its refunded total stands in for the refunds only, and the card is added
    from the worker's ledger, so a refund that Stripe alone would allow is refused."""
    with FakeStripe().running() as account:
        built = stripe_business(account, tmp_path)  # the worker's Stripe client, as its settings make it
        assert isinstance(built.payments, StripePayments)
        url, client = str(built.database.writer.url), built.payments.client
        built.close()
        store = Business.at(url, stripe=client, kinds=WITH_GIFT_CARDS.payout_kinds()).create(seed_demo_orders=False)
        with_gift_card_ledger(store)
        payment = account.charge(4900)
        store.orders.add(
            Order(order_id=ORDER, amount_cents=4900, customer_email="ann@example.com"), stripe_payment=payment
        )
        send_gift_card(store, ORDER, 4000)
        try:
            assert store.payments.charge(ORDER).refunded_cents == 4000
            with pytest.raises(RefundExceedsChargeError, match=r"\(gift cards USD 40\.00\)$"):
                store.payments.refund(request(1000, "refund:G/1"))
        finally:
            store.close()


def test_the_stripe_timeout_is_checked_against_every_activity_that_pays_and_settles_a_test_declared_one_included() -> (
    None
):
    """Which activities call the payment provider is read from the declarations: every tool that pays (its payout is
    checked against the charge, the provider's word), store credit among them, and a test's gift card, each with
    the activity that settles it."""
    slow = Settings(stripe=StripeSettings(timeout_seconds=30))
    with pytest.raises(ClientTimeoutError) as product:
        check_client_timeouts(slow)
    with pytest.raises(ClientTimeoutError) as with_cards:
        check_client_timeouts(slow, WITH_GIFT_CARDS)

    for name in ("lookup_order", "issue_refund", "find_refund", "issue_store_credit", "find_store_credit"):
        assert re.search(rf"\b{name} \(|the {name} activity", str(product.value)), (name, product.value)
    assert "gift_card" not in str(product.value)
    assert "issue_gift_card (30 s)" in str(with_cards.value)
    assert "find_gift_card (10 s)" in str(with_cards.value)
    assert WITH_GIFT_CARDS.calling(Client.PAYMENT_PROVIDER)[-2:] == ("issue_gift_card", "find_gift_card")


def at(minute: int) -> datetime:
    return datetime(2026, 12, 1, 9, minute, tzinfo=UTC)


def test_the_approval_sentences_name_the_gift_card_that_waits_is_answered_and_runs_out() -> None:
    """A payout waiting for a person, the answers about it and its silence are told by the noun its tool declares,
    not as a refund."""
    answer = {"amount_cents": 500, "approved": False, "approver": "ann", "request_id": "R1"}
    told = [
        Entry("approval", "waits", 1, at(1), detail=500, payout=GIFT_CARD),
        Entry("signal", "signal approve", 2, at(2), "approve", answer, GIFT_CARD),
        Entry("answer", "approval inbox", 3, at(3), "approve", answer, GIFT_CARD),
    ]
    timed_out = ApprovalRecord(amount_cents=500, decision=ApprovalDecision.TIMED_OUT, approver=None, at=at(4))

    sentences = [plainly(e, "USD") for e in told]
    sentences.append(decided_plainly(timed_out, "USD", payout_waited(told)))

    assert sentences == [
        "A gift card of USD 5.00 waits for a person",
        "ann, by signal: the approver is as the sender claimed, declines the gift card of USD 5.00 (request R1)",
        "ann, signed in to the approval inbox, declines the gift card of USD 5.00 (request R1)",
        "nobody answered by 2026-12-01 09:04 UTC; the gift card of USD 5.00 was not made",
    ]
    assert not any("refund" in sentence for sentence in sentences)


async def test_a_model_asking_for_a_gift_card_is_told_by_its_noun_in_the_transcript_and_the_inbox(
    agent: Harness,
) -> None:
    """The worker has no such tool and refuses the call; the history keeps what the model asked, and a transcript
    or an inbox given the registry that declares it tells it as a gift card, where the product's tells the name."""
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1001"}), step=1),  # the order's currency, for the page
            calls(("issue_gift_card", {"order_id": "A-1001", "amount_cents": 500}), step=2),
            says("Sorry."),
        ]
    )
    async with agent.worker(model):
        handle = await agent.start(ticket())
        await handle.result()
    run = (await handle.describe()).run_id
    asked = "The agent asked for a gift card of USD 5.00 on order A-1001"

    with_cards = [plainly(e, "USD") for e in await tickets.transcript(agent.client, handle.id, run, WITH_GIFT_CARDS)]
    product = [plainly(e, "USD") for e in await tickets.transcript(agent.client, handle.id, run)]
    assert asked in with_cards
    assert asked not in product
    assert "The agent asked to use issue_gift_card" in product

    inbox = await start_inbox(
        agent.settings(web=inbox_web()), agent.client, host="127.0.0.1", port=0, tools=WITH_GIFT_CARDS
    )
    try:
        async with person(inbox) as ann:
            await ann.sign_in("ann")
            status, page = await ann.get(page_of(handle.id))
    finally:
        await inbox.stop()
    assert status == 200
    assert asked in page


async def test_store_credit_that_waits_for_a_person_is_told_as_store_credit_in_every_run_that_waits(
    agent: Harness,
) -> None:
    """The product's own second kind, through a hand-over at the request: the transcript tells the credit waiting,
    in the run that asked and in the run that took the request over, and the decline, as store credit."""
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1001"}), step=1),
            calls(("issue_store_credit", {"order_id": "A-1001", "amount_cents": 4900}), step=2),
            says("No credit, sorry."),
        ]
    )
    async with agent.worker(model):
        handle = await agent.start(ticket(continue_as_new_after_steps=2, approval_timeout_seconds=60))
        await awaiting(handle, 4900)
        await poll(lambda: handed_over(agent, handle.id), timeout=30, what="the run to hand the request over")
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="bob", reason="Not this time."))
        await handle.result()
    last = (await handle.describe()).run_id
    told = [plainly(e, "USD") for e in await tickets.transcript(agent.client, handle.id, last)]

    assert len(await tickets.run_ids(agent.client, handle.id, last)) >= 2
    assert told.count("A store credit of USD 49.00 waits for a person") >= 2, told
    assert "bob, by signal: the approver is as the sender claimed, declines the store credit of USD 49.00" in told
    assert not any(re.search(r"\brefund of\b", sentence) for sentence in told), told


async def test_the_inbox_tells_a_store_credit_waiting_as_store_credit_to_whoever_reads_its_page(
    agent: Harness,
) -> None:
    """The request's page says what waits, in the transcript and in why someone may not answer it: store credit, as
    its tool declares it, not a refund."""
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1001"}), step=1),
            calls(("issue_store_credit", {"order_id": "A-1001", "amount_cents": 4900}), step=2),
            says("Done."),
        ]
    )
    async with agent.worker(model):
        handle = await agent.start(ticket(approval_timeout_seconds=60, approvers=["ben"]))
        await awaiting(handle, 4900)
        inbox = await start_inbox(agent.settings(web=inbox_web()), agent.client, host="127.0.0.1", port=0)
        try:
            async with person(inbox) as ann:
                await ann.sign_in("ann")
                _, page = await ann.get(page_of(handle.id))
        finally:
            await inbox.stop()
            await handle.cancel()

    assert shown(page, "may-not-answer") == (
        "You (ann) are not among this ticket's approvers for a store credit of USD 49.00 (ben), so it would not "
        "take your answer."
    )
    assert "A store credit of USD 49.00 waits for a person" in page
    assert "The agent asked for a store credit of USD 49.00 on order A-1001" in page
    assert "A refund" not in page
    assert "a refund of" not in page


async def handed_over(agent: Harness, workflow_id: str) -> bool:
    description = await agent.client.get_workflow_handle(workflow_id).describe()
    return len(await tickets.run_ids(agent.client, workflow_id, description.run_id)) >= 2


def test_a_registry_refuses_two_tools_that_would_book_or_settle_as_one() -> None:
    """Two kinds in one table would each count the other's payouts; two under one key prefix or one settling
    activity would settle each other's: refused where the registry is made, with what collides."""
    same_ledger = Tool(
        "issue_voucher",
        ISSUE_GIFT_CARD.args,
        Rule.PAYS,
        ISSUE_GIFT_CARD.returns,
        replace(GIFT_CARD, noun="voucher", key="voucher", settled_by="find_voucher"),
    )
    with pytest.raises(TypeError, match=r"the same ledger: gift_cards$"):
        Tools(*TOOLS.values(), ISSUE_GIFT_CARD, same_ledger)
    with pytest.raises(TypeError, match="one payout kind at most is paid by it"):
        TOOLS.with_tools(
            Tool(
                "refund_again",
                ISSUE_GIFT_CARD.args,
                Rule.PAYS,
                ISSUE_GIFT_CARD.returns,
                replace(GIFT_CARD, noun="refund again", key="r", settled_by="s", ledger="t", through_provider=True),
            )
        )
