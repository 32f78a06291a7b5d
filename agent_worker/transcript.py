"""A ticket's transcript, read from its Temporal history: the one reading that the demo narrates, ``show`` prints
and the approval inbox shows.

It is read from the event history as the server recorded it, not from a worker's memory, so what it tells is what
a new worker would replay after a crash, and it works with no worker running. Payloads are decoded by the client's
data converter, so with encryption on they are decrypted with the keys the client was given.

Events become ``Entry`` values: what happened, in words, with the event it came from and, where a page has more to
show than a line, the thing itself (the order as looked up, the tool call and the model's words around it, the
outcome). The terminal prints them as lines (``lines``); the approval inbox renders the same entries as HTML, so
the two cannot tell a ticket differently.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from activities.contracts.approvals import ApprovalDecision, ApprovalRecord
from activities.contracts.fields import amount
from activities.contracts.names import (
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    CUSTOMER_MESSAGE,
    TICKET_STATE_ATTRIBUTE,
)
from activities.contracts.policy import MoneyPolicy
from activities.contracts.ticket import TicketState
from agent_worker import policy_file

INDENT = "      "
CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "canceled",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued as new",
}

Kind = Literal[
    "customer",  # the customer's question, or a reply
    "step",  # the workflow asks the model
    "reasoning",  # what the model said beside the tools it asked for: why it asks
    "asks",  # a tool the model asked for
    "answers",  # the model's answer to the customer
    "result",  # what an activity returned
    "failed",  # an activity attempt failed or timed out
    "approval",  # a refund waits for a person
    "open",  # the ticket waits for the customer's reply
    "waiting",  # the ticket waits for news about an order
    "signal",  # a signal the run took
    "answer",  # an answer the approval inbox vouched for (the ``approve`` update)
    "update",  # another update the run took
    "timer",  # a wait ran out
    "audit",  # a line of the audit trail
    "approvers",  # who may approve
    "closed",  # the run ended
]
TAGGED: set[Kind] = {"step", "approval", "open", "waiting", "closed"}
"""Kinds the terminal prints as ``[kind]`` headings rather than indented details."""
SAID = {"reasoning": "the model says: ", "answers": "the model answers: "}
SHORT = 200
"""The terminal shortens what the model says to this many characters; the inbox shows it whole."""


@dataclass(frozen=True)
class Entry:
    """One thing that happened to a ticket, as a person reads it."""

    kind: Kind
    text: str
    event_id: int
    at: datetime
    name: str = ""
    """The activity, signal or update it is about, if any."""
    detail: Any = None
    """The thing itself, decoded: the activity's result, the tool call (``{"name", "input", "call", "why"}``), the
    model's words, the ticket's input, the run's result."""


def lines(entry: Entry) -> list[str]:
    """How the terminal prints an entry (the demo, ``show``)."""
    if entry.kind == "customer":
        return ["", entry.text]
    if entry.kind in TAGGED:
        heading = f"  [{entry.kind}] {entry.text}"
        return ["", heading] if entry.kind in {"step", "closed"} else [heading]
    if entry.kind in SAID:
        return [f"{INDENT}{SAID[entry.kind]}{textwrap.shorten(str(entry.detail), SHORT)}"]
    return [f"{INDENT}{entry.text}"]


def say(*printed: str) -> None:
    for line in printed:
        print(line, flush=True)


async def entries(client: Client, handle: WorkflowHandle[Any, Any], *, follow: bool) -> AsyncIterator[Entry]:
    """The run's entries, in order; with ``follow``, as they happen, until the run closes."""
    reader = Reader(client)
    async for event in handle.fetch_history_events(wait_new_event=follow):
        for entry in await reader.read(event):
            yield entry
            if entry.kind == "closed":
                return


