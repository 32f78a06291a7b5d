"""No pile of replies, turns, events or answers can outgrow Temporal's limits (``activities.contracts.limits``).

Each test drives one path as far as its per-item limits allow, through the public surface (updates, signals,
queries and the outcome of a real dev server), and holds the ticket to the fuzzing's invariant: no workflow
task fails and the run is not left stuck. Before the budgets, the replies of the first test made a ``think``
input of 2.3 MB, and the turns of the second a ``turns`` answer and a result above 2 MiB: the server refused
them (``TMPRL1103 PayloadLimitViolation``) and every workflow task failed from then on.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.limits import (
    ANSWER_BYTES,
    PAYLOAD_LIMIT_BYTES,
    PENDING_REPLY_BYTES,
    RECORD_REASON_BYTES,
    REJECTED_ANSWERS_KEPT,
    TEXT_CHARS,
    TOOL_INPUT_BYTES,
    encoded_bytes,
)
from activities.contracts.names import (
    APPROVE_SIGNAL,
    CUSTOMER_MESSAGE,
    ORDER_EVENT_SIGNAL,
    TURNS_QUERY,
    WAITING_FOR_MEMO,
)
from activities.contracts.ticket import MessageReceipt, Status, Turn
from tests.support.harness import Harness
from tests.support.history import events, failed_workflow_tasks
from tests.support.models import PlaybackModel, calls, says
from tests.support.outcomes import complete
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_for_event

DAYS_3 = 3 * 86_400
ON_ITS_WAY = "My parcel for order A-1001 is late. Is it still on its way?"


def longest(n: int) -> str:
    """A reply as long as one may be, numbered so that its place can be checked."""
    head = f"reply {n}: "
    return head + "x" * (TEXT_CHARS - len(head))


def audited(entries: list[str], one: str, more: str) -> int:
    """How many things the audit trail accounts for: entries starting ``one``, and the counts of ``more``."""
    return sum(e.startswith(one) for e in entries) + sum(int(e.split()[0]) for e in entries if more in e)


async def test_replies_piling_up_while_a_refund_waits_are_refused_past_one_turns_budget_and_the_ticket_answers(
    agent: Harness,
) -> None:
    """115 of the longest replies while a person is asked: the validator takes what one turn can read and refuses
    the rest with the reason; ten more signalled are audited. Approved, the ticket reads them and answers."""
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        taken, refused = [], []
        for n in range(115):
            try:
                await handle.execute_update(CUSTOMER_MESSAGE, {"text": longest(n)}, result_type=MessageReceipt)
                taken.append(n)
            except WorkflowUpdateFailedError as error:
                refused.append(str(error.cause))
        assert taken == list(range(len(taken))), "the first replies are taken, until the turn's budget is full"
        pending = [longest(n) for n in taken]
        assert encoded_bytes(pending) <= PENDING_REPLY_BYTES < encoded_bytes([*pending, longest(len(taken))])
        assert len(refused) == 115 - len(taken)
        assert all("send this once it has answered" in why for why in refused), refused[0]
        for n in range(115, 125):
            await handle.signal(CUSTOMER_MESSAGE, {"text": longest(n)})
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await asyncio.wait_for(handle.result(), 60)  # a wedged run would never end

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert outcome.status is Status.RESOLVED
    assert outcome.turns[1].message == "\n\n".join(pending)
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    audit = agent.store.audit.entries(outcome.ticket_id)
    signalled = "a reply signalled to the ticket was not taken"
    assert audited(audit, signalled, "more replies signalled to the ticket were not taken") == 10, audit


async def turn_answered(handle: Handle, head: str) -> list[Turn]:
    """Wait until the ``turns`` query's newest turn answers the reply starting ``head``; return what it answered."""

    async def answered() -> list[Turn] | None:
        turns: list[Turn] = await handle.query(TURNS_QUERY, result_type=list[Turn])
        return turns if turns and turns[-1].message.startswith(head) else None

    return await poll(answered, timeout=30, interval=0.02, what=f"the turn answering {head!r}")


