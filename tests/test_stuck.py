"""Stuck tickets are found: ``agent-worker tickets --stuck`` lists the runs whose workflow task fails over and
over, with the failure, from the server's ``TemporalReportedProblems`` or, on a server that does not set it,
from each running ticket's pending workflow task; and the runs waiting on an activity retried until it succeeds
that keeps failing, from their pending activities; a ticket that waits as it should is not listed."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL, WORKFLOW_NAME
from agent_worker.cli.devserver import start_dev_server
from agent_worker.cli.operations import when
from agent_worker.stuck import server_reports_problems
from agent_worker.tickets import REPORTED_PROBLEMS_ATTRIBUTE
from tests.support.handover import RELAY, NewerWorkerHandsOver, hand_over_unreadable_state
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.variants import LooksUpBeforeThinking
from tests.support.waits import awaiting, poll

UNREADABLE = (
    "UnreadableStateError: This worker cannot read the state the ticket's previous run handed over, probably "
    "written by a newer version of the worker; a worker running that version will take it "
    "(written_by_a_newer_worker: Extra inputs are not permitted)"
)
LINE = re.compile(
    r"^(?P<id>ticket-\S+) +stuck since (?P<since>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC, (?P<failures>\d+) failed "
    r"attempts: (?P<failure>.+)$"
)


async def tickets_stuck(client: Client) -> tuple[dict[str, re.Match[str]], str]:
    """``agent-worker tickets --stuck`` as an operator runs it: its lines by workflow id, and its stderr."""
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "tickets",
        "--stuck",
        "--address",
        address(client),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=os.environ,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = [LINE.match(line) for line in out.decode().splitlines()]
    assert all(lines), f"a line that is not a stuck ticket: {out.decode()}"
    return {m["id"]: m for m in lines if m}, err.decode()


async def listed_until(client: Client, stuck: set[str]) -> tuple[dict[str, re.Match[str]], str]:
    """Ask ``tickets --stuck`` until it lists every one of ``stuck`` (the failures have to happen first)."""

    async def listing_them() -> tuple[dict[str, re.Match[str]], str] | None:
        listed, err = await tickets_stuck(client)
        return (listed, err) if stuck <= listed.keys() else None

    return await poll(listing_them, timeout=90, interval=1, what=f"tickets --stuck to list {sorted(stuck)}")


async def first_failure(handle: Handle) -> tuple[str, str]:
    """When the history recorded the first failed workflow task, as the command prints it, and its message."""
    (failed, *_) = await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    return when(failed.event_time.ToDatetime(tzinfo=UTC)), failed.workflow_task_failed_event_attributes.failure.message


async def marked(handle: Handle) -> bool:
    """Whether the server set ``TemporalReportedProblems`` on the run."""
    description = await handle.describe()
    return (
        REPORTED_PROBLEMS_ATTRIBUTE
        in description.raw_description.workflow_execution_info.search_attributes.indexed_fields
    )


async def test_tickets_stuck_lists_the_runs_a_deploy_left_failing_with_their_failure_and_not_a_waiting_ticket(
    agent: Harness, client: Client
) -> None:
    assert await server_reports_problems(client), "the embedded dev server marks stuck runs"
    released = Harness(client, agent.store, task_queue=f"support-agent-{uuid.uuid4()}")
    async with agent.worker(), released.worker():
        waiting = await agent.start(ticket())
        changed = await released.start(ticket())
        await awaiting(waiting, 4900)
        await awaiting(changed, 4900)

    # A careless release (it looks the order up before thinking) replaces the workers of one queue while a
    # ticket waits there; a person approves, and replaying the ticket on the new code fails. Meanwhile a newer
    # worker hands a ticket over to the agent's queue with state its workers cannot read.
    async with (
        agent.worker(),
        Worker(client, task_queue=RELAY, workflows=[NewerWorkerHandsOver]),
        Worker(client, task_queue=released.task_queue, workflows=[LooksUpBeforeThinking]),
    ):
        await changed.signal(APPROVE_SIGNAL, answer(4900))
        unreadable = await hand_over_unreadable_state(client, agent.task_queue)
        listed, _ = await listed_until(client, {changed.id, unreadable.id})
        assert await awaiting(waiting, 4900), "the waiting ticket still waits for its approval, as it should"

    assert waiting.id not in listed
    line = listed[unreadable.id]
    assert line["failure"] == UNREADABLE
    assert int(line["failures"]) >= 2
    assert line["since"] == (await first_failure(unreadable))[0]
    line = listed[changed.id]
    assert (line["since"], line["failure"]) == await first_failure(changed)
    assert line["failure"].startswith("[TMPRL1100] Nondeterminism error: ")
    assert int(line["failures"]) >= 2
    for handle in (changed, unreadable):
        assert (await handle.describe()).workflow_type == WORKFLOW_NAME
        assert await marked(handle)
        await handle.terminate("test over")
    assert agent.store.payments.refunds() == [], "the approved refund was never paid: the ticket is stuck before it"


async def test_a_ticket_whose_records_cannot_be_archived_is_listed_as_stuck_naming_the_activity_and_show_says_so(
    agent: Harness, client: Client
) -> None:
    """The content store refuses every write as the run hands over (a fault fails each attempt of
    ``archive_records``). Temporal retries ``archive_records`` until it succeeds, so the ticket waits on it for
    ever: no workflow task fails, the server reports nothing, and without looking at its pending activities it
    would look like a ticket at work."""
    async with agent.worker(faults="before:archive_records=fail*1000"):
        # it hands over at its approval request, and the next run carries only its records' key
        failing = await agent.start(ticket(continue_as_new_after_steps=2, approval_timeout_seconds=60))
        listed, _ = await listed_until(client, {failing.id})

        line = listed[failing.id]
        failure = "InjectedFailureError: fault before:archive_records#1=fail*1000 failed this attempt"
        assert line["failure"] == f"activity archive_records: {failure}"
        assert int(line["failures"]) >= 2
        (scheduled, *_) = [
            event
            for event in await events(failing, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
            if event.activity_task_scheduled_event_attributes.activity_type.name == "archive_records"
        ]
        assert line["since"] == when(scheduled.event_time.ToDatetime(tzinfo=UTC))
        assert not await marked(failing), "the server saw no workflow task fail"
        assert await events(failing, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []

        shown = await run(AGENT_WORKER, "show", failing.id, "--address", address(client))
        stuck = re.search(
            r"\nstuck: its activity archive_records, retried until it succeeds, failed (\d+) times in a row since "
            r"(.+) UTC: (.+)\n",
            shown,
        )
        assert stuck is not None, shown
        assert int(stuck[1]) >= 2
        assert (stuck[2], stuck[3]) == (line["since"], failure)
        await failing.terminate("test over")
    assert agent.store.payments.refunds() == []


@pytest.fixture
async def server_without_reports() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server that does not set ``TemporalReportedProblems``, like a server before 1.30 or one with the
    setting at 0."""
    env = await start_dev_server(
        None,
        extra_args=["--dynamic-config-value", "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=0"],
    )
    yield env
    await env.shutdown()


