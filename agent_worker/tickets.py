"""One client for tickets: every call the command line, the approval inbox, the demo and the metrics make to a
ticket's workflow, made here, the same way for all of them.

A ticket is one workflow, ``ticket-<ticket id>`` (``workflow_id_of``). What a caller asks of it is a Temporal call
here, returning typed values: start it, answer its approval (the ``approve`` signal, judged first by the
ticket's rules and read back for what the ticket made of it, or the inbox's vouched ``approve`` update), pass on a
reply, cancel it, retry it, query it, read its history as transcript entries, and list or count tickets from the
visibility store with the queries and search-attribute keys defined once below.
Nothing here prints or renders: each caller says what came of a call in its own words (a terminal's lines, an
inbox's page), and refusals are exceptions carrying what the caller needs to word them.

Visibility needs no worker running; a query does (``awaiting_approval``, ``turns``), which is why the request a
ticket waits on is also read from its memo (``waiting_request``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution as ExecutionRef
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import SearchAttributeKey, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.approvals import (
    AnsweredRequest,
    Approval,
    ApprovalDecision,
    ApprovalReceipt,
    ApprovalRecord,
    ApprovalRequest,
    Settlement,
    VouchedApproval,
)
from activities.contracts.fields import amount
from activities.contracts.names import (
    APPROVAL_REQUEST_MEMO,
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    AWAITING_APPROVAL_QUERY,
    CUSTOMER_MESSAGE,
    MAIL_BOUNCED,
    ORDER_EVENT_SIGNAL,
    SEARCH_ATTRIBUTES,
    SETTLED_MEMO,
    TICKET_STATE_ATTRIBUTE,
    TURNS_QUERY,
    VERIFY_SENDER,
    WAITING_FOR_MEMO,
    WAKE_SIGNAL,
    WORKFLOW_NAME,
)
from activities.contracts.ticket import (
    CustomerMessage,
    MailBounce,
    MessageReceipt,
    OrderEvent,
    Outcome,
    SenderVerification,
    TicketInput,
    TicketState,
    Turn,
    Waiting,
)
from activities.tools import TOOLS, Tools
from agent_worker.defaults import WAITING_KINDS
from agent_worker.transcript import Entry as Entry  # noqa: PLC0414 - re-exported: what ``transcript`` returns
from agent_worker.transcript import decided_plainly, entries, first, last_waiting
from workflows.approval_rules import ApprovalDesk

PREFIX = "ticket-"


def workflow_id_of(ticket: str) -> str:
    """Tickets run as ``ticket-<ticket id>``; a full workflow id is taken as it is. The rule is for what a person
    types (``T-1`` or ``ticket-T-1``) and for starting a ticket; every other function here takes the workflow id as
    it is, since a ticket started by another integration may run under any id."""
    return ticket if ticket.startswith(PREFIX) else f"{PREFIX}{ticket}"


# --- visibility: the search-attribute keys and the queries ---------------------------------------------------

AWAITING = SearchAttributeKey.for_int(AWAITING_APPROVAL_ATTRIBUTE)
"""The amount a ticket waits for a person to approve, while it waits."""
STATE = SearchAttributeKey.for_keyword(TICKET_STATE_ATTRIBUTE)
"""What an open ticket waits for (``TicketState``), while it waits."""
SEARCH_ATTRIBUTE_KEYS = [
    SearchAttributeKey.for_int(name) if kind == "Int" else SearchAttributeKey.for_keyword(name)
    for name, kind in SEARCH_ATTRIBUTES.items()
]
"""Every search attribute the workflow sets, as a key a server registers."""
REPORTED_PROBLEMS_ATTRIBUTE = "TemporalReportedProblems"
"""The server's own search attribute on a run whose workflow task keeps failing (``agent_worker.stuck``)."""
WORKFLOW_TASK_PROBLEMS = ("category=WorkflowTaskFailed", "category=WorkflowTaskTimedOut")

TICKETS_QUERY = f"WorkflowType = '{WORKFLOW_NAME}'"
RUNNING_QUERY = f"{TICKETS_QUERY} AND ExecutionStatus = 'Running'"
STUCK_QUERY = (
    f"{RUNNING_QUERY} AND {REPORTED_PROBLEMS_ATTRIBUTE} IN ({', '.join(repr(p) for p in WORKFLOW_TASK_PROBLEMS)})"
)
"""The tickets the server reports, as the Web UI's "Task Failures" view asks for them."""
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
"""What a ticket may wait for (the kinds ``tickets --waiting-for`` offers and the inbox's tabs), as conditions."""