async def narrate(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    *,
    follow: bool,
    on_waiting: Callable[[], Awaitable[None]] | None = None,
    on_answered: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Print the run's entries; with ``follow``, as they happen until the run closes. ``on_waiting`` is called when
    a refund starts waiting for a person, ``on_answered`` when the ticket starts waiting for the customer."""
    async for entry in entries(client, handle, follow=follow):
        say(*lines(entry))
        if entry.kind == "approval" and on_waiting is not None:
            await on_waiting()
        elif entry.kind == "open" and on_answered is not None:
            await on_answered()


class Reader:
    """Turns one run's events, read in order, into entries; it keeps what later events refer back to (the
    activity a result answers, what the ticket waits for, who the customer is)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.customer = "the customer"
        self.waiting: dict[str, Any] = {}
        """The search attributes as last set: what the ticket waits for, if anything."""
        self.scheduled: dict[int, tuple[str, Any]] = {}
        self.handlers: dict[EventType.ValueType, Callable[[HistoryEvent], Awaitable[list[Entry]]]] = {
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: self.started,
            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: self.scheduled_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: self.completed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: self.failed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: self.failed_activity,
            EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: self.search_attributes,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: self.signalled,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: self.update_accepted,
            EventType.EVENT_TYPE_TIMER_FIRED: self.timer_fired,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: self.completed,
        }

    async def read(self, event: HistoryEvent) -> list[Entry]:
        handler = self.handlers.get(event.event_type)
        if handler is not None:
            return await handler(event)
        if event.event_type in CLOSED:
            return [entry(event, "closed", f"the run {CLOSED[event.event_type]}")]
        return []

    async def started(self, event: HistoryEvent) -> list[Entry]:
        attrs = event.workflow_execution_started_event_attributes
        ticket = first(await decode(self.client, attrs.input))
        if not isinstance(ticket, dict):
            return []
        self.customer = str(ticket.get("customer_email") or self.customer)
        if attrs.continued_execution_run_id:  # the same ticket going on: its question was told in the first run
            return []
        return [entry(event, "customer", f"Customer ({self.customer}): {ticket.get('question', '')}", detail=ticket)]

    async def scheduled_activity(self, event: HistoryEvent) -> list[Entry]:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        self.scheduled[event.event_id] = (name, first(await decode(self.client, attrs.input)))
        return [entry(event, "step", f"asking the model (event {event.event_id})", name)] if name == "think" else []

    async def completed_activity(self, event: HistoryEvent) -> list[Entry]:
        completed = event.activity_task_completed_event_attributes
        result = first(await decode(self.client, completed.result))
        name, request = self.scheduled.get(completed.scheduled_event_id, ("?", None))
        return [entry(event, kind, text, name, detail) for kind, text, detail in describe(name, request, result)]

    async def failed_activity(self, event: HistoryEvent) -> list[Entry]:
        failed = (
            event.activity_task_failed_event_attributes
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
            else event.activity_task_timed_out_event_attributes
        )
        name, _ = self.scheduled.get(failed.scheduled_event_id, ("?", None))
        return [entry(event, "failed", f"the activity failed: {failed.failure.message or 'timed out'}", name)]

    async def search_attributes(self, event: HistoryEvent) -> list[Entry]:
        found = []
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for name, field in fields.items():
            value = json.loads(field.data) if field.data not in (b"", b"null") else None
            self.waiting[name] = value
            if value is None:
                continue
            if name == AWAITING_APPROVAL_ATTRIBUTE:
                text = f"a refund of {amount(value, None)} waits for a person (a durable timer runs)"
                found.append(entry(event, "approval", text, detail=value))
            elif value == TicketState.WAITING_FOR_CUSTOMER.value:
                found.append(entry(event, "open", "the ticket waits for the customer's reply (a durable timer runs)"))
            elif name == TICKET_STATE_ATTRIBUTE:
                text = "the ticket waits for news about the order (a durable timer runs)"
                found.append(entry(event, "waiting", text))
        return found

    async def signalled(self, event: HistoryEvent) -> list[Entry]:
        attrs = event.workflow_execution_signaled_event_attributes
        payload = first(await decode(self.client, attrs.input))
        if attrs.signal_name == CUSTOMER_MESSAGE and isinstance(payload, dict) and "text" in payload:
            return [self.reply(event, payload)]
        text = f"signal {attrs.signal_name}: {json.dumps(payload)}"
        return [entry(event, "signal", text, attrs.signal_name, payload)]

    async def update_accepted(self, event: HistoryEvent) -> list[Entry]:
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        name, payload = request.input.name, first(await decode(self.client, request.input.args))
        if name == CUSTOMER_MESSAGE and isinstance(payload, dict) and "text" in payload:
            return [self.reply(event, payload)]
        if name == APPROVE_SIGNAL and isinstance(payload, dict):
            verb = "approves" if payload.get("approved") else "declines"
            cents = payload.get("amount_cents")
            text = (
                f"approval inbox: {payload.get('approver')} (signed in) {verb} "
                f"{amount(cents, None) if isinstance(cents, int) else cents} (request {payload.get('request_id')})"
            )
            return [entry(event, "answer", text, name, payload)]
        return [entry(event, "update", f"update {name}: {json.dumps(payload)}", name, payload)]

    def reply(self, event: HistoryEvent, payload: dict[str, Any]) -> Entry:
        return entry(event, "customer", f"Customer ({self.customer}) replies: {payload['text']}", CUSTOMER_MESSAGE)

    async def timer_fired(self, event: HistoryEvent) -> list[Entry]:
        if self.waiting.get(AWAITING_APPROVAL_ATTRIBUTE):
            text = "nobody answered in time: the refund is not made"
        elif self.waiting.get(TICKET_STATE_ATTRIBUTE) == TicketState.WAITING_FOR_CUSTOMER.value:
            text = "the customer did not reply in time: the ticket closes as answered"
        elif self.waiting.get(TICKET_STATE_ATTRIBUTE):
            text = "no news came in time"
        else:
            return []
        return [entry(event, "timer", text)]

    async def completed(self, event: HistoryEvent) -> list[Entry]:
        outcome = first(await decode(self.client, event.workflow_execution_completed_event_attributes.result))
        return [entry(event, "closed", "the run completed", detail=outcome)]


