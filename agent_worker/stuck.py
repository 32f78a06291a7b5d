"""Stuck tickets: runs whose workflow task fails over and over, so they stay RUNNING, do nothing, and tell no one.

A workflow task that cannot succeed (state this worker cannot read, a deploy that changed the workflow's path
under runs in flight) is retried by the server for ever, with a growing backoff; the run does not fail. Two
ways to find such runs, both without a worker:

- Temporal's ``TemporalReportedProblems`` search attribute. The server sets it on a run after
  ``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute`` workflow task failures or time-outs
  in a row and clears it at the next success, so one visibility query finds them. A server that does this says
  so in its namespace's capabilities (``reported_problems_search_attribute``); one older than 1.30, or with
  the setting at 0, does not.
- Otherwise, every running ticket is described and its pending workflow task's attempt read: one RPC a
  ticket.

Either way the failure comes from the run's history: the server records the first failure of a streak as a
``WorkflowTaskFailed`` (or ``WorkflowTaskTimedOut``) event, and the attempts after it only in the pending task.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from agent_worker import tickets

STUCK_AFTER_FAILURES = 2
"""Workflow task failures (or time-outs) in a row after which a ticket counts as stuck.

A healthy ticket's workflow task does not fail: a worker killed in the middle of one times it out once, and the
next worker completes it. Two in a row are no glitch. Temporal's default for the search attribute, 5, is reached
about a minute after the first failure (the retries of a stuck ticket came 10, 10, 14 and 20 s apart on the dev
server); 2, about 10 s after it."""

MESSAGE_WIDTH = 300
"""A failure's first line is cut to this many characters: enough for a field name at the end of a validation
error, short enough for one line per ticket. ``agent-worker show`` has the whole history."""

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

    @property
    def failures(self) -> int:
        return self.attempt - 1


@dataclass(frozen=True)
class StuckSearch:
    tickets: list[StuckTicket]
    reported_by_server: bool
    """True when the server's ``TemporalReportedProblems`` found them, False when every running ticket was read."""
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


async def find_stuck(client: Client, *, limit: int, within: str | None = None) -> StuckSearch:
    """Up to ``limit`` stuck tickets, from the server's report where it makes one, else from every running ticket;
    ``within``, a visibility condition, narrows the search (the approval inbox's: its task queue)."""
    reported = await server_reports_problems(client)
    query = tickets.STUCK_QUERY if reported else tickets.RUNNING_QUERY
    # The server has already counted the failures of a ticket it reports; a ticket that recovered since (the
    # attribute is cleared a moment after the success) shows a first attempt.
    at_least = 2 if reported else STUCK_AFTER_FAILURES + 1
    found: list[StuckTicket] = []
    examined = 0
    async for execution in client.list_workflows(f"{query} AND {within}" if within else query):
        examined += 1
        stuck = await examine(client, execution.id, execution.run_id, at_least=at_least)
        if stuck is not None:
            found.append(stuck)
            if len(found) >= limit:
                break
    return StuckSearch(found, reported_by_server=reported, examined=examined)


async def examine(client: Client, workflow_id: str, run_id: str, *, at_least: int) -> StuckTicket | None:
    """The run as a stuck ticket if it runs and its pending workflow task is at attempt ``at_least`` or later."""
    handle = tickets.handle(client, workflow_id, run_id=run_id)
    try:
        description = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:  # deleted since it was listed
            return None
        raise
    attempt = description.raw_description.pending_workflow_task.attempt  # 0 when no task is pending
    if description.status != WorkflowExecutionStatus.RUNNING or attempt < at_least:
        return None
    problem: HistoryEvent | None = None
    async for event in handle.fetch_history_events():
        if event.event_type in _PROBLEM_EVENTS:
            problem = event  # the last one: the first failure of the streak that goes on now
    return StuckTicket(
        workflow_id=workflow_id,
        run_id=run_id,
        attempt=attempt,
        since=problem.event_time.ToDatetime(tzinfo=UTC) if problem else None,
        failure=describe_problem(problem),
    )


def describe_problem(event: HistoryEvent | None) -> str:
    if event is None:
        return "no failed workflow task in the history"
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
        return "the workflow task timed out: no worker completed it in time"
    failure = event.workflow_task_failed_event_attributes.failure
    first_line = next(iter(failure.message.splitlines()), "") or "(no message)"
    kind = failure.application_failure_info.type if failure.HasField("application_failure_info") else ""
    text = f"{kind}: {first_line}" if kind and not first_line.startswith(kind) else first_line
    return textwrap.shorten(text, MESSAGE_WIDTH, placeholder=" ...")
