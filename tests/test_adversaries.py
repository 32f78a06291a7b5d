"""The money rules tried the way someone who wants them to fail would try them, through the public surface.

Each test is one of issue 13's cases, reproduced against the product as it stood before and fixed since: a
decline overridden while no worker ran, an approval that arrived after the deadline, a late duplicate click,
another customer's order, a repeat refund after the key expired, a second part of a refund, a look-alike
address, and amounts past any column. A real dev server and a real worker each time; a playback model stands
for a customer who has steered the model to ask exactly this.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import EventType

from activities.business import Business
from activities.contracts.approvals import ApprovalDecision, ApprovalRequest
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from activities.contracts.world import Order
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll

BIG = "A-3001"
"""An order of ann's big enough for several parts."""


def big_order(store: Business) -> None:
    store.orders.add(Order(order_id=BIG, amount_cents=20_000, customer_email="ann@example.com"))


def refund(order_id: str, amount: int) -> tuple[str, dict[str, object]]:
    return ("issue_refund", {"order_id": order_id, "amount_cents": amount})


async def until(handle: Handle, kind: EventType.ValueType) -> None:
    """Wait until the run's history has an event of this kind."""
    await poll(lambda: events(handle, kind), timeout=30, what=f"a {EventType.Name(kind)} event")


async def no_wedge(handle: Handle) -> None:
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []


async def test_a_decline_and_an_approval_sent_while_no_worker_runs_the_first_decides(agent: Harness) -> None:
    """Case 1: ann declines, then mallory approves, both while the workers are down for a deploy."""
    handle = None
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
    await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="ann"))
    await handle.signal(APPROVE_SIGNAL, answer(4900, approver="mallory"))
    async with agent.worker():
        outcome = await handle.result()

    assert agent.store.payments.refunds() == []
    assert outcome.status is Status.DECLINED
    (declined, rejected) = outcome.approvals
    assert (declined.decision, declined.approver) == (ApprovalDecision.DECLINED, "ann")
    assert (rejected.decision, rejected.approver) == (ApprovalDecision.REJECTED, "mallory")
    assert rejected.reason.startswith("request R1 was already answered: declined by ann at ")
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert "request R1: refund of USD 49.00 declined by ann" in audit
    assert any(e.startswith("request R1: answer from mallory rejected: request R1 was already answered") for e in audit)
    await no_wedge(handle)


async def test_an_approval_that_reaches_the_server_after_the_timer_fired_releases_nothing(agent: Harness) -> None:
    """Case 2: the worker is down when the approval timer fires, and the approval comes after it."""
    async with agent.worker():
        handle = await agent.start(ticket(approval_timeout_seconds=2))
        request = await awaiting(handle, 4900)
        await until(handle, EventType.EVENT_TYPE_TIMER_STARTED)
    assert request is not None
    await until(handle, EventType.EVENT_TYPE_TIMER_FIRED)  # no worker runs: nothing sees it yet
    await handle.signal(APPROVE_SIGNAL, answer(4900, request_id=request.request_id))
    async with agent.worker():
        outcome = await handle.result()

    assert agent.store.payments.refunds() == []
    assert outcome.status is Status.UNANSWERED  # a late approval is no answer, and nobody declined
    late = next(a for a in outcome.approvals if a.approver == "ann")
    assert late.decision is ApprovalDecision.REJECTED
    assert "after request R1's deadline" in late.reason
    assert [a.decision for a in outcome.approvals].count(ApprovalDecision.TIMED_OUT) == 1
    await no_wedge(handle)


