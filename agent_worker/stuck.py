"""Stuck tickets: runs that stay RUNNING, do nothing, and tell no one, because their workflow task fails over and
over, or because an activity that is retried until it succeeds keeps failing.

An activity the ticket cannot go on without (the audit trail, settling a payment, archiving records: those
``workflows.timeouts`` gives no maximum of attempts) is retried for ever, with a growing backoff, while the run
waits on it. Visibility knows nothing of it; the run's description does: its pending activities, each with its
attempt and last failure. So every running ticket is described, one RPC a ticket.

A workflow task that cannot succeed (state this worker cannot read, a deploy that changed the workflow's path
under runs in flight) is retried by the server for ever, with a growing backoff; the run does not fail. Two
ways to find such runs, both without a worker:

- Temporal's ``TemporalReportedProblems`` search attribute. The server sets it on a run after
  ``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute`` workflow task failures or time-outs
  in a row and clears it at the next success, so one visibility query finds them. A server that does this says
  so in its namespace's capabilities (``reported_problems_search_attribute``); one older than 1.30, or with
  the setting at 0, does not.
- Otherwise, its pending workflow task's attempt is read where every running ticket is described anyway.

Either way the failure comes from the run's history: the server records the first failure of a streak as a
``WorkflowTaskFailed`` (or ``WorkflowTaskTimedOut``) event, and the attempts after it only in the pending task.
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from agent_worker import tickets

STUCK_AFTER_FAILURES = 2
"""Workflow task failures (or time-outs) in a row after which a ticket counts as stuck.

A healthy ticket's workflow task does not fail: a worker killed in the middle of one times it out once, and the
next worker completes it. Two in a row are no glitch. Temporal's default for the search attribute, 5, is reached
about a minute after the first failure (the retries of a stuck ticket came 10, 10, 14 and 20 s apart on the dev
server); 2, about 10 s after it."""

STUCK_AFTER_ACTIVITY_FAILURES = 2
"""Failed attempts in a row of an activity retried until it succeeds after which its ticket counts as stuck: two
failures, then, are no glitch either (its retries come 1 and 2 s apart at first, then back off to 30 s)."""

MESSAGE_WIDTH = 300
"""A failure's first line is cut to this many characters: enough for a field name at the end of a validation
error, short enough for one line per ticket. ``agent-worker show`` has the whole history."""

NON_DETERMINISTIC = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
_PROBLEM_EVENTS = (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)


@dataclass(frozen=True)
class StuckTicket:
    workflow_id: str
    run_id: str
    attempt: int
    """The pending workflow task's attempt: one more than the failures in a row."""
    since: datetime | None
    """When the first failure of the streak was recorded."""
    failure: str
    """That failure, as the history records it: its type and the first line of its message."""
    activity: str | None = None
    """The activity that keeps failing, retried until it succeeds (its ``attempt``, ``since`` and ``failure`` are
    then the activity's: when it was scheduled, and its last failure); None: the workflow task."""

    @property
    def failures(self) -> int:
        return self.attempt - 1


@dataclass(frozen=True)
class StuckSearch:
    tickets: list[StuckTicket]
    reported_by_server: bool
    """True when the server's ``TemporalReportedProblems`` found those whose workflow task fails, False when the
    pending workflow task of every running ticket was read."""
    examined: int
    """Runs described."""


async def server_reports_problems(client: Client) -> bool:
    """Whether the server sets ``TemporalReportedProblems`` in this namespace (its capabilities say so)."""
    try:
        response = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError as error:
        if error.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            return False  # then read every running ticket, which needs no more than listing them
        raise
    return response.namespace_info.capabilities.reported_problems_search_attribute


async def find_stuck(client: Client, *, limit: int, within: str | None = None, activities: bool = True) -> StuckSearch:
    """Up to ``limit`` stuck tickets: first those the server reports where it makes a report, then, with
    ``activities`` or where the server reports nothing, every running ticket described, for an activity that keeps
    failing (and a failing workflow task the server did not report); ``within``, a visibility condition, narrows
    the search (the approval inbox's: its task queue). Without ``activities`` a server that reports costs no
    description of a healthy ticket: what a page that anyone may reload can afford."""
    reported = await server_reports_problems(client)
    # The server has already counted the failures of a ticket it reports; a ticket that recovered since (the
    # attribute is cleared a moment after the success) shows a first attempt.
    searches = [(tickets.STUCK_QUERY, 2)] if reported else []
    if activities or not reported:
        searches.append((tickets.RUNNING_QUERY, STUCK_AFTER_FAILURES + 1))
    found: dict[str, StuckTicket] = {}
    examined = 0
    for query, at_least in searches:
        async for execution in client.list_workflows(f"{query} AND {within}" if within else query):
            if len(found) >= limit:
                return StuckSearch(list(found.values()), reported_by_server=reported, examined=examined)
            if execution.run_id in found:
                continue
            examined += 1
            stuck = await examine(client, execution.id, execution.run_id, at_least=at_least)
            if stuck is not None:
                found[execution.run_id] = stuck
    return StuckSearch(list(found.values()), reported_by_server=reported, examined=examined)