def query(*, waiting_for: str | None = None) -> str:
    """The visibility query of every ticket, or of the running ones waiting for ``waiting_for``."""
    if waiting_for is None:
        return TICKETS_QUERY
    # A run that was terminated while it waited could clear nothing: it ends with the attribute still set.
    return f"{TICKETS_QUERY} AND {WAITING_FOR[waiting_for]} AND ExecutionStatus = 'Running'"


@dataclass(frozen=True)
class Seen:
    """A run as visibility shows it, memos and all: no history read, no worker needed."""

    workflow_id: str
    run_id: str
    status: WorkflowExecutionStatus | None
    started: datetime
    closed: datetime | None
    awaiting_cents: int | None
    """The ``AwaitingApprovalCents`` search attribute, if set."""
    state: str | None
    """The ``TicketState`` search attribute, if set."""
    request: ApprovalRequest | None
    """The request memo, as last written (a closed run may keep one it could not clear)."""
    waiting: Waiting | None
    """The ``waiting_for`` memo, as last written."""

    @property
    def running(self) -> bool:
        return self.status == WorkflowExecutionStatus.RUNNING


async def seen(execution: WorkflowExecution) -> Seen:
    """A listed (or described) run as ``Seen``."""
    attributes = execution.typed_search_attributes
    request = await execution.memo_value(APPROVAL_REQUEST_MEMO, None, type_hint=ApprovalRequest | None)  # type: ignore[arg-type]
    waiting = await execution.memo_value(WAITING_FOR_MEMO, None, type_hint=Waiting | None)  # type: ignore[arg-type]
    return Seen(
        workflow_id=execution.id,
        run_id=execution.run_id,
        status=execution.status,
        started=execution.start_time,
        closed=execution.close_time,
        awaiting_cents=attributes.get(AWAITING),
        state=attributes.get(STATE),
        request=request,
        waiting=waiting,
    )


async def listed(client: Client, visibility_query: str, *, limit: int | None = None) -> AsyncIterator[Seen]:
    """The runs ``visibility_query`` finds, newest first, at most ``limit``."""
    async for execution in client.list_workflows(visibility_query, limit=limit):
        yield await seen(execution)


async def count(client: Client, visibility_query: str) -> int:
    """How many runs ``visibility_query`` finds, counted by the server (nothing listed)."""
    return (await client.count_workflows(visibility_query)).count


# --- one ticket -------------------------------------------------------------------------------------------------


def handle(client: Client, workflow_id: str, *, run_id: str | None = None) -> WorkflowHandle[Any, Outcome]:
    """The ticket's workflow (its latest run, or ``run_id``), its result read as an ``Outcome``."""
    return client.get_workflow_handle(workflow_id, run_id=run_id, result_type=Outcome)


async def describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    return await handle(client, workflow_id).describe()


async def waiting_request(client: Client, workflow_id: str) -> ApprovalRequest | None:
    """The request a ticket waits on, from its memo in visibility: it needs no worker running."""
    return (await seen(await describe(client, workflow_id))).request


async def awaiting_approval(
    client: Client, workflow_id: str, *, rpc_timeout: timedelta | None = None
) -> ApprovalRequest | None:
    """The request a ticket waits on, as its workflow answers the query: it needs a worker, within ``rpc_timeout``
    (an ``RPCError`` when none answers)."""
    waits: Any = ApprovalRequest | None  # a union: the SDK's signature takes a type
    request: ApprovalRequest | None = await handle(client, workflow_id).query(
        AWAITING_APPROVAL_QUERY, result_type=waits, rpc_timeout=rpc_timeout
    )
    return request


async def turns(client: Client, workflow_id: str) -> list[Turn]:
    """The ticket's turns so far, as its workflow answers the query (a worker needed)."""
    answered: list[Turn] = await handle(client, workflow_id).query(TURNS_QUERY, result_type=list[Turn])
    return answered


async def outcome(client: Client, workflow_id: str, *, run_id: str | None = None) -> Outcome:
    return await handle(client, workflow_id, run_id=run_id).result()