async def test_a_late_duplicate_click_does_not_release_the_next_refund_of_the_same_amount(agent: Harness) -> None:
    """Case 3: two refunds of 49.00 in a row; the first's approval is clicked again while the second waits."""
    big_order(agent.store)
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": BIG}), step=1),
            calls(refund(BIG, 4900), step=2),
            calls(refund(BIG, 4900), step=3),
            says("Refunded twice."),
        ]
    )
    async with agent.worker(model):
        handle = await agent.start(ticket(f"Order {BIG}, twice please"))
        first = await awaiting(handle, 4900)
        assert first is not None
        assert first.request_id == "R1"
        await handle.signal(APPROVE_SIGNAL, answer(4900, request_id="R1"))

        async def second_request() -> ApprovalRequest | None:
            request = await awaiting(handle, 4900)
            return request if request is not None and request.request_id == "R2" else None

        second = await poll(second_request, timeout=20, interval=0.05, what="request R2 to wait")
        await handle.signal(APPROVE_SIGNAL, answer(4900, request_id="R1", approver="ann"))  # the late duplicate
        await asyncio.sleep(0.5)
        assert await awaiting(handle, 4900) == second, "the duplicate released nothing: R2 still waits"
        assert len(agent.store.payments.refunds()) == 1
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="ben", request_id="R2"))
        outcome = await handle.result()

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert [(a.request_id, a.decision) for a in outcome.approvals] == [
        ("R1", ApprovalDecision.APPROVED),
        ("R1", ApprovalDecision.REJECTED),
        ("R2", ApprovalDecision.DECLINED),
    ]
    assert outcome.approvals[1].reason.startswith("request R1 was already answered: approved by ann")
    await no_wedge(handle)


async def test_another_customers_order_is_no_order_at_all_and_nothing_of_it_reaches_the_model(agent: Harness) -> None:
    """Case 4: ann's ticket names A-1004, dev's order."""
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1004"}), step=1),
            calls(refund("A-1004", 899), ("order_events", {"order_id": "A-1004"}), step=2),
            says("Sorry."),
        ]
    )
    outcome = await agent.run(ticket("Refund A-1004, it is mine", approval_limit_cents=10_000), model)

    assert agent.store.payments.refunds() == []
    results = [(c.name, c.is_error, c.result) for c in outcome.tool_calls]
    assert results == [
        ("lookup_order", True, "The tool failed: There is no order A-1004"),
        ("issue_refund", True, "The tool failed: There is no order A-1004"),
        ("order_events", True, "The tool failed: There is no order A-1004"),
    ]
    assert all("dev@example.com" not in r.model_dump_json() for r in model.requests)


async def test_a_repeat_refund_after_the_key_expired_needs_a_person(agent: Harness, tmp_path: object) -> None:
    """Case 5: the per-order key used to be all that stopped a repeat, and it expires after 24 hours (here at
    once). A further part of an order is the workflow's to count, and a person's to approve."""
    expired_at_once = Business.sqlite(agent.store.database.path, key_ttl=timedelta(0)).create()
    big_order(expired_at_once)
    model = PlaybackModel([calls(refund(BIG, 1000), step=1), calls(refund(BIG, 1000), step=2), says("Done.")])
    harness = Harness(agent.client, expired_at_once, agent.task_queue)
    async with harness.worker(model):
        handle = await harness.start(ticket(f"Order {BIG}", approval_limit_cents=5000, approval_timeout_seconds=1))
        outcome = await handle.result()

    assert [r.amount_cents for r in expired_at_once.payments.refunds(BIG)] == [1000]
    assert [r.amount_cents for r in outcome.refunds] == [1000]
    (timed_out,) = outcome.approvals
    assert timed_out.decision is ApprovalDecision.TIMED_OUT
    assert outcome.tool_calls[1].result == "A person did not approve this refund in time, so it was not made."


async def test_asking_again_in_a_new_ticket_needs_a_person_too(agent: Harness) -> None:
    """Case 5 across tickets: the old per-order key stopped a second ticket's repeat only while it lived; the
    provider's record, read with the order, does not expire."""
    big_order(agent.store)
    again = [calls(("lookup_order", {"order_id": BIG}), step=1), calls(refund(BIG, 1000), step=2), says("Done.")]
    async with agent.worker(PlaybackModel(again)):
        first = await (await agent.start(ticket(f"Order {BIG}", approval_limit_cents=5000))).result()
    async with agent.worker(PlaybackModel(again)):
        handle = await agent.start(ticket(f"Order {BIG} again", approval_limit_cents=5000, approval_timeout_seconds=1))
        second = await handle.result()

    assert [r.amount_cents for r in first.refunds] == [1000]
    assert second.refunds == []
    assert [r.amount_cents for r in agent.store.payments.refunds(BIG)] == [1000]
    assert '"refunded_cents":1000' in second.tool_calls[0].result  # the model is told, too
    assert [a.decision for a in second.approvals] == [ApprovalDecision.TIMED_OUT]


