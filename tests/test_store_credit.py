"""Store credit (``issue_store_credit``): a voucher instead of a refund, added by its declaration, its body and its
ledger alone. Because its rule is the one a refund is under, it gets what a refund gets: a person above the limit,
one voucher per part however often it is asked for, only the customer's orders, the limits across tickets, and an
unknown outcome settled before the model hears of it. Real tickets on real workers and a real dev server.

And a voucher is money paid back like a refund: an order credited in full is not refunded as well, nor the other
way round, whichever ticket asked first, through the embedded provider and through Stripe (the local fake), with
Claude's real client talking to the local Messages API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.business import Business
from activities.business.refusals import KeyClosedError, RefundExceedsChargeError
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.policy import ApprovalPolicy, Limits, MoneyPolicy
from activities.contracts.ticket import Outcome, Status
from activities.contracts.world import Order, RefundRequest
from agent_worker.config.model_settings import ClaudeSettings
from tests.support.desk import LOOSE
from tests.support.fake_messages_api import FakeMessagesAPI, Reply, message, text, tool_use
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_business
from tests.support.harness import Harness
from tests.support.history import activity_attempts
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

CREDIT = "issue_store_credit"
DORA = "dora@example.com"


def crediting(order_id: str = "A-1001", amount: int = 4900, tool: str = CREDIT) -> PlaybackModel:
    """A model that asks for one payment, then says it is done."""
    return PlaybackModel([calls((tool, {"order_id": order_id, "amount_cents": amount}), step=1), says("Done.")])


def issued(store: Business) -> list[tuple[str, int]]:
    return [(c.order_id, c.amount_cents) for c in store.credits.credits()]


def results(outcome: Outcome) -> list[tuple[bool, str]]:
    return [(c.is_error, c.result) for c in outcome.tool_calls if c.name == CREDIT]


async def test_a_credit_above_the_limit_waits_for_a_person_and_is_issued_once_approved(agent: Harness) -> None:
    async with agent.worker(crediting()):
        handle = await agent.start(ticket(approval_limit_cents=2000))
        request = await awaiting(handle, 4900)
        assert issued(agent.store) == []  # nothing before the person says yes
        assert request is not None
        assert request.why == "USD 49.00 is above the approval limit of USD 20.00"
        await handle.signal(APPROVE_SIGNAL, answer(4900, request_id=request.request_id))
        outcome = await handle.result()

    assert issued(agent.store) == [("A-1001", 4900)]
    assert agent.store.payments.refunds() == []  # a voucher, not the customer's money back
    assert results(outcome) == [(False, "Credited USD 49.00 on order A-1001 (store credit #1).")]
    assert [(r.tool, r.refund_id, r.amount_cents) for r in outcome.refunds] == [(CREDIT, 1, 4900)]
    assert [a.approver for a in outcome.approvals] == ["ann"]


async def test_a_declined_credit_issues_nothing(agent: Harness) -> None:
    async with agent.worker(crediting()):
        handle = await agent.start(ticket(approval_limit_cents=2000))
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="ben"))
        outcome = await handle.result()

    assert issued(agent.store) == []
    ((is_error, said),) = results(outcome)
    assert is_error
    assert said.startswith("A person (ben) declined")
    assert outcome.refunds == []


async def test_the_same_ticket_started_twice_issues_one_credit(agent: Harness) -> None:
    """Two runs of one ticket (a caller that started it under two workflow ids) ask for the same part under the
    same key: the second gets the first voucher back. Its lookup says the order was paid back before (by the first
    run: a lookup cannot tell by whom), so, as for a refund, a person is asked first."""
    same = ticket(approval_limit_cents=10_000)
    async with agent.worker(crediting(amount=1000)):
        first = await (await agent.start(same)).result()
        again = await agent.start(same)
        await awaiting(again, 1000)
        assert issued(agent.store) == [("A-1001", 1000)]
        await again.signal(APPROVE_SIGNAL, answer(1000))
        second = await again.result()

    assert issued(agent.store) == [("A-1001", 1000)]
    assert results(first) == results(second) == [(False, "Credited USD 10.00 on order A-1001 (store credit #1).")]


async def test_another_customers_order_reads_as_no_order(agent: Harness) -> None:
    async with agent.worker(crediting("A-1004", 899)):  # dev's order, asked for on ann's ticket
        outcome = await (await agent.start(ticket(approval_limit_cents=10_000))).result()

    assert results(outcome) == [(True, "The tool failed: There is no order A-1004")]
    assert issued(agent.store) == []


async def test_a_limit_across_tickets_counts_credits_and_refunds_alike(agent: Harness) -> None:
    """A person above 20.00, and above 50.00 a day for one customer: a refund of 19.00 and a credit of 19.00 go
    without a person in two tickets, and a third ticket's credit of 19.00 would pass 50.00, so it waits."""
    for n in range(3):
        agent.store.orders.add(Order(order_id=f"D-{7000 + n}", amount_cents=1900, customer_email=DORA))
    policy = LOOSE.model_copy(
        update={
            "approval": ApprovalPolicy(limit_cents=2000),
            "limits": Limits(customer_cents_per_day=5000, customer_refunds_per_day=None, desk_cents_per_day=None),
        }
    )
    for order_id, tool in (("D-7000", "issue_refund"), ("D-7001", CREDIT)):
        async with agent.worker(crediting(order_id, 1900, tool), policy=policy):
            outcome = await (await agent.start(ticket(f"Order {order_id}", email=DORA))).result()
            assert outcome.refunds, outcome.tool_calls
    assert agent.store.unattended.totals(DORA).cents == 3800

    async with agent.worker(crediting("D-7002", 1900), policy=policy):
        handle = await agent.start(ticket("Order D-7002", email=DORA))
        request = await awaiting(handle, 1900)
        await handle.terminate("test over")
    assert request is not None
    assert (
        request.why == f"{DORA}'s refunds without a person in the last 24 hours: USD 57.00 of USD 50.00 with this one"
    )
    assert issued(agent.store) == [("D-7001", 1900)]


