"""No field and no pile of replies, turns, events or answers can outgrow Temporal's limits
(``activities.contracts.limits``).

Each test drives one path as far as its per-item limits allow, through the public surface (updates, signals,
queries and the outcome of a real dev server, the ``temporal`` CLI and ``agent-worker start``), and holds the
ticket to the fuzzing's invariant: no workflow task fails and the run is not left stuck. Before the budgets, the
replies of the first test made a ``think`` input of 2.3 MB, and the turns of the second a ``turns`` answer and a
result above 2 MiB: the server refused them (``TMPRL1103 PayloadLimitViolation``) and every workflow task failed
from then on. Before the fields had bounds, a ticket naming a hundred approvers of 7,200 characters continued as
new, while its refund waited, with a payload of 2,163,531 bytes, and stayed RUNNING with nothing paid.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.fields import DAY, MAX_CENTS
from activities.contracts.limits import (
    ANSWER_BYTES,
    APPROVERS_BYTES,
    EMAIL_CHARS,
    EVENT_BYTES,
    EVENTS_KEPT,
    INLINE_TURNS_BYTES,
    MESSAGE_ID_CHARS,
    PAYLOAD_LIMIT_BYTES,
    PENDING_REPLY_BYTES,
    RECORD_REASON_BYTES,
    REFERENCES_KEPT,
    REJECTED_ANSWERS_KEPT,
    TEXT_CHARS,
    THREAD_BYTES,
    TICKET_ID_CHARS,
    TICKET_INPUT_BYTES,
    TOOL_INPUT_BYTES,
    encoded_bytes,
)
from activities.contracts.names import (
    APPROVE_SIGNAL,
    CUSTOMER_MESSAGE,
    ORDER_EVENT_SIGNAL,
    TURNS_QUERY,
    WAITING_FOR_MEMO,
    WORKFLOW_NAME,
)
from activities.contracts.ticket import (
    CustomerMessage,
    MailThread,
    MessageReceipt,
    OrderEvent,
    Outcome,
    Status,
    TicketInput,
    Turn,
)
from agent_worker.cli.devserver import binary
from tests.support.harness import Harness
from tests.support.history import events, failed_workflow_tasks
from tests.support.models import PlaybackModel, calls, says
from tests.support.outcomes import complete
from tests.support.processes import AGENT_WORKER, address, run
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


# --- fields: each is bounded where it comes in, so that no copy of it can outgrow a payload ------------------

TWO_MEGABYTES = 2_000_000
"""Under the 2 MiB a payload may be, so the server takes the start; far past any field's bound."""
ISSUE_APPROVERS = [f"approver-{n:03d}-" + "x" * (7_200 - 13) for n in range(100)]
"""The approvers of the ticket that wedged: 100 names of 7,200 characters, 0.72 MB."""


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