async def test_a_second_part_of_a_refund_is_possible_with_a_person_and_each_is_counted_once(agent: Harness) -> None:
    """Case 6: a second refund of another amount on the same order used to be refused (the per-order key
    was taken), and one of the same amount was replayed yet reported as new."""
    big_order(agent.store)
    model = PlaybackModel(
        [
            calls(refund(BIG, 1000), step=1),
            calls(refund(BIG, 500), step=2),
            calls(refund(BIG, 1000), step=3),
            says("Done."),
        ]
    )
    async with agent.worker(model):
        handle = await agent.start(ticket(f"Order {BIG}", approval_limit_cents=5000))
        second = await awaiting(handle, 500)
        assert second is not None
        await handle.signal(APPROVE_SIGNAL, answer(500, request_id=second.request_id))
        third = await awaiting(handle, 1000)
        assert third is not None
        await handle.signal(APPROVE_SIGNAL, answer(1000, request_id=third.request_id))
        outcome = await handle.result()

    assert [r.amount_cents for r in agent.store.payments.refunds(BIG)] == [1000, 500, 1000]
    assert [r.amount_cents for r in outcome.refunds] == [1000, 500, 1000]
    assert len({r.refund_id for r in outcome.refunds}) == 3
    assert [c.result for c in outcome.tool_calls] == [
        f"Refunded USD 10.00 on order {BIG} (refund #1).",
        f"Refunded USD 5.00 on order {BIG} (refund #2).",
        f"Refunded USD 10.00 on order {BIG} (refund #3).",
    ]


async def test_splitting_a_refund_into_parts_below_the_limit_does_not_dodge_a_person(agent: Harness) -> None:
    big_order(agent.store)
    model = PlaybackModel([calls(*(refund(BIG, 1500) for _ in range(3)), step=1), says("Done.")])
    outcome = await agent.run(ticket(f"Order {BIG}", approval_limit_cents=2000, approval_timeout_seconds=1), model)

    assert [r.amount_cents for r in agent.store.payments.refunds(BIG)] == [1500]
    assert [a.decision for a in outcome.approvals] == [ApprovalDecision.TIMED_OUT] * 2


async def test_mail_goes_to_the_customers_address_itself_never_a_look_alike(agent: Harness) -> None:
    """Case 8: ``straße`` case-folds to ``strasse``; a look-alike the model writes must not receive mail."""
    model = PlaybackModel(
        [
            calls(("send_email", {"to": "ann@straße.com", "subject": "Hi", "body": "Your refund"}), step=1),
            calls(("send_email", {"to": "ANN@Strasse.com", "subject": "Hi", "body": "Your refund"}), step=2),
            says("Done."),
        ]
    )
    outcome = await agent.run(ticket("Hello", email="ann@strasse.com"), model)

    assert [(c.is_error, c.result) for c in outcome.tool_calls] == [
        (True, "Emails go only to this ticket's customer, ann@strasse.com."),
        (False, "Email #1 sent to ann@strasse.com."),
    ]
    assert [e.to for e in agent.store.mail.sent()] == ["ann@strasse.com"]


async def test_an_amount_past_64_bits_from_the_model_is_a_tool_error_not_a_wedge(agent: Harness) -> None:
    """A customer can steer the model to any number; the search attribute it would be shown in cannot hold it."""
    model = PlaybackModel([calls(refund("A-1001", 2**70), refund("A-1001", 2**31), step=1), says("Sorry.")])
    async with agent.worker(model):
        handle = await agent.start(ticket())
        outcome = await handle.result()

    assert agent.store.payments.refunds() == []
    for call in outcome.tool_calls:
        assert call.is_error
        assert "amount_cents: Input should be less than or equal to 2147483647" in call.result
    await no_wedge(handle)


async def test_a_signal_without_a_request_id_answers_only_the_request_waiting_when_it_arrives(
    agent: Harness,
) -> None:
    """The used-by contract (``temporal workflow signal`` with amount, approved, approver) keeps working."""
    async with agent.worker():
        handle = await agent.start(ticket(f"ticket {uuid.uuid4()} about A-1001"))
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()
    assert [(a.decision, a.request_id) for a in outcome.approvals] == [(ApprovalDecision.APPROVED, "R1")]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
