"""What one workflow run costs on Temporal Cloud, counted from its history by Temporal's published rules for what
counts as an Action (https://docs.temporal.io/cloud/actions): a user on Temporal Cloud pays per Action, so
``bench.peers`` reports Actions per ticket beside the CPU a self-hosted cluster spends.

The rules, as the page gives them, event by event:

- a run's start is one Action, however it began (a client's start, Continue-As-New, a Schedule); its
  ``WorkflowExecutionContinuedAsNew`` event is not counted again, as the Cloud UI shows it on the new run's start;
  a Child Workflow's start is counted in its parent, as two Actions on ``StartChildWorkflowExecutionInitiated``;
- every Activity scheduled is one Action, and every retry another: the server writes only the last attempt's
  ``ActivityTaskStarted``, with its attempt number, so its retries are ``attempt - 1``;
- all the markers one Workflow Task records (Local Activities, patches, side effects) are one Action together, not
  one each; Local Activity attempts after the first, which the server meters on ``WorkflowTaskCompleted``
  (``metering_metadata``), are one Action each;
- every Timer started, Signal received, Update accepted, Nexus Operation scheduled or cancelled, and reset is one
  Action; so is every Search Attribute upsert, but for one that sets only ``TemporalChangeVersion`` (what a patch
  upserts), which is exempt; a Signal-With-Start is one Action in all, its start and its signal together;
- a memo's change (``WorkflowPropertiesModified``) is not on the page's list, and is not counted.

Some Actions never reach a history, and no count from one can hold them: Queries, Activity and Workflow Task
Heartbeats, rejected Updates, Schedules' own Actions, exports. A count from the history is therefore the least a run
was billed. The rules live here, beside the tests' other support, so a test can hold them to histories counted by
hand (the tests import nothing from ``bench/``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent

__all__ = ["RULES_URL", "billable_actions"]

RULES_URL = "https://docs.temporal.io/cloud/actions"

EXEMPT_SEARCH_ATTRIBUTES = frozenset({"TemporalChangeVersion"})
"""Search Attributes whose upsert is no Action: the one a patch (a workflow's versioning) sets."""

LOCAL_ACTIVITY_RETRIES_CAP = 100
"""The most Actions the Local Activity retries of one Workflow Task count for, as the page says."""


def one(_: HistoryEvent) -> int:
    return 1


def two(_: HistoryEvent) -> int:
    return 2


def retries(event: HistoryEvent) -> int:
    return max(event.activity_task_started_event_attributes.attempt - 1, 0)


def local_activity_retries(event: HistoryEvent) -> int:
    metering = event.workflow_task_completed_event_attributes.metering_metadata
    return min(metering.nonfirst_local_activity_execution_attempts, LOCAL_ACTIVITY_RETRIES_CAP)


def upsert(event: HistoryEvent) -> int:
    names = set(event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)
    return 0 if names <= EXEMPT_SEARCH_ATTRIBUTES else 1


def started(event: HistoryEvent) -> int:
    """A child's start is billed to its parent (two Actions on the parent's initiated event)."""
    return 0 if event.workflow_execution_started_event_attributes.HasField("parent_workflow_execution") else 1


def reset(event: HistoryEvent) -> int:
    cause = event.workflow_task_failed_event_attributes.cause
    return 1 if cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW else 0


E = EventType
RULES: dict[EventType.ValueType, tuple[str, Callable[[HistoryEvent], int]]] = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: ("Start Workflow", started),
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: ("Start Child Workflow", two),
    E.EVENT_TYPE_WORKFLOW_TASK_FAILED: ("Reset Workflow", reset),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: ("Update Workflow Options", one),
    E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: ("Upsert Workflow Search Attributes", upsert),
    E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: ("Schedule Activity", one),
    E.EVENT_TYPE_ACTIVITY_TASK_STARTED: ("Retry Activity", retries),
    E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: ("Retry Local Activity", local_activity_retries),
    E.EVENT_TYPE_TIMER_STARTED: ("Start Timer", one),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: ("Signal Workflow", one),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: ("Accept Workflow Update", one),
    E.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED: ("Schedule Nexus Operation", one),
    E.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED: ("Request Nexus Operation Cancellation", one),
}
"""Each event type that is billed, with the page's name for its Action and how many Actions one event is. Markers
are counted apart, by Workflow Task."""


def billable_actions(events: Iterable[HistoryEvent]) -> Counter[str]:
    """The Actions one run's history shows, by the page's name for each kind (``.total()`` for all of them)."""
    counted: Counter[str] = Counter()
    marker_tasks: set[int] = set()
    previous: HistoryEvent | None = None
    for event in events:
        if event.event_type == E.EVENT_TYPE_MARKER_RECORDED:
            marker_tasks.add(event.marker_recorded_event_attributes.workflow_task_completed_event_id)
        elif event.event_type in RULES and not signal_with_start(previous, event):
            name, rule = RULES[event.event_type]
            counted[name] += rule(event)
        previous = event
    counted["Record Activity Markers"] = len(marker_tasks)
    return +counted  # the kinds this history has none of are left out


def signal_with_start(previous: HistoryEvent | None, event: HistoryEvent) -> bool:
    """The signal a Signal-With-Start carried: the server writes it right after the start, before the first Workflow
    Task, and the two are one Action together."""
    return (
        previous is not None
        and previous.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
        and event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
