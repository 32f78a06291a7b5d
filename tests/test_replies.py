"""A ticket stays open for the customer's reply, and each reply is a new turn with the same rules.

Driven as a desk would: replies through the real ``temporal`` CLI (``workflow update execute``) and
``agent-worker reply``, the waiting tickets found in visibility, and what was paid and mailed counted in the
store. The adversary here is a customer who replies to get a refund twice, a relay that sends garbage, and a
reply that arrives after the ticket closed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.names import CUSTOMER_MESSAGE, TICKET_STATE_ATTRIBUTE, WAITING_FOR_MEMO
from activities.contracts.ticket import MessageReceipt, Status, TicketState, Waiting
from agent_worker.cli.devserver import binary
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_for_customer

STATE = SearchAttributeKey.for_keyword(TICKET_STATE_ATTRIBUTE)
DAYS_3 = 3 * 86_400


async def update_with_cli(client: Client, handle: Handle, payload: Any) -> dict[str, Any]:
    out = await run(
        binary("temporal"),
        "--address",
        address(client),
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        handle.id,
        "--name",
        CUSTOMER_MESSAGE,
        "--input",
        json.dumps(payload),
        "-o",
        "json",
    )
    result: dict[str, Any] = json.loads(out)
    return result


async def test_a_reply_starts_a_new_turn_over_the_whole_conversation_and_the_ticket_waits_in_visibility(
    agent: Harness, client: Client
) -> None:
    raw = ticket(
        "My parcel never arrived. Can I have my money back?", reply_window_seconds=DAYS_3, approval_limit_cents=10_000
    )
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        description = await handle.describe()
        waiting = await description.memo_value(WAITING_FOR_MEMO, type_hint=Waiting)
        assert waiting.state is TicketState.WAITING_FOR_CUSTOMER
        assert description.status is WorkflowExecutionStatus.RUNNING

        reply = await update_with_cli(client, handle, {"text": "Sorry, it is order A-1001."})
        assert reply["result"] == {"turn": 2}, reply
        await waiting_for_customer(handle, turns=2)

        said = await run(AGENT_WORKER, "reply", handle.id, "Thank you!", "--wait", "--address", address(client))
        assert "turn 3" in said, said
        assert "Thank you for your message" in said, said
        await handle.cancel(reason="the desk closes the test ticket")
        outcome = await handle.result()

    assert [(t.message, t.status) for t in outcome.turns] == [
        ("My parcel never arrived. Can I have my money back?", Status.RESOLVED),
        ("Sorry, it is order A-1001.", Status.RESOLVED),
        ("Thank you!", Status.RESOLVED),
    ]
    first, second, third = outcome.turns
    assert first.answer.startswith("Which order")
    assert "refunded USD 49.00" in second.answer
    assert (first.first_step, second.first_step, third.first_step) == (1, 2, 6)
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert "the customer replied: turn 2 begins" in audit
    assert "the customer replied: turn 3 begins" in audit
    # Cancelled while it waited: nothing is left saying it still waits.
    assert outcome.status is Status.CANCELLED
    final = await handle.describe()
    assert final.typed_search_attributes.get(STATE) is None
    assert await final.memo_value(WAITING_FOR_MEMO, None) is None


async def test_a_reply_asking_for_the_same_refund_again_is_refused_with_nobody_asked(agent: Harness) -> None:
    """The customer steers the second turn to refund the order again: it was paid back in full, so the refund is
    refused at once, and nobody is asked to approve what could not be paid."""
    raw = ticket(reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Refund order A-1001 again please"})
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome = await handle.result()

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert outcome.approvals == []
    refused = [c.result for c in outcome.tool_calls if c.name == "issue_refund" and c.is_error]
    assert refused, "the second turn asked for the refund again"
    assert set(refused) == {
        (
            "This refund of USD 49.00 was not made, and no person was asked: USD 49.00 is more than is left of order "
            "A-1001's charge: USD 49.00 of USD 49.00 was paid back already."
        )
    }


@pytest.mark.parametrize("continue_as_new_after_steps", [None, 2], ids=["one run", "a run every two steps"])
async def test_a_reply_asking_for_another_orders_refund_past_the_tickets_total_needs_a_person(
    agent: Harness, continue_as_new_after_steps: int | None
) -> None:
    """The second turn refunds another order, and the ticket's total would pass its limit: that part waits for a
    person, who declines, and nothing more is paid. Each turn is judged by what it did, whichever run it ends
    in: the second is declined though the first paid, and the third, which asked for nothing, is resolved."""
    options: dict[str, Any] = {}
    if continue_as_new_after_steps:
        options["continue_as_new_after_steps"] = continue_as_new_after_steps
    raw = ticket(reply_window_seconds=DAYS_3, approval_limit_cents=5000, **options)
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Refund order A-1005 too please"})
        request = await awaiting(handle, 2500)
        assert request is not None
        assert "the ticket's total would pass USD 50.00" in request.why
        await handle.signal("approve", answer(2500, approved=False, request_id=request.request_id))
        await waiting_for_customer(handle, turns=2)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Thanks"})
        await waiting_for_customer(handle, turns=3)
        await handle.cancel()
        outcome = await handle.result()
        runs = [e async for e in agent.client.list_workflows(f"WorkflowId = '{handle.id}'")]

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert [t.status for t in outcome.turns] == [Status.RESOLVED, Status.DECLINED, Status.RESOLVED]
    assert (len(runs) > 2) == bool(continue_as_new_after_steps)  # the marks were handed over, more than once


async def test_replies_that_came_while_the_agent_worked_are_read_together_after_its_answer(agent: Harness) -> None:
    """No reply window: the ticket would close with its answer, but replies it took while working start a turn."""
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)  # the first turn waits for a person
        receipts = [
            await handle.execute_update(CUSTOMER_MESSAGE, {"text": text}, result_type=MessageReceipt)
            for text in ("Any news?", "Hello?")
        ]
        assert [r.turn for r in receipts] == [2, 2]
        await handle.signal("approve", answer(4900))
        outcome = await handle.result()

    assert [t.message for t in outcome.turns][1] == "Any news?\n\nHello?"
    assert outcome.status is Status.RESOLVED
    assert len(outcome.turns) == 2
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"text": "   "}, "text"),
        ({"text": "hi", "approver": "ann"}, "approver"),
        ({"message": "hi"}, "text"),
        ("just a string", "Invalid reply"),
        ({"text": "x" * 20_001}, "text"),
    ],
)
async def test_a_bad_reply_is_refused_at_once_and_leaves_no_trace(agent: Harness, payload: Any, why: str) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(reply_window_seconds=DAYS_3, approval_limit_cents=10_000))
        await waiting_for_customer(handle, turns=1)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(CUSTOMER_MESSAGE, payload)
        assert why in str(refused.value.cause), refused.value.cause
        accepted = await events(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
        assert accepted == []
        # Still open, still waiting, and a good reply after the bad one is taken.
        receipt = await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Thanks"}, result_type=MessageReceipt)
        assert receipt.turn == 2
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        await handle.result()


async def test_replies_with_no_input_or_two_are_refused_too(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(reply_window_seconds=DAYS_3, approval_limit_cents=10_000))
        await waiting_for_customer(handle, turns=1)
        for args in ([], [{"text": "a"}, {"text": "b"}]):
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(CUSTOMER_MESSAGE, args=args)
            assert "one JSON object" in str(refused.value.cause)
        await handle.cancel()
        outcome = await handle.result()
    assert len(outcome.turns) == 1


async def test_a_reply_signalled_by_a_relay_is_taken_and_a_malformed_one_is_audited(
    agent: Harness, client: Client
) -> None:
    temporal = [binary("temporal"), "--address", address(client), "workflow", "signal"]
    async with agent.worker():
        raw = ticket("My parcel never arrived", reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        await run(*temporal, "--workflow-id", handle.id, "--name", CUSTOMER_MESSAGE)  # no input at all
        await run(*temporal, "--workflow-id", handle.id, "--name", CUSTOMER_MESSAGE, "--input", '{"text": ""}')
        await run(
            *temporal, "--workflow-id", handle.id, "--name", CUSTOMER_MESSAGE, "--input", '{"text": "It was A-1005"}'
        )
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome = await handle.result()

    assert outcome.turns[1].message == "It was A-1005"
    assert [r.order_id for r in agent.store.payments.refunds()] == ["A-1005"]
    audit = agent.store.audit.entries(outcome.ticket_id)
    refused = [entry for entry in audit if entry.startswith("a reply signalled to the ticket was not taken")]
    assert len(refused) == 2, audit
    assert "got 0 arguments" in refused[0]
    assert "text" in refused[1]


async def test_a_reply_to_a_closed_ticket_is_refused_by_the_server_and_by_the_cli(
    agent: Harness, client: Client
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        await handle.result()
        with pytest.raises(Exception, match="completed"):
            await handle.execute_update(CUSTOMER_MESSAGE, {"text": "one more thing"})
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "reply",
        handle.id,
        "one more thing",
        "--address",
        address(client),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1
    assert err.decode().startswith("refused:"), err


async def test_the_window_passing_with_no_reply_closes_the_ticket_as_answered(agent_in_skipped_time: Harness) -> None:
    agent = agent_in_skipped_time
    async with agent.worker():
        handle = await agent.start(ticket(reply_window_seconds=DAYS_3, approval_limit_cents=10_000))
        outcome = await handle.result()  # three days pass in skipped time

    assert outcome.status is Status.RESOLVED
    assert len(outcome.turns) == 1
    assert (await handle.describe()).typed_search_attributes.get(STATE) is None
    assert len(agent.store.mail.sent()) == 1


async def test_turns_carry_over_when_the_ticket_continues_as_new(agent: Harness) -> None:
    """A ticket that continues as a new run every two model calls keeps its turns, its pending replies and its
    keys: the second turn runs in later runs and pays nothing twice."""
    raw = ticket(
        "My parcel never arrived",
        reply_window_seconds=DAYS_3,
        continue_as_new_after_steps=2,
        approval_limit_cents=10_000,
    )
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is A-1001"})
        await waiting_for_customer(handle, turns=2)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Thanks"})
        await waiting_for_customer(handle, turns=3)
        await handle.cancel()
        outcome = await handle.result()
        runs = [e async for e in agent.client.list_workflows(f"WorkflowId = '{handle.id}'")]

    assert len(runs) > 1
    assert [t.message for t in outcome.turns] == ["My parcel never arrived", "It is A-1001", "Thanks"]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1


async def test_replies_taken_and_then_cut_short_by_a_cancel_are_in_the_audit_trail(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Any news?"})
        await handle.cancel(reason="by ann: duplicate of T-7")
        outcome = await handle.result()

    assert outcome.status is Status.CANCELLED
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert "1 reply taken and not answered: it was cancelled (by ann: duplicate of T-7)" in audit, audit


async def test_a_parked_ticket_flooded_with_signals_continues_as_new_and_waits_on_for_the_same_reply(
    server_suggesting_early: WorkflowEnvironment, store: Business
) -> None:
    """A relay sends garbage to a ticket waiting for its customer until its history is long: it continues as a new
    run while it waits, listed as waiting all along, until the same moment, and the customer's reply then works."""
    agent = Harness(server_suggesting_early.client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    raw = ticket("My parcel never arrived", reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
        deadline = (await (await handle.describe()).memo_value(WAITING_FOR_MEMO, type_hint=Waiting)).until
        first_run = (await handle.describe()).run_id
        for n in range(40):
            await handle.signal(CUSTOMER_MESSAGE, {"spam": n})

        async def continued() -> bool:
            return (await handle.describe()).run_id != first_run

        await poll(continued, timeout=30, what="the ticket to continue as a new run")
        await waiting_for_customer(handle, turns=1)
        assert (await (await handle.describe()).memo_value(WAITING_FOR_MEMO, type_hint=Waiting)).until == deadline
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is order A-1001"})
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome = await handle.result()

    assert [t.message for t in outcome.turns] == ["My parcel never arrived", "It is order A-1001"]
    assert [r.amount_cents for r in store.payments.refunds()] == [4900]
    audit = store.audit.entries(outcome.ticket_id)
    refused = [e for e in audit if e.startswith("a reply signalled to the ticket")]
    # One entry each up to NOTES_KEPT at a time, the rest counted in one entry: every signal is accounted for.
    counted = [int(e.split()[0]) for e in audit if " more replies signalled to the ticket were not taken" in e]
    assert len(refused) + sum(counted) == 40, audit
    assert len(refused) < 40


async def test_a_parked_ticket_survives_its_worker_and_the_next_worker_takes_the_reply(agent: Harness) -> None:
    raw = ticket("My parcel never arrived", reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
    async with agent.worker():
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
    # No worker runs now: the ticket is still listed as waiting, from visibility alone.
    assert (await handle.describe()).typed_search_attributes.get(STATE) == "waiting_for_customer"
    async with agent.worker():  # a new worker, with an empty cache: it replays the ticket to take the reply
        receipt = await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is A-1001"}, result_type=MessageReceipt)
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome = await handle.result()

    assert receipt.turn == 2
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert outcome.turns[1].status is Status.RESOLVED
