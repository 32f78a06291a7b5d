"""Several workers at once on one PostgreSQL business store, one of them SIGKILLed in the middle."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from activities.contracts.world import Order
from activities.scripted_model import CHANGE_OF_MIND_CENTS
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import address, spawn_worker, worker_env
from tests.support.tickets import answer, ticket
from tests.support.waits import poll

TICKETS = 50
WAITING = SearchAttributeKey.for_int("AwaitingApprovalCents")


async def approve_as_they_come_up(client: Client, task_queue: str, done: asyncio.Event) -> int:
    """What a person at the approval screen does: list the waiting tickets, approve what each one shows."""
    approved: set[str] = set()
    while not done.is_set():
        query = f"AwaitingApprovalCents > 0 AND TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"
        async for execution in client.list_workflows(query):
            amount = execution.typed_search_attributes.get(WAITING)
            if execution.id not in approved and amount:
                handle = client.get_workflow_handle(execution.id)
                await handle.signal(APPROVE_SIGNAL, answer(amount, approver="ops"))
                approved.add(execution.id)
        await asyncio.sleep(0.2)
    return len(approved)


@pytest.mark.slow
async def test_three_workers_one_killed_mid_run_complete_fifty_tickets_with_one_refund_each(
    client: Client, postgres_url: str
) -> None:
    store = Business.at(postgres_url).create()
    task_queue = f"support-agent-{uuid.uuid4()}"
    orders = [
        Order(order_id=f"O-{1000 + n}", amount_cents=4900 if n % 2 else 1500, customer_email=f"c{n}@example.com")
        for n in range(TICKETS)
    ]
    for order in orders:
        store.orders.add(order)
    env = worker_env(address(client), task_queue, None, AGENT_DATABASE_URL=postgres_url)
    workers = [await spawn_worker(env) for _ in range(3)]
    harness = Harness(client, store, task_queue)
    done = asyncio.Event()
    approver = asyncio.create_task(approve_as_they_come_up(client, task_queue, done))
    try:
        handles = [
            await harness.start(ticket(f"Order {o.order_id} never arrived", email=o.customer_email)) for o in orders
        ]

        async def a_third_mailed() -> bool:
            return sum(len(store.mail.sent(o.customer_email)) for o in orders) >= TICKETS // 3

        await poll(a_third_mailed, timeout=120, what="a third of the tickets to be answered")
        workers[0].send_signal(signal.SIGKILL)  # mid-run: a third of the tickets are done
        outcomes = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 240)
    finally:
        done.set()
        approved = await approver
        for worker in workers:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        await asyncio.gather(*(w.wait() for w in workers))

    assert workers[0].returncode == -signal.SIGKILL
    assert [o.status for o in outcomes] == [Status.RESOLVED] * TICKETS
    for order, outcome in zip(orders, outcomes, strict=True):
        paid = [r.amount_cents for r in store.payments.refunds(order.order_id)]
        assert paid == [r.amount_cents for r in outcome.refunds]  # one refund, the one its ticket says it made
        # the model asked again for a step whose answer died with the worker may decide otherwise (the script's
        # change of mind, 10.00 less): the ticket pays what it decided, once
        assert paid[0] in {order.amount_cents, order.amount_cents - CHANGE_OF_MIND_CENTS}
        assert len(store.mail.sent(order.customer_email)) == 1
    assert approved == TICKETS // 2
    for handle in handles:
        assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    store.close()
