"""A ticket continuing as a new run hands over everything it took, whatever arrives while it does: an approval
that lands while the closing run writes its audit trail and archives its records is audited before the snapshot
and paid once in the next run, never rejected there as forged; an inbox answer that reaches the next run in its
first task is judged against the request that run takes over; a burst of approvals across hand-overs decides the
request once. Real tickets on a real dev server; the moments are made by holding an activity
(``tests.support.holds``) or slowing the hand-over's own workflow task."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from activities import vouching
from activities.business import Business
from activities.contracts.approvals import ApprovalDecision, ApprovalReceipt, ApprovalRecord, VouchedApproval
from activities.contracts.names import APPROVE_SIGNAL
from agent_worker.config.web import WebSettings
from tests.support.harness import Harness
from tests.support.holds import Holds, NextRunStumbles
from tests.support.inbox import KEY
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll

HANDS_OVER_AT_THE_REQUEST: dict[str, Any] = {"continue_as_new_after_steps": 2, "approval_timeout_seconds": 60}
"""A ticket whose first run continues as new as soon as its refund of 49.00 waits (its second model call)."""


def signed(handle: Handle, approver: str = "ann", amount: int = 4900) -> dict[str, Any]:
    fields = answer(amount, approver=approver, request_id="R1")
    unsigned = VouchedApproval(**fields, signature="0" * 64)
    return {**fields, "signature": vouching.sign(KEY.encode(), handle.id, unsigned)}


def decided(approvals: list[ApprovalRecord]) -> list[tuple[str | None, ApprovalDecision]]:
    """The answers that decided a request, or counted toward it."""
    counted = {ApprovalDecision.APPROVED, ApprovalDecision.DECLINED, ApprovalDecision.PARTLY_APPROVED}
    return [(a.request_id, a.decision) for a in approvals if a.decision in counted]


async def test_an_approval_signalled_while_the_run_hands_over_is_audited_and_paid_once_not_rejected_as_forged(
    agent: Harness,
) -> None:
    holds = Holds("archive_records")
    async with agent.worker(plugins=[holds]):
        handle = await agent.start(ticket(**HANDS_OVER_AT_THE_REQUEST))
        await holds.entered("archive_records")  # the first run is handing over, its refund waiting for R1
        await handle.signal(APPROVE_SIGNAL, answer(4900, request_id="R1"))
        holds.release("archive_records")
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert decided(outcome.approvals) == [("R1", ApprovalDecision.APPROVED)]
    assert [a.reason for a in outcome.approvals if a.decision is ApprovalDecision.REJECTED] == []
    trail = agent.store.audit.entries(outcome.ticket_id)
    assert "request R1: refund of USD 49.00 approved by ann" in trail


async def test_an_inbox_approval_sent_while_the_run_hands_over_is_told_the_next_run_pays_it_and_it_does(
    agent: Harness,
) -> None:
    holds = Holds("archive_records")
    async with agent.worker(plugins=[holds], web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(**HANDS_OVER_AT_THE_REQUEST))
        await holds.entered("archive_records")
        sent = asyncio.create_task(handle.execute_update(APPROVE_SIGNAL, signed(handle), result_type=ApprovalReceipt))
        await asyncio.sleep(0.5)  # the update is taken by the closing run, which waits for it before it hands over
        holds.release("archive_records")
        receipt = await asyncio.wait_for(sent, 30)
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert (receipt.decision, receipt.result) == (
        ApprovalDecision.APPROVED,
        "The ticket continues in a new run, which acts on the answer.",
    )
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert decided(outcome.approvals) == [("R1", ApprovalDecision.APPROVED)]
    assert [a.reason for a in outcome.approvals if a.decision is ApprovalDecision.REJECTED] == []


async def test_an_inbox_approval_that_reaches_a_continued_run_in_its_first_task_is_taken(agent: Harness) -> None:
    """The update is sent while the continued run's first workflow task is in flight, which then fails: the next
    attempt of that task brings the update with the run's start, before the run has taken over its request."""
    stumbles = NextRunStumbles(seconds=1.0)
    async with agent.worker(plugins=[stumbles], web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(**HANDS_OVER_AT_THE_REQUEST))
        await asyncio.to_thread(stumbles.stumbling.wait, 30)
        receipt = await asyncio.wait_for(
            handle.execute_update(APPROVE_SIGNAL, signed(handle), result_type=ApprovalReceipt), 30
        )
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert receipt.decision is ApprovalDecision.APPROVED
    assert receipt.result == "Refunded USD 49.00 on order A-1001 (refund #1)."
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert decided(outcome.approvals) == [("R1", ApprovalDecision.APPROVED)]


async def test_a_burst_of_approvals_across_hand_overs_decides_the_request_once(
    server_suggesting_early: WorkflowEnvironment, store: Business
) -> None:
    """Approvals and wrong amounts, sent at once while the first run hands over and again in the runs after it
    (the wrong amounts grow each history past the server's suggestion, so a waiting run continues as new again):
    one approval decides, one refund is paid, and no answer is lost or rejected as forged on the way."""
    agent = Harness(server_suggesting_early.client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    holds = Holds("archive_records")

    def burst(round_: int) -> list[dict[str, Any]]:
        wrong = [answer(1000 + n, approver=f"mallory{round_}-{n}") for n in range(30)]
        right = [answer(4900, approver=f"ben{round_}-{n}", request_id="R1") for n in range(5)]
        return [payload for pair in zip(wrong[::6], right, strict=True) for payload in pair] + wrong

    async with agent.worker(plugins=[holds]):
        handle = await agent.start(ticket(**HANDS_OVER_AT_THE_REQUEST))
        await holds.entered("archive_records")
        await asyncio.gather(*(handle.signal(APPROVE_SIGNAL, payload) for payload in burst(1)))
        holds.release("archive_records")
        await asyncio.gather(*(handle.signal(APPROVE_SIGNAL, payload) for payload in burst(2)))
        outcome = await asyncio.wait_for(handle.result(), 90)

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert decided(outcome.approvals) == [("R1", ApprovalDecision.APPROVED)]
    forged = [a.reason for a in outcome.approvals if "audit trail does not hold" in a.reason]
    assert forged == []


async def test_the_approvers_are_carried_once_in_the_request_that_waits_not_again_by_the_gate(agent: Harness) -> None:
    """What a run hands the next holds the approvers in the ticket and in the waiting request only: a list of
    approvers is not carried three times toward the payload limit."""
    named = ["ann", "ben"]
    async with agent.worker():
        handle = await agent.start(ticket(**HANDS_OVER_AT_THE_REQUEST, approvers=named))
        first = agent.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)

        async def continued() -> bool:
            return (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW

        await poll(continued, timeout=30, interval=0.05, what="the first run to continue as new")
        await awaiting(handle, 4900)
        history = await first.fetch_history()
        await handle.signal(APPROVE_SIGNAL, answer(4900, request_id="R1"))
        await asyncio.wait_for(handle.result(), 60)

    handed = history.events[-1].workflow_execution_continued_as_new_event_attributes
    _, state = await agent.client.data_converter.decode(handed.input.payloads)
    assert state["gate"]["approvers"] == []
    assert state["gate"]["waiting"]["approvers"] == named