@pytest.mark.parametrize("hangs", [1, 5])
async def test_a_credit_whose_answer_was_lost_is_issued_once(agent: Harness, tmp_path: Path, hangs: int) -> None:
    """The credit is issued, then its attempt hangs past its timeout. Once: the retry gets the voucher back under
    its key. Every attempt: the outcome is unknown, and the ledger is asked (``find_store_credit``) before the model
    hears of it. Either way one voucher, and the model is told it was issued."""
    async with agent.worker(crediting(amount=1000), graceful_shutdown_seconds=1, faults=f"after:{CREDIT}=hang*{hangs}"):
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        outcome = await handle.result()

    assert issued(agent.store) == [("A-1001", 1000)]
    assert results(outcome) == [(False, "Credited USD 10.00 on order A-1001 (store credit #1).")]
    assert outcome.status is Status.RESOLVED
    if hangs == 1:
        assert await activity_attempts(handle, CREDIT) == [2]
        assert await activity_attempts(handle, "find_store_credit") == []
    else:
        assert await activity_attempts(handle, CREDIT) == [5]
        assert await activity_attempts(handle, "find_store_credit") == [1]


def test_the_ledger_keeps_a_settled_key_closed_and_credits_no_more_than_is_left_of_the_charge(
    tmp_path: Path,
) -> None:
    """Through the port alone: what the workflow's rule relies on."""
    store = Business.sqlite(tmp_path / "business.sqlite3").create()
    key = f"store_credit:ticket:T-{uuid.uuid4().hex[:6]}/A-1001/1"
    asked = RefundRequest(order_id="A-1001", amount_cents=1000, idempotency_key=key)

    assert store.credits.settle(key) is None  # never issued: the key closes
    with pytest.raises(KeyClosedError):
        store.credits.issue(asked)
    first = store.credits.issue(asked.model_copy(update={"idempotency_key": "k2"}))
    again = store.credits.issue(asked.model_copy(update={"idempotency_key": "k2"}))
    assert (again.refund_id, again.replayed) == (first.refund_id, True)
    assert store.credits.settle("k2") == again
    with pytest.raises(RefundExceedsChargeError):
        store.credits.issue(RefundRequest(order_id="A-1001", amount_cents=3901, idempotency_key="k3"))
    assert issued(store) == [("A-1001", 1000)]
    store.close()


