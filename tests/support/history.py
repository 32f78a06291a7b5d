"""Reading what a run did from its history: the evidence the server keeps, whatever the workers said."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.message import Message as Proto
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from tests.support.tickets import Handle


async def events(handle: Handle, *kinds: EventType.ValueType) -> list[HistoryEvent]:
    """The run's history events of ``kinds`` (all of them, with none)."""
    found = [event async for event in handle.fetch_history_events()]
    return [event for event in found if not kinds or event.event_type in kinds]


async def activity_attempts(handle: Handle, activity: str) -> list[int]:
    """For each time ``activity`` was scheduled, the attempts it took: the server records only the last
    attempt's start event, with its attempt number."""
    history = await events(handle)
    scheduled = {
        e.event_id
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


@dataclass
class RunSize:
    """One run's history as the server counts it against its limits (50 MB a history, 2 MB a payload)."""

    history_bytes: int
    events: int
    largest_payload: int
    think_bytes: list[int]
    """Bytes each step's think activity added (its scheduled and completed events)."""


def payload_sizes(message: Proto) -> Iterator[int]:
    """The size of every payload anywhere in ``message``, however deeply nested."""
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values())
        elif field.is_repeated:
            values = list(value)
        else:
            values = [value]
        for item in values:
            if isinstance(item, Payload):
                yield item.ByteSize()
            elif isinstance(item, Proto):
                yield from payload_sizes(item)


async def measure(client: Client, workflow_id: str, run_id: str | None) -> RunSize:
    """The size of one run's history: the sum of its events' protobuf sizes, its largest payload, and what
    each ``think`` added."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    think: dict[int, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == "think":
                think[event.event_id] = event.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled in think:
                think[scheduled] += event.ByteSize()
    return RunSize(
        history_bytes=sum(e.ByteSize() for e in history.events),
        events=len(history.events),
        largest_payload=max((s for e in history.events for s in payload_sizes(e)), default=0),
        think_bytes=list(think.values()),
    )


async def failed_workflow_tasks(client: Client, workflow_id: str) -> list[str]:
    """The failures of workflow tasks in every run of a workflow id, each as its cause and message: a ticket that
    keeps within Temporal's limits has none, whatever it is sent."""
    failures = []
    async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        async for event in client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                attributes = event.workflow_task_failed_event_attributes
                failures.append(f"{attributes.cause}: {attributes.failure.message}")
    return failures