async def test_on_a_server_that_marks_nothing_the_pending_workflow_tasks_attempt_finds_the_stuck_ticket(
    server_without_reports: WorkflowEnvironment, store: Business
) -> None:
    client = server_without_reports.client
    assert not await server_reports_problems(client)
    agent = Harness(client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    async with agent.worker(), Worker(client, task_queue=RELAY, workflows=[NewerWorkerHandsOver]):
        waiting = await agent.start(ticket())
        await awaiting(waiting, 4900)
        unreadable = await hand_over_unreadable_state(client, agent.task_queue)
        listed, err = await listed_until(client, {unreadable.id})

    assert set(listed) == {unreadable.id}, "the ticket waiting for its approval is not stuck"
    assert err.strip() == (
        "(this server does not set TemporalReportedProblems: read the pending workflow task and activities of 2 "
        "running tickets)"
    )
    line = listed[unreadable.id]
    assert line["failure"] == UNREADABLE
    assert int(line["failures"]) >= 2
    assert line["since"] == (await first_failure(unreadable))[0]
    assert not await marked(unreadable)
    description = await unreadable.describe()
    assert description.raw_description.pending_workflow_task.attempt >= int(line["failures"]) + 1

    # ``show`` says so too, rather than leaving the operator to wait for a query no worker can answer.
    shown = await run(AGENT_WORKER, "show", unreadable.id, "--address", address(client))
    stuck = re.search(
        r"\nstuck: it does nothing, its workflow task failed (\d+) times in a row since (.+) UTC: (.+)\n", shown
    )
    assert stuck is not None, shown
    assert int(stuck[1]) >= 2
    assert (stuck[2], stuck[3]) == (line["since"], UNREADABLE)
    await unreadable.terminate("test over")
