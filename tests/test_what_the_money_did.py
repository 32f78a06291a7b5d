"""What a person is told of an answer is what the money did: two tickets each wait to refund the whole of one order,
the first is paid, and the second's approval is refused by the booking. ``approve``, ``show`` and the inbox say so
(paid with its id; refused with the booking's reason), ``approve`` exits 0 only for a payout booked, and the ticket
asks nobody again for money the order's ledger no longer holds."""

from __future__ import annotations

import asyncio

from temporalio.client import Client, WorkflowExecutionStatus

from activities.contracts.approvals import ApprovalDecision
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome
from agent_worker import tickets
from tests.support.harness import Harness
from tests.support.inbox import inbox_for, notice_kind, notice_of, person, start_with_cli, waiting_request
from tests.support.processes import AGENT_WORKER, address, exited, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll

ALREADY_PAID = "USD 49.00 of USD 49.00 is already paid back"
"""What the booking says of a refund of order A-1001 (49.00) once another ticket refunded all of it."""


async def two_tickets_waiting_for_the_whole_order(agent: Harness) -> tuple[Handle, Handle]:
    first, second = await agent.start(ticket()), await agent.start(ticket())
    await awaiting(first, 4900)
    await awaiting(second, 4900)
    return first, second


async def test_approve_exits_0_only_for_a_refund_booked_and_tells_a_refused_one_with_the_bookings_reason(
    agent: Harness, client: Client
) -> None:
    cli = ["--address", address(client)]
    async with agent.worker():
        first, second = await two_tickets_waiting_for_the_whole_order(agent)
        code, out, _ = await exited(
            AGENT_WORKER, "approve", first.id, "--amount-cents", "4900", "--approver", "ann", *cli
        )
        assert (code, out.strip()) == (
            0,
            f"approved USD 49.00 (R1) on {first.id} as ann: the ticket took it; refund #1 of USD 49.00 on A-1001 paid",
        )
        code, out, _ = await exited(
            AGENT_WORKER, "approve", second.id, "--amount-cents", "4900", "--approver", "ann", *cli
        )
        assert code == 6  # approved, but the payment was refused
        assert out.strip().startswith(
            f"approved USD 49.00 (R1) on {second.id} as ann: the ticket took it; refund of USD 49.00 on A-1001 "
            "refused by the booking, nothing paid: "
        ), out
        assert ALREADY_PAID in out
        await asyncio.wait_for(first.result(), 60)
        await asyncio.wait_for(second.result(), 60)
        shown = await run(AGENT_WORKER, "show", second.id, *cli)

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    (line,) = [line for line in shown.splitlines() if line.startswith("approval approved USD 49.00 by ann")]
    assert "refund of USD 49.00 on A-1001 refused by the booking, nothing paid: " in line
    assert ALREADY_PAID in line


async def test_a_refund_the_ledger_no_longer_covers_is_refused_without_asking_anyone_again(agent: Harness) -> None:
    """The second ticket's approved refund is refused by the booking; the model asks for it again, and the ticket,
    reading what was paid back as the ledger has it now, refuses it with nobody asked: no request R2."""
    async with agent.worker():
        first, second = await two_tickets_waiting_for_the_whole_order(agent)
        await first.signal(APPROVE_SIGNAL, answer(4900))
        await asyncio.wait_for(first.result(), 60)
        await second.signal(APPROVE_SIGNAL, answer(4900))

        async def closed_or_asking_again() -> bool | None:
            if (await second.describe()).status != WorkflowExecutionStatus.RUNNING:
                return True
            request = await tickets.waiting_request(agent.client, second.id)
            return True if request is not None and request.request_id != "R1" else None

        await poll(closed_or_asking_again, timeout=60, what="the second ticket to close, or to ask a person again")
        asked_again = await tickets.waiting_request(agent.client, second.id)
        if asked_again is not None:
            await second.terminate("the test saw it ask again")
        else:
            outcome = await second.result()

    assert asked_again is None, f"asked a person again for what is paid back: {asked_again}"
    assert [(a.request_id, a.decision) for a in outcome.approvals] == [("R1", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    audit = agent.store.audit.entries(outcome.ticket_id)
    (refused,) = [e for e in audit if "refused without asking anyone" in e]
    assert "USD 49.00 of USD 49.00 was paid back already" in refused, audit


async def test_the_inbox_tells_an_approval_whose_payment_the_booking_refused_as_refused(agent: Harness) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        first = await start_with_cli(agent)
        second = await start_with_cli(agent)
        await waiting_request(agent.client, first)
        request = await waiting_request(agent.client, second)
        assert request is not None
        await agent.client.get_workflow_handle(first).signal(APPROVE_SIGNAL, answer(4900, approver="bob"))
        await agent.client.get_workflow_handle(first, result_type=Outcome).result()
        assert await ann.sign_in("ann") == 303
        status, page = await ann.answer(second, request)
        assert (status, notice_kind(page)) == (303, "rejected"), notice_of(page)
        said = notice_of(page)
        assert said.startswith("approved, but the payment was refused: refund of USD 49.00 on A-1001 refused"), said
        assert ALREADY_PAID in said
        await asyncio.wait_for(agent.client.get_workflow_handle(second, result_type=Outcome).result(), 60)


async def test_show_tells_what_the_money_did_after_the_ticket_continued_as_new(agent: Harness, client: Client) -> None:
    """The settlement is the memo's, and the run that continues the ticket keeps it: ``show`` of the closed ticket
    tells the refund paid in the run before."""
    async with agent.worker():
        handle = await agent.start(ticket(continue_as_new_after_steps=3))
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        await asyncio.wait_for(handle.result(), 60)
        described = await handle.describe()
        shown = await run(AGENT_WORKER, "show", handle.id, "--address", address(client))

    assert described.run_id != handle.first_execution_run_id, "the ticket continued as new after its refund"
    (line,) = [line for line in shown.splitlines() if line.startswith("approval approved USD 49.00 by ann")]
    assert line.endswith(": refund #1 of USD 49.00 on A-1001 paid"), line