async def test_a_waiting_credit_is_named_as_a_credit_in_its_request_the_audit_trail_and_the_refusal(
    agent: Harness,
) -> None:
    """Not "a refund": the request, the trail's entries and what the model hears of a decline name the payout as
    its tool declares it."""
    async with agent.worker(crediting()):
        handle = await agent.start(ticket(approval_limit_cents=2000))
        request = await awaiting(handle, 4900)
        assert request is not None
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="ben", request_id="R1"))
        outcome = await handle.result()

    assert request.payout == "store credit"
    trail = agent.store.audit.entries(outcome.ticket_id)
    assert any(e.startswith("store credit of USD 49.00 waits for approval (request R1") for e in trail), trail
    assert "request R1: store credit of USD 49.00 declined by ben" in trail
    assert results(outcome) == [(True, "A person (ben) declined this store credit, so it was not made.")]
    assert not any("refund" in entry for entry in trail if "R1" in entry), trail


# --- a voucher and a refund of one order: never more than its charge ----------------------------------------------

FIFTEEN = Order(order_id="C-3001", amount_cents=1500, customer_email="ann@example.com")
"""Issue #33's order: 15.00, ann's."""


@pytest.fixture(params=["embedded", "stripe"])
def desk(request: pytest.FixtureRequest, client: Client, tmp_path: Path) -> Iterator[Harness]:
    """A harness whose business holds ``FIFTEEN``, paid through the embedded provider or at Stripe (the fake)."""
    queue = f"support-agent-{uuid.uuid4()}"
    if request.param == "embedded":
        store = Business.sqlite(tmp_path / "business.sqlite3").create()
        store.orders.add(FIFTEEN)
        yield Harness(client, store, task_queue=queue)
        store.close()
        return
    with FakeStripe().running() as account:
        store = stripe_business(account, tmp_path).create()
        store.orders.add(FIFTEEN)
        pay_at_stripe(account, store, FIFTEEN.order_id)
        yield Harness(client, store, task_queue=queue)
        store.close()


def asks_for(tool: str, **tool_input: Any) -> Reply:
    return message(tool_use(tool, **tool_input), stop_reason="tool_use")


def paid(tool: str) -> Reply:
    return asks_for(tool, order_id=FIFTEEN.order_id, amount_cents=FIFTEEN.amount_cents)


def paid_back(store: Business) -> int:
    """What both ledgers hold for the order: refunds, and vouchers."""
    refunded = sum(r.amount_cents for r in store.payments.refunds(FIFTEEN.order_id))
    return refunded + sum(c.amount_cents for c in store.credits.credits(FIFTEEN.order_id))


@pytest.mark.parametrize(("first", "then"), [(CREDIT, "issue_refund"), ("issue_refund", CREDIT)])
@pytest.mark.parametrize("tickets", [2, 1], ids=["two tickets", "one ticket"])
async def test_an_order_paid_back_in_full_one_way_is_not_paid_back_again_the_other_way_and_nobody_is_asked(
    desk: Harness, fake_api: FakeMessagesAPI, first: str, then: str, tickets: int
) -> None:
    """Under the default policy both payouts of 15.00 are below the approval limit, so the first goes without a
    person. The second is more than is left of the charge, as the lookup (in a new ticket) or the ticket itself (in
    the same one) knows, every kind of payout counted: refused at once, with nobody asked to approve what could
    not be paid. 15.00 paid back of a 15.00 charge, never 30.00."""
    order, look_up, done = FIFTEEN.order_id, asks_for("lookup_order", order_id=FIFTEEN.order_id), message(text("Done."))
    async with desk.worker(
        policy=MoneyPolicy(), claude=ClaudeSettings(backend="auto")
    ):  # Claude's client, chosen from the SDK's env
        if tickets == 2:
            fake_api.script(look_up, paid(first), done)
            earlier = await (await desk.start(ticket(f"Order {order}"))).result()
            assert [c.is_error for c in earlier.tool_calls] == [False, False], earlier.tool_calls
            fake_api.script(look_up, paid(then), done)
        else:
            fake_api.script(look_up, paid(first), paid(then), done)
        outcome = await (await desk.start(ticket(f"Order {order}"))).result()

    lookup, *payouts = outcome.tool_calls
    if tickets == 2:
        assert '"refunded_cents":1500' in lookup.result.replace(" ", "")  # the voucher or the refund, counted
    refused = payouts[-1]
    assert (refused.name, refused.is_error) == (then, True)
    assert f"is more than is left of order {order}'s charge: USD 15.00 of USD 15.00 was paid back already" in (
        refused.result
    )
    assert outcome.approvals == []
    assert paid_back(desk.store) == desk.store.payments.charge(order).refunded_cents == 1500
    assert outcome.status is Status.RESOLVED