async def run_ids(client: Client, workflow_id: str, last: str) -> list[str]:
    """Every run of a ticket that continued as new, first to last, each named by the next one's start."""
    runs = [last]
    while True:
        previous = ""
        async for started in handle(client, workflow_id, run_id=runs[-1]).fetch_history_events():  # its start
            previous = started.workflow_execution_started_event_attributes.continued_execution_run_id
            break
        if not previous:
            return runs[::-1]
        runs.append(previous)


async def transcript(client: Client, workflow_id: str, last_run: str, tools: Tools = TOOLS) -> list[Entry]:
    """What happened to the ticket, every run of it up to ``last_run``, read from history (no worker needed), its
    payouts told as ``tools`` declare them."""
    told: list[Entry] = []
    for run_id in await run_ids(client, workflow_id, last_run):
        run, waiting = handle(client, workflow_id, run_id=run_id), last_waiting(told)
        told += [entry async for entry in entries(client, run, follow=False, tools=tools, waiting=waiting)]
    return told


async def ticket_input(client: Client, workflow_id: str, run_id: str) -> dict[str, Any]:
    """The run's input as it was started (``TicketInput``'s fields), from its first event; empty if unreadable."""
    found: Any = None
    async for event in handle(client, workflow_id, run_id=run_id).fetch_history_events(page_size=1):
        started = event.workflow_execution_started_event_attributes
        found = first(await client.data_converter.decode(started.input.payloads))
        break
    return found if isinstance(found, dict) else {}