def entry(event: HistoryEvent, kind: Kind, text: str, name: str = "", detail: Any = None) -> Entry:
    return Entry(kind, text, event.event_id, event.event_time.ToDatetime(tzinfo=UTC), name, detail)


async def decode(client: Client, payloads: Payloads) -> list[Any]:
    return await client.data_converter.decode(payloads.payloads)


def first(values: list[Any]) -> Any:
    return values[0] if values else None


def describe(activity: str, request: Any, result: Any) -> list[tuple[Kind, str, Any]]:
    """What an activity's completion tells, as (kind, text, detail)."""
    if activity == "think" and isinstance(result, dict):
        return describe_decision(result.get("content", []))
    if activity == "audit" and isinstance(request, dict):
        return [("audit", f"audit: {request.get('entry')}", request.get("entry"))]
    if activity == "vouched":
        checks = "checks" if result is True else "does not check"
        return [("result", f"the approval inbox's signature {checks}", result)]
    if activity == "money_policy" and isinstance(result, dict):
        return [("approvers", _policy_line(result), result)]
    if activity == "default_approvers":
        who = ", ".join(result) if result else "anyone (no approvers configured)"
        return [("approvers", f"who may approve: {who}", result)]
    return [("result", f"{activity} returned {json.dumps(result)}", result)]


def _policy_line(in_force: dict[str, Any]) -> str:
    """The money policy a run read, in one line: its digest and what it says."""
    try:
        policy = MoneyPolicy.model_validate(in_force.get("policy"))
    except ValidationError:
        return f"money policy {in_force.get('digest')}"
    return f"money policy {in_force.get('digest')}: {policy_file.summary(policy)}"


def describe_decision(content: list[dict[str, Any]]) -> list[tuple[Kind, str, Any]]:
    """A model response: its words (an answer, or why it asks for tools) and each tool it asks for."""
    calls = [block for block in content if block.get("type") == "tool_use"]
    why = "\n".join(block["text"] for block in content if block.get("type") == "text")
    said: Kind = "reasoning" if calls else "answers"
    told: list[tuple[Kind, str, Any]] = []
    for block in content:
        if block.get("type") == "tool_use":
            args = ", ".join(f"{k}={v!r}" for k, v in block["input"].items())
            call = {"name": block["name"], "input": block["input"], "call": f"{block['name']}({args})", "why": why}
            told.append(("asks", f"the model asks for {call['call']}", call))
        elif block.get("type") == "text":
            told.append((said, SAID[said] + block["text"], block["text"]))
    return told


# --- in words for people ---------------------------------------------------------------------------------------

ASKED = {
    "lookup_order": "The agent asked to look up order {order_id}",
    "order_events": "The agent asked for the events of order {order_id}",
    "shipping_status": "The agent asked where the parcel of order {order_id} is",
    "wait_for_delivery_scan": "The agent asked to wait for news of order {order_id}",
}
"""The tools whose call says all it needs with the order it is about."""