async def test_a_ticket_id_of_two_megabytes_started_with_the_temporal_cli_fails_at_once_without_being_echoed(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The CLI starts the run under a workflow id of its own, so the server takes the input whole: the workflow
    must refuse the id it carries, and say so in a line, not in two megabytes."""
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps({**ticket(), "ticket_id": "T-" + "9" * TWO_MEGABYTES}))
    workflow_id = f"ticket-{uuid.uuid4()}"
    async with agent.worker():
        await run(
            binary("temporal"),
            "--address",
            address(client),
            "workflow",
            "start",
            "--type",
            WORKFLOW_NAME,
            "--task-queue",
            agent.task_queue,
            "--workflow-id",
            workflow_id,
            "--input-file",
            str(source),
        )
        error = await refused_at_once(client.get_workflow_handle(workflow_id, result_type=Outcome))

    assert error.message == "Invalid ticket input: ticket_id: String should have at most 200 characters"


async def test_a_ticket_naming_a_hundred_approvers_of_7200_characters_fails_at_once_instead_of_wedging(
    agent: Harness,
) -> None:
    """The ticket of the issue: every copy a run makes of its approvers (the options, the gate's, the waiting
    request's) once added up to a continue-as-new the server refused. It is refused before anything is done."""
    async with agent.worker():
        error = await refused_at_once(await agent.start(ticket(approvers=ISSUE_APPROVERS)))

    assert error.message.startswith(
        "Invalid ticket input: options.approvers.0: String should have at most 200 characters; "
        "options.approvers.1: String should have at most 200 characters;"
    ), error.message[:300]
    assert error.message.endswith("; and 90 more")
    assert "x" * 100 not in error.message


async def test_agent_worker_start_refuses_a_ticket_with_approvers_past_their_bound_and_starts_nothing(
    client: Client, tmp_path: Path
) -> None:
    raw = ticket(approvers=ISSUE_APPROVERS)
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps(raw))
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "start",
        str(source),
        "--address",
        address(client),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 2
    refused = err.decode().strip()
    assert refused.startswith("not started: options.approvers.0: String should have at most 200 characters")
    assert len(refused) < 2_000
    with pytest.raises(RPCError, match="not found"):
        await client.get_workflow_handle(f"ticket-{raw['ticket_id']}").describe()


async def test_a_forged_unreadable_marker_of_two_megabytes_fails_the_ticket_with_a_line_not_the_megabytes(
    agent: Harness,
) -> None:
    """What the codec hands on for a payload it cannot open carries its reason, and a caller can send one
    itself: a validation error's words are cut, so no value a caller sends is echoed whole into a failure."""
    async with agent.worker():
        error = await refused_at_once(await agent.start({"unreadable_payload": "y" * TWO_MEGABYTES}))

    assert error.message.startswith("Invalid ticket input: input: unreadable_payload: yyyy")
    assert len(error.message) < 2_000


async def test_an_approval_signalled_with_an_approver_and_reason_past_their_bounds_is_recorded_as_malformed(
    agent: Harness,
) -> None:
    """A signal's fields are the sender's to fill: past their bounds, the answer is a rejected, malformed one,
    recorded in a line, and the request waits on for a valid answer."""
    too_long: dict[str, Any] = answer(4900, approved=False, approver="a" * 7_200, reason="r" * (TWO_MEGABYTES // 2))
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, too_long)
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    rejected, approved = outcome.approvals
    assert (rejected.decision, rejected.approver) == (ApprovalDecision.REJECTED, None)
    assert rejected.reason == (
        "malformed approval: approver: String should have at most 200 characters; "
        "reason: String should have at most 500 characters"
    )
    assert (approved.decision, approved.approver) == (ApprovalDecision.APPROVED, "ann")
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_an_order_event_past_its_bound_is_audited_as_not_taken_and_the_wait_goes_on(agent: Harness) -> None:
    """A relay's order id of a megabyte once was kept for the waits to come, a hundred of them carried into
    every continue-as-new: it is refused, audited in a line, and the scan that follows ends the wait."""
    async with agent.worker():
        handle = await agent.start(ticket(ON_ITS_WAY, approval_limit_cents=10_000))
        await waiting_for_event(handle)
        await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1" + "0" * 1_000_000, "event": "delivered"})
        await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "event": "delivered"})
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert await failed_workflow_tasks(agent.client, handle.id) == []
    assert outcome.answer.endswith("Reported about order A-1001: delivered")
    audit = agent.store.audit.entries(outcome.ticket_id)
    (refused,) = [e for e in audit if e.startswith("an order event was not taken")]
    assert refused == "an order event was not taken: order_id: String should have at most 32 characters"


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


# --- the arithmetic: the budgets add up ------------------------------------------------------------------------

CONTROL = "\x01"
"""The costliest character in JSON: six bytes (``\\u0001``), and no pattern of a field that takes text refuses it."""


