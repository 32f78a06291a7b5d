"""The agent waits durably for news from another system: ``wait_for_delivery_scan`` parks the ticket until an
``order_event`` signal about the order arrives, or the hours run out, and tells the model which.

Events are sent with the real ``temporal workflow signal``, as a webhook relay would; the waiting ticket is
found in visibility with ``agent-worker tickets --waiting-for event``; what was paid is counted in the store.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.contracts.names import ORDER_EVENT_SIGNAL, WAITING_FOR_MEMO, WORKFLOW_NAME
from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.devserver import binary
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.models import PlaybackModel, calls, says
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, ticket
from tests.support.waits import poll, waiting_for_event
from workflows.waits import TICKET_STATE

ON_ITS_WAY = "My parcel for order A-1001 is late. Is it still on its way?"


async def start_with_event(agent: Harness, event: dict[str, Any]) -> Handle:
    """Signal-with-start: the event is in the history before the ticket's first step, let alone its wait."""
    return await agent.client.start_workflow(
        WORKFLOW_NAME,
        ticket(ON_ITS_WAY, approval_limit_cents=10_000),
        id=f"ticket-{uuid.uuid4()}",
        task_queue=agent.task_queue,
        result_type=Outcome,
        start_signal=ORDER_EVENT_SIGNAL,
        start_signal_args=[event],
    )


async def relay(client: Client, handle: Handle, *payload: str) -> None:
    """Signal as a webhook relay would, with the temporal CLI (``payload`` empty: a signal with no input)."""
    await run(
        binary("temporal"),
        "--address",
        address(client),
        "workflow",
        "signal",
        "--workflow-id",
        handle.id,
        "--name",
        ORDER_EVENT_SIGNAL,
        *(arg for p in payload for arg in ("--input", p)),
    )


async def test_a_ticket_waits_for_the_carrier_is_listed_meanwhile_and_hears_the_event_about_its_order(
    agent: Harness, client: Client
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(ON_ITS_WAY, approval_limit_cents=10_000))
        waiting = await waiting_for_event(handle)
        assert waiting.order_id == "A-1001"

        async def listing_it() -> str | None:  # visibility is eventually consistent
            listed = await run(AGENT_WORKER, "tickets", "--waiting-for", "event", "--address", address(client))
            return listed if handle.id in listed else None

        listed = await poll(listing_it, timeout=30, what="tickets --waiting-for event to list the ticket")
        assert "waiting for an event about A-1001" in listed, listed

        await relay(client, handle)  # no input: audited, nothing taken
        await relay(client, handle, '{"order_id": "not-an-order", "event": "delivered"}')
        await relay(client, handle, '{"order_id": "A-1004", "event": "delivered", "detail": "dev\'s parcel"}')
        await relay(client, handle, '{"order_id": "A-1001", "event": "delivered", "detail": "left with a neighbour"}')
        outcome = await handle.result()

    assert outcome.status is Status.RESOLVED
    assert outcome.answer == "About order A-1001: Reported about order A-1001: delivered: left with a neighbour"
    assert agent.store.payments.refunds() == []
    assert (await handle.describe()).typed_search_attributes.get(TICKET_STATE) is None
    audit = agent.store.audit.entries(outcome.ticket_id)
    not_taken = [entry for entry in audit if entry.startswith("an order event was not taken")]
    assert len(not_taken) == 2, audit
    assert "got 0 arguments" in not_taken[0]
    assert "order_id" in not_taken[1]


async def test_an_event_sent_before_the_wait_began_is_not_lost(agent: Harness) -> None:
    event = {"order_id": "A-1001", "event": "out_for_delivery"}
    async with agent.worker():
        handle = await start_with_event(agent, event)
        outcome = await handle.result()

    assert outcome.answer == "About order A-1001: Reported about order A-1001: out_for_delivery"
    assert await events(handle, EventType.EVENT_TYPE_TIMER_STARTED) == []  # it never had to wait


async def test_no_event_in_time_tells_the_model_so_and_an_event_about_another_order_does_not_wake_it(
    agent_in_skipped_time: Harness,
) -> None:
    agent = agent_in_skipped_time
    other = {"order_id": "A-1005", "event": "delivered"}  # ann's other order: a wait for A-1001 leaves it
    async with agent.worker():
        handle = await start_with_event(agent, other)
        outcome = await handle.result()  # 48 hours pass in skipped time

    waited = next(call for call in outcome.tool_calls if call.name == "wait_for_delivery_scan")
    assert waited.result == "No event about order A-1001 arrived within 48 hours."
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]  # the parcel is lost: refunded, once
    assert outcome.status is Status.RESOLVED


async def test_the_model_cannot_wait_on_another_customers_order(agent: Harness) -> None:
    model = PlaybackModel([calls(("wait_for_delivery_scan", {"order_id": "A-1004", "hours": 1})), says("ok")])
    async with agent.worker(model):
        handle = await agent.start(ticket(ON_ITS_WAY))
        outcome = await handle.result()

    (call,) = outcome.tool_calls
    assert (call.is_error, call.result) == (True, "The tool failed: There is no order A-1004")
    assert await events(handle, EventType.EVENT_TYPE_TIMER_STARTED) == []


async def test_a_ticket_cancelled_while_it_waits_for_an_event_leaves_nothing_waiting(
    agent: Harness, client: Client
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(ON_ITS_WAY, approval_limit_cents=10_000))
        await waiting_for_event(handle)
        await run(
            AGENT_WORKER,
            "cancel",
            handle.id,
            "--reason",
            "carrier confirmed by phone",
            "--by",
            "ann",
            "--address",
            address(client),
        )
        outcome = await handle.result()

    assert outcome.status is Status.CANCELLED
    description = await handle.describe()
    assert description.typed_search_attributes.get(TICKET_STATE) is None
    assert await description.memo_value(WAITING_FOR_MEMO, None) is None
    assert agent.store.payments.refunds() == []
