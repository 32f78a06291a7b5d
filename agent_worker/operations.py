"""Operator commands: list tickets, show one, approve or decline a refund, pass on a customer's reply.

Each is what a ``temporal`` CLI user would type, made readable: ``tickets`` is ``temporal workflow list``
over Temporal's visibility store (so it works with no worker running; ``--stuck`` adds what the run's
description and history say of its failing workflow task), ``show`` reads the run's history (plus a query
while it runs), ``approve`` is ``temporal workflow signal --name approve``, ``reply`` is
``temporal workflow update execute --name customer_message``, and ``retry`` is ``temporal workflow reset`` to
the last model call.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import SearchAttributeKey, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from activities.contracts.approvals import Approval, ApprovalDecision, ApprovalRequest
from activities.contracts.fields import amount
from activities.contracts.names import (
    APPROVAL_REQUEST_MEMO,
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    AWAITING_APPROVAL_QUERY,
    CUSTOMER_MESSAGE,
    TICKET_STATE_ATTRIBUTE,
    TURNS_QUERY,
    WAITING_FOR_MEMO,
    WORKFLOW_NAME,
)
from activities.contracts.ticket import (
    CustomerMessage,
    MessageReceipt,
    Outcome,
    TicketInput,
    TicketState,
    Turn,
    Waiting,
)
from agent_worker.defaults import WAITING_KINDS
from agent_worker.stuck import REPORTED_PROBLEMS_ATTRIBUTE, StuckTicket, find_stuck
from agent_worker.transcript import decided_plainly, narrate, say

AWAITING = SearchAttributeKey.for_int(AWAITING_APPROVAL_ATTRIBUTE)
STATE = SearchAttributeKey.for_keyword(TICKET_STATE_ATTRIBUTE)
WAITING_FOR = dict(
    zip(
        WAITING_KINDS,
        (
            f"{AWAITING_APPROVAL_ATTRIBUTE} > 0",
            f"{TICKET_STATE_ATTRIBUTE} = '{TicketState.WAITING_FOR_CUSTOMER.value}'",
            f"{TICKET_STATE_ATTRIBUTE} = '{TicketState.WAITING_FOR_EVENT.value}'",
        ),
        strict=True,
    )
)
"""What ``tickets --waiting-for`` lists (the kinds the command line offers), as visibility queries."""
QUERY_TIMEOUT = timedelta(seconds=3)


def workflow_id(ticket: str) -> str:
    """Tickets run as ``ticket-<ticket id>``; a full workflow id is taken as it is."""
    return ticket if ticket.startswith("ticket-") else f"ticket-{ticket}"


def tickets_query(*, waiting_for: str | None = None) -> str:
    query = f"WorkflowType = '{WORKFLOW_NAME}'"
    # A run that was terminated while it waited could clear nothing: it ends with the attribute still set.
    return f"{query} AND {WAITING_FOR[waiting_for]} AND ExecutionStatus = 'Running'" if waiting_for else query


class NotWaitingError(RuntimeError):
    """The ticket waits for no approval, or for another amount than the person was shown."""


async def list_tickets(client: Client, *, waiting_for: str | None, limit: int) -> int:
    count = 0
    async for execution in client.list_workflows(tickets_query(waiting_for=waiting_for), limit=limit):
        amount = execution.typed_search_attributes.get(AWAITING)
        request = await execution.memo_value(APPROVAL_REQUEST_MEMO, None, type_hint=ApprovalRequest | None)  # type: ignore[arg-type]
        waiting = await execution.memo_value(WAITING_FOR_MEMO, None, type_hint=Waiting | None)  # type: ignore[arg-type]
        status = execution.status.name.lower() if execution.status else "unknown"
        say(
            f"{execution.id:<40} {status:<11} {when(execution.start_time)}"
            + (f"  waiting for approval of {amount_of(amount, request)}" if amount else "")
            + (f" ({describe_request(request)})" if amount and request else "")
            + (f"  {describe_waiting(waiting)}" if waiting and execution.typed_search_attributes.get(STATE) else "")
        )
        count += 1
    return count


def describe_waiting(waiting: Waiting) -> str:
    what = "the customer's reply" if waiting.state is TicketState.WAITING_FOR_CUSTOMER else "an event"
    about = f" about {waiting.order_id}" if waiting.order_id else ""
    return f"waiting for {what}{about} until {when(waiting.until)} UTC"


async def list_stuck(client: Client, *, limit: int) -> int:
    """One line per stuck ticket; on stderr, how they were found (the server's report, or every running ticket)."""
    search = await find_stuck(client, limit=limit)
    if not search.reported_by_server:
        print(
            f"(this server does not set {REPORTED_PROBLEMS_ATTRIBUTE}: read the pending workflow task of "
            f"{search.examined} running tickets)",
            file=sys.stderr,
            flush=True,
        )
    for ticket in search.tickets:
        say(describe_stuck(ticket))
    return len(search.tickets)


def describe_stuck(ticket: StuckTicket) -> str:
    return (
        f"{ticket.workflow_id:<40} stuck since {when(ticket.since)} UTC, {ticket.failures} failed attempts: "
        f"{ticket.failure}"
    )


def describe_request(request: ApprovalRequest) -> str:
    order = f" on {request.order_id}" if request.order_id else ""
    return f"request {request.request_id}{order}, answer by {when(request.deadline)} UTC"


async def waiting_request(handle: WorkflowHandle[Any, Any]) -> ApprovalRequest | None:
    """The request a ticket waits on, from visibility: it needs no worker running."""
    description = await handle.describe()
    request: ApprovalRequest | None = await description.memo_value(
        APPROVAL_REQUEST_MEMO,
        None,
        type_hint=ApprovalRequest | None,  # type: ignore[arg-type]
    )
    return request


async def show(client: Client, ticket: str) -> None:
    handle: WorkflowHandle[object, Outcome] = client.get_workflow_handle(workflow_id(ticket), result_type=Outcome)
    description = await handle.describe()
    say(f"{handle.id}: {description.status.name.lower() if description.status else 'unknown'}")
    for run_id in await run_ids(client, handle.id, description.run_id):
        await narrate(client, client.get_workflow_handle(handle.id, run_id=run_id), follow=False)
    if description.status == WorkflowExecutionStatus.RUNNING:
        try:
            waiting = await handle.query(AWAITING_APPROVAL_QUERY, rpc_timeout=QUERY_TIMEOUT)
        except RPCError as error:  # a query needs a worker; the history above does not
            say(f"(no worker answered the query: {error.message or error.status.name})")
        else:
            request = ApprovalRequest.model_validate(waiting) if waiting else None
            say(
                f"waiting for approval of {amount_of(request.amount_cents, request)} ({describe_request(request)})"
                if request
                else "not waiting for an approval"
            )
    elif description.status == WorkflowExecutionStatus.COMPLETED:
        outcome = await handle.result()
        say("", f"status {outcome.status.value}, {outcome.steps} steps, {outcome.model_calls} model calls")
        say(f"answer: {outcome.answer}")
        for refund in outcome.refunds:
            say(f"refund #{refund.refund_id}: {amount(refund.amount_cents, refund.currency)} on {refund.order_id}")
        for approval in outcome.approvals:
            if approval.decision is ApprovalDecision.TIMED_OUT:  # no answer: nobody to name, no channel
                say(f"approval {approval.decision.value} {approval.amount_cents}: {decided_plainly(approval)}")
                continue
            say(f"approval {approval.decision.value} {approval.amount_cents} by {approval.approver} at {approval.at}"
                + (f" ({approval.reason})" if approval.reason else ""))  # fmt: skip


def amount_of(units: int, request: ApprovalRequest | None) -> str:
    """An amount a request is about, in its order's currency when the request says it."""
    return amount(units, request.currency if request else None)


async def run_ids(client: Client, workflow_id: str, last: str) -> list[str]:
    """Every run of a ticket that continued as new, first to last, each named by the next one's start."""
    runs = [last]
    while True:
        history = client.get_workflow_handle(workflow_id, run_id=runs[-1]).fetch_history_events()
        previous = ""
        async for started in history:  # the first event: the run's start
            previous = started.workflow_execution_started_event_attributes.continued_execution_run_id
            break
        if not previous:
            return runs[::-1]
        runs.append(previous)


async def approve(client: Client, ticket: str, answer: Approval) -> None:
    """Answer the request the ticket waits on, always naming it: an answer sent twice, or late, can then never
    release a later refund. Without ``answer.request_id``, the one waiting is read from visibility (no worker
    needed), and nothing is sent unless it is for the amount the person was shown."""
    handle = client.get_workflow_handle(workflow_id(ticket))
    request = None
    if answer.request_id is None:
        request = await waiting_request(handle)
        if request is None:
            raise NotWaitingError(f"{handle.id} is not waiting for an approval; nothing was sent")
        if request.amount_cents != answer.amount_cents:
            raise NotWaitingError(
                f"{handle.id} waits for {amount_of(request.amount_cents, request)} ({describe_request(request)}), "
                f"not {amount_of(answer.amount_cents, request)}; nothing was sent"
            )
        answer = answer.model_copy(update={"request_id": request.request_id})
    await handle.signal(APPROVE_SIGNAL, answer)
    verb = "approved" if answer.approved else "declined"
    say(f"{verb} {amount_of(answer.amount_cents, request)} ({answer.request_id}) on {handle.id} as {answer.approver}")


class DuplicateTicketError(RuntimeError):
    """The ticket was started before and has ended: a ticket is one run, never two."""


async def start(client: Client, ticket: TicketInput, task_queue: str) -> str:
    """Start a ticket as its one workflow, ``ticket-<ticket id>``. Started twice while it runs (a retried
    webhook), the second start is a no-op; started again after it ended, it is refused: the server enforces
    both (a duplicate id is rejected, whatever its state), so two callers racing cannot both start it."""
    try:
        handle = await client.start_workflow(
            WORKFLOW_NAME, ticket, id=workflow_id(ticket.ticket_id), task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )  # fmt: skip
    except WorkflowAlreadyStartedError as already:
        description = await client.get_workflow_handle(already.workflow_id).describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            say(f"{already.workflow_id} is already running (run {description.run_id}); nothing was started")
            return description.run_id
        status = description.status.name.lower() if description.status else "closed"
        raise DuplicateTicketError(
            f"{already.workflow_id} was already handled ({status}); a ticket is one run, nothing was started"
        ) from None
    say(f"started {handle.id} (run {handle.result_run_id})")
    return handle.result_run_id or ""


async def reply(client: Client, ticket: str, message: CustomerMessage, *, wait: bool) -> Turn | None:
    """Pass on the customer's reply (the ``customer_message`` update: refused at once if the ticket takes no more
    replies); with ``wait``, wait for the answer to the turn it starts, and return it."""
    handle = client.get_workflow_handle(workflow_id(ticket))
    receipt = await handle.execute_update(CUSTOMER_MESSAGE, message, result_type=MessageReceipt)
    say(f"reply taken by {handle.id}: turn {receipt.turn}")
    if not wait:
        return None
    while True:
        turns: list[Turn] = await handle.query(TURNS_QUERY, result_type=list[Turn])
        if len(turns) >= receipt.turn:
            answered: Turn = turns[receipt.turn - 1]
            say(f"answer ({answered.status.value}): {answered.answer}")
            return answered
        await asyncio.sleep(0.5)


class NotRetryableError(RuntimeError):
    """The ticket cannot be retried from a model call: it is still running, or it never asked the model."""


async def retry(client: Client, ticket: str, *, by: str) -> str:
    """Reset a closed ticket to just before its last model call (``temporal workflow reset``), so that a ticket
    that failed because the model could not be reached goes on from there once it can; return the new run's id.

    Safe for money and mail: what ran before that point is replayed from history, not run again, and what runs
    again carries the keys it carried the first time (per ticket, step and place in the step), so a refund or
    an email the failed run made after that point is not made twice either."""
    handle = client.get_workflow_handle(workflow_id(ticket))
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise NotRetryableError(f"{handle.id} is still running: only a closed ticket can be retried")
    think = None
    async for event in client.get_workflow_handle(handle.id, run_id=description.run_id).fetch_history_events():
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and scheduled.activity_type.name == "think":
            think = scheduled
    if think is None:
        raise NotRetryableError(f"{handle.id} never asked the model, so there is no model call to retry")
    reset = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=description.run_id),
            reason=f"agent-worker retry by {by}: the last model call again",
            workflow_task_finish_event_id=think.workflow_task_completed_event_id,
            request_id=str(uuid.uuid4()),
        )
    )
    say(f"{handle.id} retried from its last model call by {by}: run {reset.run_id}")
    return reset.run_id


async def cancel(client: Client, ticket: str, *, reason: str, by: str) -> None:
    """``temporal workflow cancel`` with a reason the ticket writes to its audit trail: who asked, and why."""
    handle = client.get_workflow_handle(workflow_id(ticket))
    await handle.cancel(reason=f"by {by}: {reason}")
    say(f"cancel requested for {handle.id} by {by}: {reason}")


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"
