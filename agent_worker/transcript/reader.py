"""A run's history read into entries: what each event tells, decoded, with what later events refer back to.

It is read from the event history as the server recorded it, not from a worker's memory, so what it tells is what
a new worker would replay after a crash, and it works with no worker running. Payloads are decoded by the client's
data converter, so with encryption on they are decrypted with the keys the client was given.

Which tools pay, and what their payouts are called, is read from a registry of tools (``activities.tools.Tools``,
the product's ``TOOLS`` unless given one): a payout asked for, made, waiting for a person, answered or let run out
is told by the kind its tool declares (``Entry.payout``), never by a tool named here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError, FailureError

from activities.contracts.fields import amount
from activities.contracts.names import (
    APPROVAL_REQUEST_MEMO,
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    CUSTOMER_MESSAGE,
    TICKET_STATE_ATTRIBUTE,
)
from activities.contracts.policy import MoneyPolicy
from activities.contracts.ticket import TicketState
from activities.contracts.world import OrderLookup
from activities.tools import LOOKUP_ORDER, TOOLS, PayoutKind, Tools
from agent_worker import policy_file
from agent_worker.transcript.entry import CLOSED, SAID, Entry, Kind, entry


async def entries(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    *,
    follow: bool,
    tools: Tools = TOOLS,
    waiting: PayoutKind | None = None,
) -> AsyncIterator[Entry]:
    """The run's entries, in order, its payouts told by ``tools``' declarations (``waiting``: the payout that waited
    for a person as the run before ended, which this run may go on waiting for); with ``follow``, as they happen,
    until the run closes."""
    reader = Reader(client, tools, waiting)
    async for event in handle.fetch_history_events(wait_new_event=follow):
        for told in await reader.read(event):
            yield told
            if told.kind == "closed":
                return


class Reader:
    """Turns one run's events, read in order, into entries; it keeps what later events refer back to (the
    activity a result answers, what the ticket waits for, who the customer is)."""

    def __init__(self, client: Client, tools: Tools = TOOLS, waiting: PayoutKind | None = None) -> None:
        self.client = client
        self.tools = tools
        self.asked: list[tuple[PayoutKind, Any]] = []
        """The payouts the model asked for, in order, with their amounts: what a request for a person is about."""
        self.payout = waiting
        """The kind of the payout waiting for a person, or last waiting: what its answers and its silence are about
        (at first, the one a run that continued the ticket was waiting on)."""
        self.customer = "the customer"
        self.waiting: dict[str, Any] = {}
        """The search attributes as last set: what the ticket waits for, if anything."""
        self.scheduled: dict[int, tuple[str, Any]] = {}
        self.orders: dict[str, OrderLookup] = {}
        """The orders the run looked up: what currency its amounts are in."""
        self.handlers: dict[EventType.ValueType, Callable[[HistoryEvent], Awaitable[list[Entry]]]] = {
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: self.started,
            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: self.scheduled_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: self.completed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: self.failed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: self.failed_activity,
            EventType.EVENT_TYPE_MARKER_RECORDED: self.marker,
            EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: self.search_attributes,
            EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: self.memo,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: self.signalled,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: self.update_accepted,
            EventType.EVENT_TYPE_TIMER_FIRED: self.timer_fired,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: self.completed,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: self.failed,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: self.terminated,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: self.timed_out,
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
        told = [entry(event, kind, text, name, detail) for kind, text, detail in describe(name, request, result)]
        self.orders.update((order.order_id, order) for order in orders_of(told))
        return [self.of_payout(e) for e in told]

    def of_payout(self, told: Entry) -> Entry:
        """``told`` with the kind of payout it is about, if a paying tool asked for or finished; the payouts asked
        for are kept, for the request that may follow."""
        call = told.detail if told.kind == "asks" and isinstance(told.detail, dict) else None
        name = str(call.get("name", "")) if call is not None else told.name if told.kind == "result" else ""
        kind = self.tools.payout_of(name)
        if kind is None:
            return told
        if call is not None:
            args = call.get("input")
            self.asked.append((kind, args.get("amount_cents") if isinstance(args, dict) else None))
        return replace(told, payout=kind)

    def waiting_for(self, amount_cents: Any) -> PayoutKind | None:
        """The payout a request for a person is about: the last asked for of its amount, else the last asked for,
        else (a run that took over a request from the one it continues) the one waiting as it began."""
        same = [kind for kind, cents in self.asked if cents == amount_cents]
        kinds = same or [kind for kind, _ in self.asked]
        return kinds[-1] if kinds else self.payout

    async def marker(self, event: HistoryEvent) -> list[Entry]:
        """A local activity that completed (the money policy read, the closing line), told as its scheduled twin is
        told."""
        found = await local_activity(self.client, event)
        if found is None:
            return []
        name, result = found
        return [entry(event, kind, text, name, detail) for kind, text, detail in describe(name, None, result)]

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
                self.payout = self.waiting_for(value)
                shown = amount(value, currency_of(self.orders.values()))
                text = f"a {self.noun} of {shown} waits for a person (a durable timer runs)"
                found.append(replace(entry(event, "approval", text, detail=value), payout=self.payout))
            elif value == TicketState.WAITING_FOR_CUSTOMER.value:
                found.append(entry(event, "open", "the ticket waits for the customer's reply (a durable timer runs)"))
            elif name == TICKET_STATE_ATTRIBUTE:
                text = "the ticket waits for news about the order (a durable timer runs)"
                found.append(entry(event, "waiting", text))
        return found

    async def memo(self, event: HistoryEvent) -> list[Entry]:
        """The request memo, written as a request opens or is taken over by a run that continues the ticket: it
        names the payout waiting (``ApprovalRequest.payout``), which the answers and the silence after it are
        about. Nothing is told of it."""
        fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
        if APPROVAL_REQUEST_MEMO not in fields:
            return []
        request = first(await decode(self.client, Payloads(payloads=[fields[APPROVAL_REQUEST_MEMO]])))
        if isinstance(request, dict):
            self.payout = self.tools.payout_called(str(request.get("payout", ""))) or self.payout
        return []

    async def signalled(self, event: HistoryEvent) -> list[Entry]:
        attrs = event.workflow_execution_signaled_event_attributes
        payload = first(await decode(self.client, attrs.input))
        if attrs.signal_name == CUSTOMER_MESSAGE and isinstance(payload, dict) and "text" in payload:
            return [self.reply(event, payload)]
        text = f"signal {attrs.signal_name}: {json.dumps(payload)}"
        about = self.payout if attrs.signal_name == APPROVE_SIGNAL else None
        return [replace(entry(event, "signal", text, attrs.signal_name, payload), payout=about)]

    async def update_accepted(self, event: HistoryEvent) -> list[Entry]:
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        name, payload = request.input.name, first(await decode(self.client, request.input.args))
        if name == CUSTOMER_MESSAGE and isinstance(payload, dict) and "text" in payload:
            return [self.reply(event, payload)]
        if name == APPROVE_SIGNAL and isinstance(payload, dict):
            verb = "approves" if payload.get("approved") else "declines"
            cents = payload.get("amount_cents")
            shown = amount(cents, currency_of(self.orders.values())) if isinstance(cents, int) else cents
            request_id = payload.get("request_id")
            text = f"approval inbox: {payload.get('approver')} (signed in) {verb} {shown} (request {request_id})"
            return [replace(entry(event, "answer", text, name, payload), payout=self.payout)]
        return [entry(event, "update", f"update {name}: {json.dumps(payload)}", name, payload)]

    @property
    def noun(self) -> str:
        """What the payout waiting is called: its declared noun, ``payout`` where no tool here declares it."""
        return self.payout.noun if self.payout is not None else "payout"

    def reply(self, event: HistoryEvent, payload: dict[str, Any]) -> Entry:
        return entry(event, "customer", f"Customer ({self.customer}) replies: {payload['text']}", CUSTOMER_MESSAGE)

    async def timer_fired(self, event: HistoryEvent) -> list[Entry]:
        if self.waiting.get(AWAITING_APPROVAL_ATTRIBUTE):
            text = f"nobody answered in time: the {self.noun} is not made"
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

    async def failed(self, event: HistoryEvent) -> list[Entry]:
        """A run that failed, with its failure's type and message as the history keeps them: a ticket refused at once
        is ``InvalidTicketInput``, whose message names the field."""
        error = await self.client.data_converter.decode_failure(
            event.workflow_execution_failed_event_attributes.failure
        )
        kind = error.type if isinstance(error, ApplicationError) and error.type else type(error).__name__
        message = error.message if isinstance(error, FailureError) else str(error)
        return [entry(event, "closed", f"the run failed: {kind}: {message}", detail=kind)]

    async def terminated(self, event: HistoryEvent) -> list[Entry]:
        attrs = event.workflow_execution_terminated_event_attributes
        who = f" by {attrs.identity}" if attrs.identity else ""
        return [entry(event, "closed", f"the run was terminated{who}: {attrs.reason or 'no reason given'}")]

    async def timed_out(self, event: HistoryEvent) -> list[Entry]:
        return [entry(event, "closed", "the run timed out: it outlived the timeout it was started with")]


async def decode(client: Client, payloads: Payloads) -> list[Any]:
    return await client.data_converter.decode(payloads.payloads)


def first(values: list[Any]) -> Any:
    return values[0] if values else None


LOCAL_ACTIVITY_MARKER = "core_local_activity"


async def local_activity(client: Client, event: HistoryEvent) -> tuple[str, Any] | None:
    """The name and the result of a local activity that completed, from the marker the SDK records for it: its
    ``data`` detail is the SDK's own JSON, which names the activity, and its ``result`` went through the data
    converter. None for any other marker, or a local activity that failed."""
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in attrs.details or "data" not in attrs.details:
        return None
    try:
        name = json.loads(attrs.details["data"].payloads[0].data)["activity_type"]
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    return str(name), first(await decode(client, attrs.details["result"]))


def orders_of(told: Sequence[Entry]) -> list[OrderLookup]:
    """Every order the model looked up, as the tool reported it, the latest look-up of each."""
    orders: dict[str, OrderLookup] = {}
    for e in told:
        if e.kind == "result" and e.name == LOOKUP_ORDER.name and isinstance(e.detail, dict):
            try:
                order = OrderLookup.model_validate(e.detail)
            except ValidationError:
                continue
            orders[order.order_id] = order
    return list(orders.values())


def last_waiting(told: Sequence[Entry]) -> PayoutKind | None:
    """The kind of the last payout that waited for a person, as its tool declares it; None where none waited, or
    no tool the reader knew declares it."""
    return next((e.payout for e in reversed(told) if e.kind == "approval" and e.payout is not None), None)


def payout_waited(told: Sequence[Entry]) -> str:
    """What the last payout that waited for a person is called (``store credit``): what a ticket's recorded answers
    are about; ``payout`` where none waited, or no tool the reader knew declares it."""
    kind = last_waiting(told)
    return kind.noun if kind is not None else "payout"


def currency_of(orders: Iterable[OrderLookup]) -> str | None:
    """The currency a ticket's amounts are in: the one its orders, as looked up, agree on; None where none was
    looked up, or they are in several."""
    found = {order.currency for order in orders}
    return found.pop() if len(found) == 1 else None


def describe(activity: str, request: Any, result: Any) -> list[tuple[Kind, str, Any]]:
    """What an activity's completion tells, as (kind, text, detail)."""
    if activity == "think" and isinstance(result, dict):
        return describe_decision(result.get("content", []))
    if activity == "audit" and isinstance(request, dict):
        return [("audit", f"audit: {request.get('entry')}", request.get("entry"))]
    if activity == "closing" and isinstance(result, str):  # a local activity: its marker holds what it wrote
        return [("audit", f"audit: {result}", result)]
    if activity == "vouched":
        checks = "checks" if result is True else "does not check"
        return [("result", f"the approval inbox's signature {checks}", result)]
    if activity == "money_policy" and isinstance(result, dict):
        return [("approvers", _policy_line(result), result)]
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