def plainly(entry: Entry, currency: str | None = None) -> str:  # noqa: PLR0911 - one sentence per kind
    """An entry as a person at the desk reads it: a sentence, not a call or a JSON object ("The agent asked to
    refund USD 49.00 on order A-1001"). Entries that already read as words are told as they are; the raw form
    stays in ``entry.text``, for a page's details and for the terminal."""
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.kind == "asks":
        return asked_plainly(detail, currency)
    if entry.kind == "result" and detail:
        return _result_plainly(entry.name, detail, currency)
    if entry.kind == "failed":
        return f"The step {entry.name} did not finish: {entry.text.removeprefix('the activity failed: ')}"
    if entry.kind == "signal" and entry.name == APPROVE_SIGNAL and detail:
        return _answer_plainly(detail, "by signal: the approver is as the sender claimed", currency)
    if entry.kind == "signal":
        return f"The ticket received the signal {entry.name}"
    if entry.kind == "answer" and detail:
        return _answer_plainly(detail, "signed in to the approval inbox", currency)
    if entry.kind == "approval" and isinstance(entry.detail, int):
        return f"A refund of {amount(entry.detail, currency)} waits for a person"
    if entry.kind == "update":
        return f"The ticket took the update {entry.name}"
    if entry.kind == "step":
        return "The agent asks the model what to do next"
    return entry.text


def asked_plainly(call: dict[str, Any], currency: str | None = None) -> str:
    """A tool the model asked for (``{"name", "input", ...}``), as a sentence."""
    name, args = str(call.get("name", "")), call.get("input") or {}
    args = args if isinstance(args, dict) else {}
    cents = args.get("amount_cents")
    if name == "issue_refund" and isinstance(cents, int):
        return f"The agent asked to refund {amount(cents, currency)} on order {args.get('order_id')}"
    if name == "send_email":
        return f"The agent asked to email {args.get('to') or 'the customer'}: \u201c{args.get('subject', '')}\u201d"
    if name in ASKED and args.get("order_id"):
        return ASKED[name].format(order_id=args["order_id"])
    return f"The agent asked to use {name}"


def _result_plainly(name: str, result: dict[str, Any], currency: str | None) -> str:
    def cents(key: str) -> str:
        value = result.get(key)
        return amount(value, currency) if isinstance(value, int) else "?"

    if name == "lookup_order":
        return (
            f"Looked up order {result.get('order_id')}: charged {cents('amount_cents')}, refunded before "
            f"{cents('refunded_cents')}, customer {result.get('customer_email')}"
        )
    if name == "issue_refund":
        again = " (made before under the same key: not paid twice)" if result.get("replayed") else ""
        refund = f"refund #{result.get('refund_id')}"
        return f"Refunded {cents('amount_cents')} on order {result.get('order_id')} ({refund}){again}"
    if name == "send_email":
        again = " (sent before: not sent twice)" if result.get("replayed") else ""
        return f"Emailed {result.get('to')} (email #{result.get('email_id')}){again}"
    if name in {"order_events", "shipping_status"} and "content" in result:
        return f"{'Order events' if name == 'order_events' else 'Shipping'}: {result['content']}"
    return f"The step {name} finished"


def _answer_plainly(answer: dict[str, Any], how: str, currency: str | None) -> str:
    cents = answer.get("amount_cents")
    shown = amount(cents, currency) if isinstance(cents, int) else "an amount"
    verb = "approves" if answer.get("approved") else "declines"
    request = f" (request {answer['request_id']})" if answer.get("request_id") else ""
    return f"{answer.get('approver') or 'Someone'}, {how}, {verb} the refund of {shown}{request}"


def decided_plainly(record: ApprovalRecord, currency: str | None = None) -> str:
    """An answer the ticket recorded, as a person reads it. A timeout is what it is, not an answer: nobody sent it,
    by no channel, so it names neither (the record's approver is empty and its channel meaningless)."""
    request = f"request {record.request_id}: " if record.request_id else ""
    shown = amount(record.amount_cents, currency) if record.amount_cents is not None else "the amount asked"
    if record.decision is ApprovalDecision.TIMED_OUT:
        return f"{request}nobody answered by {record.at:%Y-%m-%d %H:%M} UTC; the refund of {shown} was not made"
    via = "signed in, approval inbox" if record.channel == "web" else "by signal, as claimed"
    who = f"{record.approver or 'an unknown sender'} ({via})"
    at = f"at {record.at:%Y-%m-%d %H:%M} UTC: "
    request = f"request {record.request_id}, {at}" if record.request_id else at
    if record.decision is ApprovalDecision.REJECTED:
        return f"{request}an answer from {who} was rejected: {record.reason}"
    if record.decision is ApprovalDecision.PARTLY_APPROVED:
        return f"{request}{shown} approved by {who}, approval {record.reason}; nothing is paid by it alone"
    because = f": {record.reason}" if record.decision is ApprovalDecision.DECLINED and record.reason else ""
    return f"{request}{shown} {record.decision.value} by {who}{because}"
