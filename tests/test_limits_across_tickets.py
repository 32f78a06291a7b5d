"""A customer cannot dodge a person by opening many small tickets: what is refunded without a person is counted
across tickets, per customer and for the desk, where refunds are booked, and a refund past a limit waits for a
person, saying which limit it met. Real tickets on real workers; the ledger on PostgreSQL where it matters."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.policy import ApprovalPolicy, Limits, MoneyPolicy
from activities.contracts.world import Order
from agent_worker import policy_file
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.inbox import inbox_for, page_of, person, shown
from tests.support.money import bare_amounts, page_text
from tests.support.processes import address, spawn_worker, worker_env
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_amount

DORA = "dora@example.com"
CAPPED = LOOSE.model_copy(
    update={
        "approval": ApprovalPolicy(limit_cents=2000),
        "limits": Limits(customer_cents_per_day=5000, customer_refunds_per_day=None, desk_cents_per_day=None),
    }
)
"""A person above 20.00 a refund, and above 50.00 a day for one customer."""


def doras_orders(store: Business, count: int) -> list[Order]:
    orders = [Order(order_id=f"D-{7000 + n}", amount_cents=1900, customer_email=DORA) for n in range(count)]
    for order in orders:
        store.orders.add(order)
    return orders


async def test_six_tickets_at_once_for_one_customer_refund_no_more_without_a_person_than_the_cap(
    client: Client, postgres_url: str, tmp_path: Path
) -> None:
    """Six orders of 19.00, six tickets started together on two worker processes sharing PostgreSQL: once each
    stayed under the 20.00 limit and all six were paid. Now two are paid (38.00 of a 50.00 cap) and four wait for
    a person, each saying which limit it met; a person's approval still pays one of them."""
    store = Business.at(postgres_url).create()
    orders = doras_orders(store, 6)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_file.to_toml(CAPPED))
    task_queue = f"support-agent-{uuid.uuid4()}"
    env = worker_env(address(client), task_queue, None, AGENT_DATABASE_URL=postgres_url, AGENT_POLICY_FILE=str(policy))
    workers = [await spawn_worker(env) for _ in range(2)]
    harness = Harness(client, store, task_queue)
    try:
        handles = await asyncio.gather(
            *(harness.start(ticket(f"My parcel for order {o.order_id} never arrived.", email=DORA)) for o in orders)
        )

        async def settled() -> list[int | None] | None:
            amounts = [await waiting_amount(h) for h in handles]
            paid = len(store.payments.refunds())
            return amounts if paid + sum(1 for a in amounts if a) == len(handles) else None

        waiting = await poll(settled, timeout=90, interval=0.2, what="each ticket to be paid or to wait")
        assert sum(r.amount_cents for r in store.payments.refunds()) == 3800
        waiting_handles = [h for h, amount in zip(handles, waiting, strict=True) if amount]
        assert len(waiting_handles) == 4
        request = await awaiting(waiting_handles[0], 1900)
        assert request is not None
        assert (
            request.why
            == f"{DORA}'s refunds without a person in the last 24 hours: USD 57.00 of USD 50.00 with this one"
        )
        await waiting_handles[0].signal(APPROVE_SIGNAL, answer(1900, approver="ops"))
        await waiting_handles[0].result()
        assert sum(r.amount_cents for r in store.payments.refunds()) == 5700
    finally:
        for handle in handles:
            await _end(handle)
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        await asyncio.gather(*(w.wait() for w in workers))
        store.close()


async def test_a_person_approved_refund_neither_meets_nor_uses_up_the_cap(agent: Harness) -> None:
    """Three refunds to dora in one day, the limit three: the first two pay without a person, the third waits
    (3 of 3), a person approves it, and a fourth still waits: the approved one did not count."""
    doras_orders(agent.store, 4)
    policy = CAPPED.model_copy(
        update={"limits": Limits(customer_cents_per_day=None, customer_refunds_per_day=2, desk_cents_per_day=None)}
    )
    async with agent.worker(policy=policy):
        for n in range(2):
            await (await agent.start(ticket(f"Order D-{7000 + n} never arrived.", email=DORA))).result()
        third = await agent.start(ticket("Order D-7002 never arrived.", email=DORA))
        request = await awaiting(third, 1900)
        assert request is not None
        assert "2 of 2 refunds already" in request.why
        await third.signal(APPROVE_SIGNAL, answer(1900, approver="ops"))
        await third.result()
        fourth = await agent.start(ticket("Order D-7003 never arrived.", email=DORA))
        assert await awaiting(fourth, 1900) is not None
        await fourth.terminate("test over")
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [1900, 1900, 1900]


