"""Every wait continues as new by one rule, whatever it waits for (a person's answer, the customer's reply, an event
about an order): when the server suggests it or the run's history reaches ``WAIT_EVENTS_BEFORE_CONTINUING`` events,
whichever comes first. On a server whose suggestion is raised past that count, as its dynamic config allows, a
relay's flood of valid ``order_event`` signals would otherwise grow the waiting run until the server refuses every
signal (10,000 a run, its default cap: an approval's included) or ends it at 51,200 events, the ticket unanswered.
Each kind of wait is flooded here until its run hands over; the next run waits on for the same thing until the same
moment, and the ticket then ends as it should."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.limits import WAIT_EVENTS_BEFORE_CONTINUING
from activities.contracts.names import APPROVE_SIGNAL, ORDER_EVENT_SIGNAL, WAITING_FOR_MEMO
from activities.contracts.ticket import Outcome, Status, Waiting
from activities.scripted_model import ON_ITS_WAY
from agent_worker.cli.devserver import start_dev_server
from tests.support.harness import Harness
from tests.support.history import failed_workflow_tasks
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_for_customer, waiting_for_event

RAISED_SUGGESTION = 40_000
"""The server's continue-as-new suggestion, raised far past the project's own count (Temporal's default is 4Ki)."""
BATCH = 80
"""Signals sent at once: a relay's burst."""
FLUSHED = f"{WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND}: "
"""How a workflow task failed by the server to flush the signals buffered while it ran reads in the history: past
``history.maxBufferedEventsBatch`` (100) the server fails the task in flight and sends a new one with them all. The
flood's doing, not the ticket's: every other failure of a workflow task is the ticket's."""
FLOOD_AT_MOST = WAIT_EVENTS_BEFORE_CONTINUING
"""Signals enough to grow any run to that count: each adds at least one event to its history."""
DAYS_3 = 3 * 24 * 3600


@pytest.fixture
async def server_suggesting_late() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(
        None,
        extra_args=["--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={RAISED_SUGGESTION}"],
    )
    yield env
    await env.shutdown()


async def flood_until_it_continues(agent: Harness, workflow_id: str) -> int:
    """Valid events about another order, in bursts, until the waiting run's history holds
    ``WAIT_EVENTS_BEFORE_CONTINUING`` events (or the run hands over first); then the run must continue as new, with no
    more signals to wake it. The history length the waiting run handed over at."""
    handle = agent.client.get_workflow_handle(workflow_id)  # the latest run, whichever that is
    waiting = await handle.describe()
    waiting_run, sent = waiting.run_id, 0
    while waiting.run_id == waiting_run and waiting.history_length < WAIT_EVENTS_BEFORE_CONTINUING:
        assert sent < FLOOD_AT_MOST, f"{sent} signals grew the waiting run to only {waiting.history_length} events"
        await asyncio.gather(
            *(
                handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "B-9999", "event": "scanned", "detail": str(sent + n)})
                for n in range(BATCH)
            )
        )
        sent += BATCH
        waiting = await handle.describe()

    async def continued() -> bool:
        return (await handle.describe()).run_id != waiting_run

    await poll(continued, timeout=60, what=f"the waiting run to continue as new after {sent} signals")
    closed = await agent.client.get_workflow_handle(workflow_id, run_id=waiting_run).describe()
    return closed.history_length


Seen = Callable[[Handle], Awaitable[object]]
"""What a ticket waits for, once it waits: what must be the same after the hand-over."""
Ends = Callable[[Handle], Awaitable[None]]
"""What ends the wait (an answer, an event, a cancel)."""


async def approval(agent: Harness) -> tuple[Handle, Seen, Ends]:
    handle = await agent.start(ticket())

    async def waits(h: Handle) -> object:
        request = await awaiting(h, 4900)
        assert request is not None
        return (request.request_id, request.deadline)

    async def ends(h: Handle) -> None:
        await h.signal(APPROVE_SIGNAL, answer(4900))

    return handle, waits, ends


async def reply(agent: Harness) -> tuple[Handle, Seen, Ends]:
    handle = await agent.start(ticket(reply_window_seconds=DAYS_3, approval_limit_cents=10_000))

    async def waits(h: Handle) -> object:
        await waiting_for_customer(h, 1)
        waiting: Waiting = await (await h.describe()).memo_value(WAITING_FOR_MEMO, type_hint=Waiting)
        return (waiting.state, waiting.until)

    async def ends(h: Handle) -> None:
        await h.cancel()

    return handle, waits, ends


async def event(agent: Harness) -> tuple[Handle, Seen, Ends]:
    handle = await agent.start(ticket(f"My parcel for order A-1001 is {ON_ITS_WAY}?", approval_limit_cents=10_000))

    async def waits(h: Handle) -> object:
        waiting = await waiting_for_event(h)
        return (waiting.order_id, waiting.until)

    async def ends(h: Handle) -> None:
        await h.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "event": "delivered"})

    return handle, waits, ends


ENDED_AS = {"approval": Status.RESOLVED, "reply": Status.CANCELLED, "event": Status.RESOLVED}


@pytest.mark.parametrize("wait", [approval, reply, event], ids=["approval", "reply", "event"])
async def test_a_flooded_wait_continues_as_new_at_the_projects_own_count_on_a_server_whose_suggestion_is_raised(
    server_suggesting_late: WorkflowEnvironment,
    store: Business,
    wait: Callable[[Harness], Awaitable[tuple[Handle, Seen, Ends]]],
) -> None:
    agent = Harness(server_suggesting_late.client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    async with agent.worker():
        handle, waits, ends = await wait(agent)
        before = await waits(handle)
        handed_over_at = await flood_until_it_continues(agent, handle.id)
        latest = agent.client.get_workflow_handle(handle.id, result_type=Outcome)
        after = await waits(latest)
        await ends(latest)
        outcome = await asyncio.wait_for(latest.result(), 60)

    assert WAIT_EVENTS_BEFORE_CONTINUING <= handed_over_at < RAISED_SUGGESTION
    assert after == before
    assert outcome.status is ENDED_AS[wait.__name__]
    assert [f for f in await failed_workflow_tasks(agent.client, handle.id) if f != FLUSHED] == []