async def examine(client: Client, workflow_id: str, run_id: str, *, at_least: int) -> StuckTicket | None:
    """The run as a stuck ticket if it runs and its pending workflow task is at attempt ``at_least`` or later."""
    handle = tickets.handle(client, workflow_id, run_id=run_id)
    try:
        description = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:  # deleted since it was listed
            return None
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    attempt = description.raw_description.pending_workflow_task.attempt  # 0 when no task is pending
    if attempt < at_least:
        return await activity_failing(handle, description.raw_description.pending_activities)
    problem: HistoryEvent | None = None
    written: list[str] = []
    async for event in handle.fetch_history_events():
        if event.event_type in _PROBLEM_EVENTS:
            problem = event  # the last one: the first failure of the streak that goes on now
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            written.append(build_of(event))
    foreign = another_build(problem, written)
    return StuckTicket(
        workflow_id=workflow_id,
        run_id=run_id,
        attempt=attempt,
        since=problem.event_time.ToDatetime(tzinfo=UTC) if problem else None,
        failure=f"{describe_problem(problem)}; {foreign}" if foreign else describe_problem(problem),
    )


def build_of(completed: HistoryEvent) -> str:
    """The build of the worker that completed a workflow task, as the history keeps it: its deployment version's,
    or an unversioned worker's own (``wiring.build_id``)."""
    attributes = completed.workflow_task_completed_event_attributes
    return attributes.deployment_version.build_id or attributes.worker_version.build_id


def another_build(problem: HistoryEvent | None, written: Sequence[str]) -> str | None:
    """What to do about a run whose workflow task fails as nondeterministic, written by workers of another release
    than this program's (a pool without versioning upgraded while the release before still had tickets open): which
    builds wrote it, one of whose workers must take it on. The failed event does not say which build failed, so the
    release is read from the writers' default build ids (``wiring.build_id``: ``agent-worker-<release>-<digest>``;
    1.x's name none); a history this release wrote that it cannot replay is the bug the replay gate is there to
    catch, and a build named by hand says nothing of its release. None in those cases, and for any other failure."""
    if problem is None or problem.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        return None
    if problem.workflow_task_failed_event_attributes.cause != NON_DETERMINISTIC:
        return None
    writers = list(dict.fromkeys(build for build in written if build))
    ours = f"agent-worker-{importlib.metadata.version('agent-worker')}-"
    if not writers or not all(build.startswith("agent-worker-") for build in writers):
        return None
    if any(build.startswith(ours) for build in writers):
        return None
    return (
        f"written by {', '.join(writers)}, of another release: a build replays only the histories its own release "
        f"wrote, so keep a worker of {writers[-1]} on this task queue until the ticket closes "
        "(docs/rollouts.md#from-1x-to-20)"
    )


async def activity_failing(
    handle: WorkflowHandle[Any, Any], pending: Sequence[PendingActivityInfo]
) -> StuckTicket | None:
    """The run as a stuck ticket if one of its ``pending`` activities is retried until it succeeds (no maximum of
    attempts) and has failed ``STUCK_AFTER_ACTIVITY_FAILURES`` times in a row or more: since when it was scheduled
    (from the history), with its last failure."""
    failing = [
        activity
        for activity in pending
        if activity.maximum_attempts == 0
        and activity.attempt > STUCK_AFTER_ACTIVITY_FAILURES
        and activity.HasField("last_failure")
    ]
    if not failing:
        return None
    activity = failing[0]
    since: datetime | None = None
    async for event in handle.fetch_history_events():
        scheduled = event.activity_task_scheduled_event_attributes
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and scheduled.activity_id == (
            activity.activity_id
        ):
            since = event.event_time.ToDatetime(tzinfo=UTC)
    return StuckTicket(
        workflow_id=handle.id,
        run_id=handle.run_id or "",
        attempt=activity.attempt,
        since=since,
        failure=describe_failure(activity.last_failure),
        activity=activity.activity_type.name,
    )


def describe_problem(event: HistoryEvent | None) -> str:
    if event is None:
        return "no failed workflow task in the history"
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
        return "the workflow task timed out: no worker completed it in time"
    return describe_failure(event.workflow_task_failed_event_attributes.failure)


def real_failure(failure: Failure) -> Failure:
    """The failure as the code that failed told it: the server puts a failure of its own on top of one it will not
    store whole ("Failure exceeds size limit.", a ``ServerFailureInfo``), keeping the original, cut, as its cause.
    Followed down the cause chain to the first failure that is not the server's."""
    while failure.HasField("server_failure_info") and failure.HasField("cause"):
        failure = failure.cause
    return failure


def describe_failure(failure: Failure) -> str:
    """A failure in one line: its type and the first line of its message, cut to ``MESSAGE_WIDTH``; the failure the
    code raised, not a note the server put on top of it (``real_failure``)."""
    failure = real_failure(failure)
    first_line = next(iter(failure.message.splitlines()), "") or "(no message)"
    kind = failure.application_failure_info.type if failure.HasField("application_failure_info") else ""
    text = f"{kind}: {first_line}" if kind and not first_line.startswith(kind) else first_line
    return textwrap.shorten(text, MESSAGE_WIDTH, placeholder=" ...")