async def test_a_hundred_and_ten_turns_of_the_longest_replies_keep_the_turns_query_and_the_outcome_under_the_limit(
    agent: Harness,
) -> None:
    """Each turn's message is 20,000 characters: 110 of them are 2.2 MB. The query and the outcome carry the newest
    turns; the older ones are in the content store, from which the whole ticket comes back in order."""
    raw = ticket("My parcel never arrived", reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
    async with agent.worker():
        handle = await agent.start(raw)
        await turn_answered(handle, "My parcel")
        largest_answer = 0
        for n in range(110):
            await handle.execute_update(CUSTOMER_MESSAGE, {"text": longest(n)})
            turns = await turn_answered(handle, f"reply {n}: ")
            largest_answer = max(largest_answer, encoded_bytes(turns))
        await handle.cancel(reason="the desk closes the test ticket")
        outcome = await asyncio.wait_for(handle.result(), 60)  # a wedged run would never end

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert largest_answer < PAYLOAD_LIMIT_BYTES // 2
    assert encoded_bytes(outcome) < PAYLOAD_LIMIT_BYTES // 2
    assert outcome.status is Status.CANCELLED
    assert outcome.archive_ref is not None
    whole = complete(ContentStore(agent.store.blobs), outcome)
    assert [t.message[:12] for t in whole.turns] == ["My parcel ne", *(longest(n)[:12] for n in range(110))]
    assert len(agent.store.audit.entries(outcome.ticket_id)) > 110


async def test_a_wait_for_the_carrier_flooded_with_bad_events_continues_as_new_and_waits_on_until_the_same_moment(
    server_suggesting_early: WorkflowEnvironment, store: Business
) -> None:
    """A relay floods a ticket that waits for a delivery scan: it continues as new while it waits, listed as
    waiting all along, until the same deadline; the bad events are audited, counted past a number; the scan
    then ends the wait."""
    agent = Harness(server_suggesting_early.client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    async with agent.worker():
        handle = await agent.start(ticket(ON_ITS_WAY, approval_limit_cents=10_000))
        waiting = await waiting_for_event(handle)
        waiting_run = (await handle.describe()).run_id
        for n in range(60):
            await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "bad": n})

        async def continued() -> bool:
            return (await handle.describe()).run_id != waiting_run

        await poll(continued, timeout=30, what="the waiting ticket to continue as a new run")
        again = await waiting_for_event(handle)
        assert (again.order_id, again.until) == (waiting.order_id, waiting.until)
        await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "event": "delivered"})
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert outcome.status is Status.RESOLVED
    assert outcome.answer.endswith("Reported about order A-1001: delivered")
    audit = store.audit.entries(outcome.ticket_id)
    assert audited(audit, "an order event was not taken", "more order events were not taken") == 60, audit
    assert len([e for e in audit if e.startswith("an order event was not taken")]) < 60
    description = await handle.describe()
    assert await description.memo_value(WAITING_FOR_MEMO, None) is None


async def test_a_flood_of_bad_approvals_is_audited_whole_but_the_outcome_lists_a_bounded_number(
    agent: Harness,
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        flood = REJECTED_ANSWERS_KEPT + 20
        for n in range(flood):
            malformed = {"amount_cents": 4900, "approved": True, "approver": f"bot-{n}", "extra": n}
            await handle.signal(APPROVE_SIGNAL, malformed)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert outcome.status is Status.RESOLVED
    rejected = [a for a in outcome.approvals if a.decision is ApprovalDecision.REJECTED]
    assert len(rejected) == REJECTED_ANSWERS_KEPT
    assert outcome.unlisted_answers == flood - REJECTED_ANSWERS_KEPT
    assert [a.approver for a in outcome.approvals if a.decision is ApprovalDecision.APPROVED] == ["ann"]
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert (
        len([e for e in audit if "rejected: malformed approval" in e])
        + sum(int(e.split()[0]) for e in audit if "more rejected answers to approval requests" in e)
        == flood
    ), audit
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_a_model_that_writes_megabytes_is_recorded_as_a_head_and_a_size(agent: Harness) -> None:
    """A call to no tool with a 600 KB input, and an answer of 1.5 MB: each is within what an activity may return,
    and together they would outgrow the outcome. Each is recorded cut; the conversation keeps them whole."""
    model = PlaybackModel([calls(("no_such_tool", {"blob": "y" * 600_000})), says("z" * 1_500_000)])
    async with agent.worker(model):
        handle = await agent.start(ticket())
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert outcome.status is Status.RESOLVED
    (call,) = outcome.tool_calls
    assert set(call.input) == {"cut"}
    assert encoded_bytes(call.input) <= TOOL_INPUT_BYTES
    assert "bytes in all]" in call.input["cut"]
    assert encoded_bytes(outcome.answer) <= ANSWER_BYTES
    assert outcome.answer.startswith("zzz")
    assert outcome.turns[0].answer == outcome.answer


# --- what a validation error says: never the value ------------------------------------------------------------

TWO_MEGABYTES = 2_000_000
"""Under the 2 MiB a payload may be, so the server takes it whole."""


async def refused_at_once(handle: Handle) -> ApplicationError:
    """The run must fail at once as invalid input, having done nothing: its error. A run that goes on instead
    (to wedge, or to wait for a person) fails the test when the wait runs out."""
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), 30)
    error = failure.value.cause
    assert isinstance(error, ApplicationError)
    assert (error.type, error.non_retryable) == ("InvalidTicketInput", True)
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    assert await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == []
    return error


async def test_a_forged_unreadable_marker_of_two_megabytes_fails_the_ticket_with_a_line_not_the_megabytes(
    agent: Harness,
) -> None:
    """What the codec hands on for a payload it cannot open carries its reason, and a caller can send one
    itself: a validation error's words are cut, so no value a caller sends is echoed whole into a failure."""
    async with agent.worker():
        error = await refused_at_once(await agent.start({"unreadable_payload": "y" * TWO_MEGABYTES}))

    assert error.message.startswith("Invalid ticket input: input: unreadable_payload: yyyy")
    assert len(error.message) < 2_000


async def test_a_forged_unreadable_approval_of_a_megabyte_is_recorded_in_a_line_and_the_request_waits_on(
    agent: Harness,
) -> None:
    """The reason a rejected answer is recorded with quotes what was sent: the gate carries fifty of them into
    the next run, so each is kept to a head and its size."""
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, {"unreadable_payload": "z" * 1_000_000})
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    rejected, approved = outcome.approvals
    assert rejected.decision is ApprovalDecision.REJECTED
    assert rejected.reason.startswith("unreadable approval: zzz")
    assert encoded_bytes(rejected.reason) <= RECORD_REASON_BYTES
    assert approved.decision is ApprovalDecision.APPROVED