async def partly_approved_by(client: Client, workflow_id: str, run_id: str, request_id: str) -> list[str]:
    """Who approved ``request_id`` in this run as one of several approvals it needs, in order: every vouched
    ``approve`` update the run answered as ``partly_approved`` for it (the memo is not written again for those)."""
    approvers: dict[int, str] = {}
    approved: list[str] = []
    async for event in handle(client, workflow_id, run_id=run_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
            answer = first(await client.data_converter.decode(accepted.args.payloads))
            if accepted.name == APPROVE_SIGNAL and isinstance(answer, dict):
                approvers[event.event_id] = str(answer.get("approver", ""))
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            completed = event.workflow_execution_update_completed_event_attributes
            approver = approvers.get(completed.accepted_event_id)
            if approver is None or not completed.outcome.HasField("success"):
                continue
            receipt = first(await client.data_converter.decode(completed.outcome.success.payloads))
            if (
                isinstance(receipt, dict)
                and receipt.get("request_id") == request_id
                and receipt.get("decision") == ApprovalDecision.PARTLY_APPROVED.value
            ):
                approved.append(approver)
    return approved


# --- what a caller asks of a ticket ---------------------------------------------------------------------------


class DuplicateTicketError(RuntimeError):
    """The ticket was started before and has ended: a ticket is one run, never two."""

    def __init__(self, workflow_id: str, status: str) -> None:
        super().__init__(f"{workflow_id} was already handled ({status}); a ticket is one run, nothing was started")
        self.workflow_id, self.status = workflow_id, status


@dataclass(frozen=True)
class Started:
    workflow_id: str
    run_id: str
    already_running: bool
    """True when the ticket was running already: nothing was started, ``run_id`` is the running one's."""


async def start(
    client: Client, ticket: TicketInput, task_queue: str, *, anew: bool = False, memo: Mapping[str, Any] | None = None
) -> Started:
    """Start a ticket as its one workflow, ``ticket-<ticket id>``. Started twice while it runs (a retried
    webhook), the second start is a no-op; started again after it ended, it is refused (``DuplicateTicketError``):
    the server enforces both, so two callers racing cannot both start it. ``anew`` is the demo's alone: a demo
    rerun on a kept server starts its ticket again when the last one was not refunded. ``memo`` is what the
    caller records of where the ticket came from (the mail receiver's ``mail``), for people, never the model."""
    policies: dict[str, Any] = {}
    if not anew:
        policies = {
            "id_reuse_policy": WorkflowIDReusePolicy.REJECT_DUPLICATE,
            "id_conflict_policy": WorkflowIDConflictPolicy.FAIL,
        }
    try:
        started = await client.start_workflow(
            WORKFLOW_NAME,
            ticket,
            id=workflow_id_of(ticket.ticket_id),
            task_queue=task_queue,
            memo=dict(memo) if memo else None,
            **policies,
        )
    except WorkflowAlreadyStartedError as already:
        description = await client.get_workflow_handle(already.workflow_id).describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            return Started(already.workflow_id, description.run_id, already_running=True)
        status = description.status.name.lower() if description.status else "closed"
        raise DuplicateTicketError(already.workflow_id, status) from None
    return Started(started.id, started.result_run_id or "", already_running=False)


class NotWaitingError(RuntimeError):
    """The ticket waits for no approval (``request`` None), or for another amount than the person was shown."""

    def __init__(self, workflow_id: str, request: ApprovalRequest | None, shown_cents: int) -> None:
        shown = amount(shown_cents, request.currency if request else None)
        super().__init__(f"{workflow_id} is not waiting for an approval of {shown}")
        self.workflow_id, self.request, self.shown_cents = workflow_id, request, shown_cents


@dataclass(frozen=True)
class Approved:
    workflow_id: str
    answer: Approval
    """What was sent, naming the request it answers."""
    request: ApprovalRequest | None
    """The request as read from visibility, when the answer did not name one."""


async def approve(client: Client, workflow_id: str, answer: Approval) -> Approved:
    """Answer the request the ticket waits on with the ``approve`` signal, always naming it: an answer sent twice,
    or late, can then never release a later refund. Without ``answer.request_id``, the one waiting is read from
    visibility (no worker needed), and nothing is sent unless it is for the amount the person was shown."""
    request = None
    if answer.request_id is None:
        request = await waiting_request(client, workflow_id)
        if request is None or request.amount_cents != answer.amount_cents:
            raise NotWaitingError(workflow_id, request, answer.amount_cents)
        answer = answer.model_copy(update={"request_id": request.request_id})
    await handle(client, workflow_id).signal(APPROVE_SIGNAL, answer)
    return Approved(workflow_id, answer, request)


JUDGED_WITHIN = timedelta(seconds=5)
"""How long ``answer`` waits for a worker to judge the answer it sent, before saying it is not judged yet."""


class AnswerRefusedError(RuntimeError):
    """The ticket does not count this answer, and ``reason`` says why in its rules' words. ``sent`` False: judged by
    those rules before sending, so nothing was sent; True: sent, and the ticket recorded it as released nothing."""

    def __init__(self, workflow_id: str, request: ApprovalRequest, reason: str, *, sent: bool) -> None:
        super().__init__(f"{workflow_id}: {reason}")
        self.workflow_id, self.request, self.reason, self.sent = workflow_id, request, reason, sent


@dataclass(frozen=True)
class Answered:
    """An answer sent, and what the ticket recorded of it."""

    workflow_id: str
    answer: Approval
    """What was sent, naming the request it answers."""
    request: ApprovalRequest
    """The request as it waited when the answer was sent."""
    decision: ApprovalDecision | None
    """``approved`` or ``declined``: the answer decided the request; ``partly_approved``: it is one of the approvals
    the request needs; None: not judged yet (no worker answered in time), or no record of it could be read."""


async def answer(
    client: Client, workflow_id: str, given: Approval, *, judged_within: timedelta = JUDGED_WITHIN
) -> Answered:
    """Answer the request the ticket waits on with the ``approve`` signal, and say what the ticket made of it. A
    signal cannot carry the inbox's signature that the ``approve`` update needs, so the truth is read back instead
    of returned.

    Before sending, the answer is judged by the rules the ticket judges it by (``ApprovalDesk.why_not``) against the
    request as its memo shows it (no worker needed); one that could not count is not sent (``AnswerRefusedError``),
    so that, for one, a signal's approval under roles or two people is refused here rather than recorded as
    nothing. After sending, the ``awaiting_approval_of`` query, which the server answers only once the workflow task
    that took the signal is done, says whether the request still waits (then the answer was one approval of several,
    or rejected), and for a request that no longer waits, the audit trail's row of the answer that decided it
    (scheduled in that same task) says whose it was. No worker answering within ``judged_within``, the answer is
    sent and not judged yet."""
    request = await waiting_request(client, workflow_id)
    if request is None or (given.request_id is None and request.amount_cents != given.amount_cents):
        raise NotWaitingError(workflow_id, request, given.amount_cents)
    given = given.model_copy(update={"request_id": given.request_id or request.request_id})
    if reason := would_not_count(request, given):
        raise AnswerRefusedError(workflow_id, request, reason, sent=False)
    await handle(client, workflow_id).signal(APPROVE_SIGNAL, given)
    return await judged(client, workflow_id, given, request, judged_within)


def would_not_count(request: ApprovalRequest, answer: Approval) -> str | None:
    """Why the ticket would not count ``answer`` as a signal to ``request`` now, by its own rules; None if it would."""
    desk = ApprovalDesk()
    desk.waiting = request
    return desk.why_not(answer, datetime.now(UTC), channel="signal")


async def judged(
    client: Client, workflow_id: str, given: Approval, request: ApprovalRequest, within: timedelta
) -> Answered:
    """What the ticket recorded of ``given``, sent to ``request`` (``answer`` says how it is read)."""
    try:
        after = await awaiting_approval(client, workflow_id, rpc_timeout=within)
    except RPCError:  # no worker took the signal yet
        return Answered(workflow_id, given, request, None)
    if after is not None and after.request_id == request.request_id:
        approvals = after.approved_by
        if given.approved and len(approvals) > len(request.approved_by) and after.among(given.approver, approvals):
            return Answered(workflow_id, given, after, ApprovalDecision.PARTLY_APPROVED)
        why = would_not_count(after, given) or "the ticket recorded it as releasing nothing (its audit trail says why)"
        raise AnswerRefusedError(workflow_id, request, why, sent=True)
    decided = await deciding_answer(client, workflow_id, request.request_id)
    if decided is None:
        return Answered(workflow_id, given, request, None)
    mine = ApprovalDecision.APPROVED if given.approved else ApprovalDecision.DECLINED
    by = [decided.approver] if decided.approver else []
    if decided.decision is mine and decided.channel == "signal" and request.among(given.approver, by):
        return Answered(workflow_id, given, request, mine)
    said = decided_plainly(decided, request.currency, request.payout)
    raise AnswerRefusedError(workflow_id, request, f"it was decided first: {said}", sent=True)


SETTLED_WITHIN = timedelta(seconds=30)
"""How long ``settled`` waits for the ticket to say what the money did for an approved request."""


async def settlements(client: Client, workflow_id: str) -> dict[str, Settlement]:
    """What the money did for the ticket's latest approved requests, by request id (``settlements_in``)."""
    return await settlements_in(await describe(client, workflow_id))


async def settlements_in(described: WorkflowExecutionDescription) -> dict[str, Settlement]:
    """What the money did for the ticket's latest approved requests, by request id, as the described run's memo
    says (no worker needed): runs before 1.5.0 say nothing there."""
    told = await described.memo_value(SETTLED_MEMO, [])
    found = [Settlement.model_validate(s) for s in told if isinstance(s, dict)] if isinstance(told, list) else []
    return {s.request_id: s for s in found}


async def settled(
    client: Client, workflow_id: str, request_id: str, *, within: timedelta = SETTLED_WITHIN
) -> Settlement | None:
    """What the money did for ``request_id``, once the ticket has said (paid, refused, or open as it knows it);
    None if it has not said within ``within`` (an attempt retried, no worker running, or a run before 1.5.0)."""
    deadline = asyncio.get_running_loop().time() + within.total_seconds()
    while True:
        said = (await settlements(client, workflow_id)).get(request_id)
        if said is not None or asyncio.get_running_loop().time() >= deadline:
            return said
        await asyncio.sleep(0.25)


async def deciding_answer(client: Client, workflow_id: str, request_id: str) -> ApprovalRecord | None:
    """The answer that decided ``request_id`` in the ticket's latest run, as the audit trail's row for auditors
    records it (none: not decided in this run, or a run from before those rows)."""
    decided = None
    async for event in handle(client, workflow_id).fetch_history_events():
        scheduled = event.activity_task_scheduled_event_attributes
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED or scheduled.activity_type.name != "audit":
            continue
        written = first(await client.data_converter.decode(scheduled.input.payloads))
        row = written.get("answer") if isinstance(written, dict) else None
        if not isinstance(row, dict) or row.get("request_id") != request_id:
            continue
        answered = AnsweredRequest.model_validate(row)
        if answered.decision is not ApprovalDecision.PARTLY_APPROVED:
            decided = ApprovalRecord(
                amount_cents=answered.amount_cents,
                decision=answered.decision,
                approver=answered.approver,
                at=answered.at,
                reason=answered.reason,
                request_id=answered.request_id,
                channel=answered.channel or "signal",
            )
    return decided


async def send_vouched(
    client: Client, workflow_id: str, answer: VouchedApproval
) -> WorkflowUpdateHandle[ApprovalReceipt]:
    """Send an answer the approval inbox signed as the ``approve`` update, once a worker has accepted it (its
    validator checks the signature and the request); the caller waits for the receipt as long as it cares to.
    Each sending is its own update: a person answering twice is two answers, which the ticket judges."""
    return await handle(client, workflow_id).start_update(
        APPROVE_SIGNAL,
        answer,
        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        id=f"inbox-{uuid.uuid4()}",
        result_type=ApprovalReceipt,
    )


async def reply(
    client: Client, workflow_id: str, message: CustomerMessage, *, update_id: str | None = None
) -> MessageReceipt:
    """Pass on the customer's reply (the ``customer_message`` update: refused at once if the ticket takes no more
    replies); the receipt names the turn it starts or joins. ``update_id`` names the reply where it has a name of
    its own (a mail's ``Message-ID``): the same reply sent again is then the same update, taken once."""
    receipt: MessageReceipt = await handle(client, workflow_id).execute_update(
        CUSTOMER_MESSAGE, message, id=update_id, result_type=MessageReceipt
    )
    return receipt


async def report_bounce(client: Client, workflow_id: str, bounce: MailBounce) -> None:
    """Tell the ticket its customer's mail server refused the desk's email for good (the ``mail_bounced`` signal,
    which the mail receiver sends for a delivery status notification): it records it and mails the address no more."""
    await handle(client, workflow_id).signal(MAIL_BOUNCED, bounce)


async def verify_sender(client: Client, workflow_id: str, *, by: str) -> str:
    """Tell the ticket a person has verified its customer (the ``verify_sender`` update): its tools may touch the
    customer's orders from then on. Returns what the ticket said; a closed ticket refuses it."""
    said: str = await handle(client, workflow_id).execute_update(
        VERIFY_SENDER, SenderVerification(by=by), result_type=str
    )
    return said


async def report_event(client: Client, workflow_id: str, event: OrderEvent) -> None:
    """Tell the ticket of an event about an order (the ``order_event`` signal a carrier's relay sends): a ticket
    that waits for one goes on, and any other keeps it for when it asks."""
    await handle(client, workflow_id).signal(ORDER_EVENT_SIGNAL, event)


async def answer_to(client: Client, workflow_id: str, turn: int, *, every: timedelta = timedelta(seconds=0.5)) -> Turn:
    """The agent's answer to ``turn``, once it has one (the turns query, asked ``every`` so often)."""
    while True:
        answered = await turns(client, workflow_id)
        if len(answered) >= turn:
            return answered[turn - 1]
        await asyncio.sleep(every.total_seconds())


async def cancel(client: Client, workflow_id: str, *, reason: str, by: str) -> None:
    """``temporal workflow cancel`` with a reason the ticket writes to its audit trail: who asked, and why."""
    await handle(client, workflow_id).cancel(reason=f"by {by}: {reason}")


async def wake(client: Client, workflow_id: str) -> bool:
    """Send the ticket the ``wake`` signal: a waiting one asks whether its deployment has a new target build for it,
    and moves there. False if it closed meanwhile (nothing to move)."""
    try:
        await handle(client, workflow_id).signal(WAKE_SIGNAL)
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


class NotRetryableError(RuntimeError):
    """The ticket cannot be retried from a model call: it is still running, or it never asked the model."""


async def retry(client: Client, workflow_id: str, *, by: str) -> str:
    """Reset a closed ticket to just before its last model call (``temporal workflow reset``), so that a ticket
    that failed because the model could not be reached goes on from there once it can; return the new run's id.

    Safe for money and mail: what ran before that point is replayed from history, not run again, and what runs
    again carries the keys it carried the first time (per ticket, step and place in the step), so a refund or
    an email the failed run made after that point is not made twice either."""
    description = await describe(client, workflow_id)
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise NotRetryableError(f"{description.id} is still running: only a closed ticket can be retried")
    think = None
    async for event in handle(client, workflow_id, run_id=description.run_id).fetch_history_events():
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and scheduled.activity_type.name == "think":
            think = scheduled
    if think is None:
        raise NotRetryableError(f"{description.id} never asked the model, so there is no model call to retry")
    reset = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=ExecutionRef(workflow_id=description.id, run_id=description.run_id),
            reason=f"agent-worker retry by {by}: the last model call again",
            workflow_task_finish_event_id=think.workflow_task_completed_event_id,
            request_id=str(uuid.uuid4()),
        )
    )
    return reset.run_id