def fill(budget: int, longest: int) -> list[str]:
    """Names of control characters, each at most ``longest`` long, that together take as near ``budget`` bytes as
    JSON allows without passing it: the largest list of approvers there can be."""
    names: list[str] = []
    while (room := budget - encoded_bytes([*names, ""])) >= 6:
        names.append(CONTROL * min(longest, room // 6))
    return names


def test_the_largest_ticket_the_fields_allow_fits_its_budget() -> None:
    """Every field of the ticket at its bound, each spelled in the characters JSON makes longest."""
    half = (EMAIL_CHARS - 2) // 2
    largest = TicketInput.model_validate(
        {
            "ticket_id": CONTROL * TICKET_ID_CHARS,
            "question": CONTROL * TEXT_CHARS,
            "customer_email": f"{CONTROL * half}@{CONTROL * (EMAIL_CHARS - 2 - half - 1)}.{CONTROL}",
            "opened_at": "9999-12-31T23:59:59.999999+23:59",
            "options": {
                "approval_limit_cents": MAX_CENTS,
                "approval_timeout_seconds": 90 * DAY,
                "refund_key": "per_order",
                "max_steps": 10_000,
                "sla_seconds": 3650 * DAY,
                "approvers": fill(APPROVERS_BYTES, 200),
                "linear_history": True,
                "continue_as_new_after_steps": 10_000,
                "summarize_above_tokens": 10_000_000,
                "reply_window_seconds": 90 * DAY,
                "reconcile_refunds": True,
            },
            "message_id": LONGEST_ID,
            "references": [LONGEST_ID[:-2] + f"{n}>" for n in range(REFERENCES_KEPT)],
        }
    )
    assert len(largest.customer_email) == EMAIL_CHARS
    assert APPROVERS_BYTES - 8 < encoded_bytes(largest.options.approvers) <= APPROVERS_BYTES
    size = encoded_bytes(largest)
    assert 6 * TEXT_CHARS + APPROVERS_BYTES < size <= TICKET_INPUT_BYTES


def test_the_largest_event_in_plain_characters_is_taken_and_its_budget_bounds_any_other() -> None:
    plain = OrderEvent(order_id="A-" + "1" * 30, event="e" * 100, detail="d" * 2_000)
    assert encoded_bytes(plain) <= EVENT_BYTES


def test_what_a_run_hands_the_run_that_continues_it_adds_up_to_under_half_the_payload_limit() -> None:
    """The sum ``activities.contracts.limits`` states: the ticket, the turns, the message the turn answers, the
    replies pending, the one copy of the approvers beyond the ticket's own, and the events kept for waits."""
    carried = {
        "the ticket as it started": TICKET_INPUT_BYTES,
        "the turns kept inline": INLINE_TURNS_BYTES,
        "the message the turn answers": PENDING_REPLY_BYTES,
        "the replies no turn has read": PENDING_REPLY_BYTES,
        "the approvers, once more": APPROVERS_BYTES,
        "the events kept for waits": EVENTS_KEPT * EVENT_BYTES,
        "the mail the next email answers": THREAD_BYTES,
    }
    assert sum(carried.values()) <= PAYLOAD_LIMIT_BYTES // 2, carried
    assert round(sum(carried.values()) / 1024) == 1002  # as the module's docstring adds it up


LONGEST_ID = f"<{'i' * (MESSAGE_ID_CHARS - 14)}@example.com>"
"""A Message-ID at its bound: printable ASCII is all a Message-ID may hold, one byte a character in JSON."""


def test_the_mail_a_ticket_answers_at_its_longest_fits_what_a_run_hands_the_next() -> None:
    """The ticket's first mail with a chain at its bound, then a reply naming a longer one: what the toolbox
    carries (``MailThread``) keeps ``REFERENCES_KEPT`` ids, the first and the newest, within ``THREAD_BYTES``."""
    assert len(LONGEST_ID) == MESSAGE_ID_CHARS
    chain = [LONGEST_ID[:-2] + f"{n}>" for n in range(REFERENCES_KEPT)]
    ticket = TicketInput(
        ticket_id="T-1", question="Hello", customer_email="ann@example.com", message_id=chain[0], references=chain
    )
    reply = CustomerMessage(text="Hello again", message_id=LONGEST_ID, references=chain[::-1])
    thread = MailThread.answering(reply, ticket)
    assert thread is not None
    assert len(thread.references) == REFERENCES_KEPT
    assert (thread.references[0], thread.references[-1], thread.in_reply_to) == (chain[-1], LONGEST_ID, LONGEST_ID)
    assert encoded_bytes(thread) <= THREAD_BYTES
