"""A ticket's transcript, read from its Temporal history: what the demo narrates and ``show`` prints.

It is read from the event history as the server recorded it, not from a worker's memory, so what it prints
is what a new worker would replay after a crash, and it works with no worker running.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from activities.contracts.fields import money
from activities.contracts.names import AWAITING_APPROVAL_ATTRIBUTE, TICKET_STATE_ATTRIBUTE
from activities.contracts.ticket import TicketState

INDENT = "      "
CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "canceled",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued as new",
}


def say(*lines: str) -> None:
    for line in lines:
        print(line, flush=True)


async def narrate(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    *,
    follow: bool,
    on_waiting: Callable[[], Awaitable[None]] | None = None,
    on_answered: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Print the run's steps; with ``follow``, as they happen until the run closes. ``on_waiting`` is called when
    a refund starts waiting for a person, ``on_answered`` when the ticket starts waiting for the customer."""
    narrator = Narrator(client, on_waiting, on_answered)
    async for event in handle.fetch_history_events(wait_new_event=follow):
        if event.event_type in CLOSED:
            say("", f"  [closed] the run {CLOSED[event.event_type]}")
            return
        handler = narrator.handlers.get(event.event_type)
        if handler is not None:
            await handler(event)


class Narrator:
    def __init__(
        self,
        client: Client,
        on_waiting: Callable[[], Awaitable[None]] | None,
        on_answered: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.on_waiting = on_waiting
        self.on_answered = on_answered
        self.waiting: dict[str, Any] = {}
        """The search attributes as last set: what the ticket waits for, if anything."""
        self.scheduled: dict[int, tuple[str, Any]] = {}
        self.handlers: dict[EventType.ValueType, Callable[[HistoryEvent], Awaitable[None]]] = {
            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: self.scheduled_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: self.completed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: self.failed_activity,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: self.failed_activity,
            EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: self.search_attributes,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: self.signalled,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: self.update_accepted,
            EventType.EVENT_TYPE_TIMER_FIRED: self.timer_fired,
        }

    async def scheduled_activity(self, event: HistoryEvent) -> None:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        self.scheduled[event.event_id] = (name, (await decode(self.client, attrs.input) or [None])[0])
        if name == "think":
            say("", f"  [step] asking the model (event {event.event_id})")

    async def completed_activity(self, event: HistoryEvent) -> None:
        completed = event.activity_task_completed_event_attributes
        result = (await decode(self.client, completed.result) or [None])[0]
        say(*describe(*self.scheduled.get(completed.scheduled_event_id, ("?", None)), result))

    async def failed_activity(self, event: HistoryEvent) -> None:
        say(f"{INDENT}the activity failed: {failure_message(event)}")

    async def search_attributes(self, event: HistoryEvent) -> None:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for name, field in fields.items():
            value = json.loads(field.data) if field.data not in (b"", b"null") else None
            self.waiting[name] = value
            if value is None:
                continue
            if name == AWAITING_APPROVAL_ATTRIBUTE:
                say(f"  [approval] a refund of {money(value)} waits for a person (a durable timer runs)")
                if self.on_waiting is not None:
                    await self.on_waiting()
            elif value == TicketState.WAITING_FOR_CUSTOMER.value:
                say("  [open] the ticket waits for the customer's reply (a durable timer runs)")
                if self.on_answered is not None:
                    await self.on_answered()
            elif name == TICKET_STATE_ATTRIBUTE:
                say("  [waiting] the ticket waits for news about the order (a durable timer runs)")

    async def signalled(self, event: HistoryEvent) -> None:
        attrs = event.workflow_execution_signaled_event_attributes
        payload = (await decode(self.client, attrs.input) or [None])[0]
        say(f"{INDENT}signal {attrs.signal_name}: {json.dumps(payload)}")

    async def update_accepted(self, event: HistoryEvent) -> None:
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        payload = (await decode(self.client, request.input.args) or [None])[0]
        say(f"{INDENT}update {request.input.name}: {json.dumps(payload)}")

    async def timer_fired(self, _event: HistoryEvent) -> None:
        if self.waiting.get(AWAITING_APPROVAL_ATTRIBUTE):
            say(f"{INDENT}nobody answered in time: the refund is not made")
        elif self.waiting.get(TICKET_STATE_ATTRIBUTE) == TicketState.WAITING_FOR_CUSTOMER.value:
            say(f"{INDENT}the customer did not reply in time: the ticket closes as answered")
        elif self.waiting.get(TICKET_STATE_ATTRIBUTE):
            say(f"{INDENT}no news came in time")


async def decode(client: Client, payloads: Payloads) -> list[Any]:
    return await client.data_converter.decode(payloads.payloads)


def describe(activity: str, request: Any, result: Any) -> list[str]:
    if activity == "think" and isinstance(result, dict):
        lines = []
        for block in result.get("content", []):
            if block.get("type") == "tool_use":
                args = ", ".join(f"{k}={v!r}" for k, v in block["input"].items())
                lines.append(f"{INDENT}the model asks for {block['name']}({args})")
            elif block.get("type") == "text":
                lines.append(f"{INDENT}the model answers: " + textwrap.shorten(block["text"], 200))
        return lines
    if activity == "audit" and isinstance(request, dict):
        return [f"{INDENT}audit: {request.get('entry')}"]
    if activity == "default_approvers":
        return [f"{INDENT}who may approve: {', '.join(result) if result else 'anyone (no approvers configured)'}"]
    return [f"{INDENT}{activity} returned {json.dumps(result)}"]


def failure_message(event: HistoryEvent) -> str:
    attrs = (
        event.activity_task_failed_event_attributes
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
        else event.activity_task_timed_out_event_attributes
    )
    return attrs.failure.message or "timed out"
