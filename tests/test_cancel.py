"""A ticket cancelled at any point ends cleanly: while the model thinks, while a refund is in flight, while it
waits for a person. Each is cancelled from outside as an operator would, with the real ``temporal`` CLI or
``agent-worker cancel``, on a real worker, and each is counted in the store: refunds, emails, audit entries.

Before, a cancel during a tool call read to the model as "the tool failed" and the loop went on, one during
``think`` ended the ticket as ``failed``, and one during a wait left ``AwaitingApprovalCents`` set.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus

from activities.contracts.conversation import Decision, ThinkRequest
from activities.contracts.names import APPROVAL_REQUEST_MEMO
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import binary
from tests.support.demonstrations import Demonstration
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll
from workflows.approval_gate import AWAITING_APPROVAL


async def activity_running(handle: Handle, name: str) -> None:
    """Wait until an attempt of ``name`` has started on a worker."""

    async def started() -> bool:
        pending = (await handle.describe()).raw_description.pending_activities
        return any(
            a.activity_type.name == name and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            for a in pending
        )

    await poll(started, timeout=30, what=f"an attempt of {name} to start")


async def temporal_cancel(client: Client, handle: Handle) -> None:
    await run(binary("temporal"), "--address", address(client), "workflow", "cancel", "--workflow-id", handle.id)


class ThinksForever:
    """A model whose call hangs, as a slow API does, and that notices being abandoned."""

    name = "thinks-forever"

    def __init__(self) -> None:
        self.abandoned = asyncio.Event()

    async def decide(self, _request: ThinkRequest) -> Decision:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.abandoned.set()
            raise
        raise AssertionError("never answers")


async def test_a_ticket_cancelled_while_the_model_thinks_abandons_the_call_and_says_who_and_why(
    agent: Harness, client: Client
) -> None:
    model = ThinksForever()
    async with agent.worker(model):
        handle = await agent.start(ticket())
        await activity_running(handle, "think")
        ticket_id = handle.id.removeprefix("ticket-")
        await run(
            AGENT_WORKER,
            "cancel",
            handle.id,
            "--reason",
            "the customer withdrew",
            "--by",
            "ann",
            "--address",
            address(client),
        )
        outcome = await handle.result()
        async with asyncio.timeout(30):  # the activity hears of it at its next heartbeat
            await model.abandoned.wait()

    assert outcome.status is Status.CANCELLED
    assert outcome.answer == "This ticket was cancelled (by ann: the customer withdrew). A person will follow up."
    assert (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert audit[0] == f"money policy {LOOSE.digest()} in force"
    assert audit[1] == "cancelled: by ann: the customer withdrew"
    assert audit[2].startswith("closed as cancelled")
    assert agent.store.payments.refunds() == []
    assert agent.store.model_calls.of(ticket_id) == []


async def test_a_refund_in_flight_when_the_ticket_is_cancelled_ends_paid_and_recorded_and_nothing_follows(
    agent: Harness, client: Client
) -> None:
    """The refund's first attempt hangs (a fault); the cancel comes meanwhile. The workflow waits for the
    refund to end, here paid on the retry, records it, and goes no further: no email, no more model calls."""
    async with agent.worker(faults="before:issue_refund=hang", graceful_shutdown_seconds=1):
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        await activity_running(handle, "issue_refund")
        await temporal_cancel(client, handle)
        outcome = await handle.result()

    assert outcome.status is Status.CANCELLED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert [(r.order_id, r.amount_cents) for r in outcome.refunds] == [("A-1001", 4900)]
    assert agent.store.mail.sent() == []
    assert [c.name for c in outcome.tool_calls] == ["lookup_order"]  # the refund's result never reached a model
    assert outcome.model_calls == 2
    assert "cancelled: no reason given" in agent.store.audit.entries(outcome.ticket_id)
    assert await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED) == []


async def test_a_cancel_during_a_keyless_refund_that_never_answers_still_ends_the_ticket(
    agent: Harness, client: Client
) -> None:
    """Without a key (a demonstration's ``refund_key="none"``) a refund whose attempts all time out cannot be
    settled: its outcome stays unknown (the case "never unknown" cannot cover, and the product never takes), and
    the cancel still ends the ticket rather than handing the model "the tool failed"."""
    keyless = Demonstration(refund_key="none")
    async with agent.worker(demonstration=keyless, faults="before:issue_refund=hang*5", graceful_shutdown_seconds=1):
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        await activity_running(handle, "issue_refund")
        await temporal_cancel(client, handle)
        outcome = await handle.result()

    assert outcome.status is Status.CANCELLED
    assert agent.store.payments.refunds() == []  # every attempt hung before paying
    assert agent.store.mail.sent() == []
    assert outcome.model_calls == 2


async def test_a_ticket_cancelled_while_a_refund_waits_for_a_person_is_no_longer_listed_and_pays_nothing(
    agent: Harness, client: Client
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(f"Order A-1001, ticket {uuid.uuid4()}"))
        await awaiting(handle, 4900)
        await poll(lambda: events(handle, EventType.EVENT_TYPE_TIMER_STARTED), timeout=30, what="the approval's timer")
        await temporal_cancel(client, handle)
        outcome = await handle.result()
        late = await asyncio.create_subprocess_exec(
            binary("temporal"),
            "--address",
            address(client),
            "workflow",
            "signal",
            "--workflow-id",
            handle.id,
            "--name",
            "approve",
            "--input",
            json.dumps(answer(4900)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert await late.wait() != 0, "an approval after the cancel reaches no open ticket"

    assert outcome.status is Status.CANCELLED
    assert agent.store.payments.refunds() == []
    assert agent.store.mail.sent() == []
    description = await handle.describe()
    assert description.typed_search_attributes.get(AWAITING_APPROVAL) is None
    assert APPROVAL_REQUEST_MEMO not in await description.memo()
    assert "cancelled: no reason given" in agent.store.audit.entries(outcome.ticket_id)