async def test_the_product_default_policy_caps_a_customer_across_tickets(agent: Harness) -> None:
    """With no policy file: 19.00 twice without a person, and the third ticket's 19.00 waits (50.00 a day)."""
    doras_orders(agent.store, 3)
    async with agent.worker(policy=MoneyPolicy()):
        for n in range(2):
            await (await agent.start(ticket(f"Order D-{7000 + n} never arrived.", email=DORA))).result()
        third = await agent.start(ticket("Order D-7002 never arrived.", email=DORA))
        request = await awaiting(third, 1900)
        await third.terminate("test over")
    assert request is not None
    assert (
        request.why == f"{DORA}'s refunds without a person in the last 24 hours: USD 57.00 of USD 50.00 with this one"
    )
    assert len(agent.store.payments.refunds()) == 2


JO = "jo@example.com"
A_THOUSAND_A_DAY = CAPPED.model_copy(
    update={"limits": Limits(customer_cents_per_day=1000, customer_refunds_per_day=None, desk_cents_per_day=None)}
)
"""A person above 2,000 of the smallest unit a refund, and above 1,000 a day for one customer: on a yen order,
JPY 2,000 and JPY 1,000."""


@pytest.mark.parametrize(("currency", "said"), [("JPY", "JPY 1,500 of JPY 1,000"), ("KWD", "KWD 1.500 of KWD 1.000")])
async def test_a_yen_or_dinar_refund_past_a_limit_across_tickets_waits_with_its_reason_in_its_own_currency(
    agent: Harness, currency: str, said: str
) -> None:
    """A yen refund of 1,500 against 1,000 a day once waited "15.00 of 10.00 with this one", a hundred times too
    small and in no currency; a dinar one ten times too large. The query and the inbox now read it as money, and
    nothing on the ticket's page is a bare amount."""
    agent.store.orders.add(Order(order_id="J-7001", amount_cents=1500, customer_email=JO, currency=currency))
    async with inbox_for(agent, A_THOUSAND_A_DAY) as inbox, person(inbox) as ann:
        handle = await agent.start(ticket("My parcel for order J-7001 never arrived.", email=JO))
        request = await awaiting(handle, 1500)
        assert await ann.sign_in("ann") == 303
        _, page = await ann.get(page_of(handle.id))
        await handle.terminate("test over")

    assert request is not None
    assert request.why == f"{JO}'s refunds without a person in the last 24 hours: {said} with this one"
    assert shown(page, "why") == request.why
    assert shown(page, "amount") == said.partition(" of ")[0]
    assert bare_amounts(page_text(page)) == []
    assert agent.store.payments.refunds() == []


async def test_a_refund_past_a_limit_across_currencies_waits_naming_each_and_the_sum_that_met_it(
    agent: Harness,
) -> None:
    """USD 5.00 paid without a person, then JPY 800: the ledger adds their smallest units (1,300 of 1,000), and
    the reason says so rather than calling it 13.00 of anything."""
    agent.store.orders.add(Order(order_id="J-7002", amount_cents=500, customer_email=JO, currency="USD"))
    agent.store.orders.add(Order(order_id="J-7003", amount_cents=800, customer_email=JO, currency="JPY"))
    async with agent.worker(policy=A_THOUSAND_A_DAY):
        await (await agent.start(ticket("Order J-7002 never arrived.", email=JO))).result()
        yen = await agent.start(ticket("Order J-7003 never arrived.", email=JO))
        request = await awaiting(yen, 800)
        await yen.terminate("test over")

    assert request is not None
    assert request.why == (
        f"{JO}'s refunds without a person in the last 24 hours: JPY 800 and USD 5.00 with this one; the limit adds "
        "the smallest units of every currency: 1,300 of 1,000 (JPY 1,000 in this refund's currency)"
    )
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [500]


async def _end(handle: Handle) -> None:
    if (await handle.describe()).close_time is None:
        await handle.terminate("test over")
