"""The two audit entries a ticket writes without an activity of their own (the policy's, the closing line) stay exact
when the workflow task that wrote them is taken again, which a local activity's write does not survive on its own:
its work is done before its task is committed.

- The closing line is written in the task that closes the run. A signal that arrives meanwhile makes the server
  refuse that task (``UNHANDLED_COMMAND``); the task taken again writes the signal's note first and the closing
  line after it, which replaces the first attempt's: one closing line, the last entry.
- The money policy's entry is written by the read that finds it. A worker killed after the read, before its task
  was committed, and a new worker under another policy (a deploy that changed the file): the ticket is judged by
  the new policy, and its entry is in the trail, beside the one the dead worker's read wrote (true of what that
  read found, and under a key of its own, so neither is lost or given the other's words).

Real tickets, a real dev server, real worker processes; the moments are made by holding the local activity
(``tests.support.holds``) or by a SIGKILL at it (``tests.support.faults``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.transcript import entries
from tests.support.desk import LOOSE
from tests.support.faulty_worker import WORKER_COMMAND
from tests.support.harness import Harness
from tests.support.holds import Holds
from tests.support.processes import spawn_worker
from tests.support.tickets import ticket
from tests.support.waits import poll

HISTORIES = Path(__file__).parent.parent / "replay_histories"
UNDER_THE_LIMIT = 10_000
"""A ticket limit above the scripted refund of 49.00: the ticket pays without a person."""


async def test_a_closing_task_the_server_refuses_leaves_one_closing_line_last(agent: Harness) -> None:
    holds = Holds("closing")
    async with agent.worker(plugins=[holds]):
        handle = await agent.start(ticket(approval_limit_cents=UNDER_THE_LIMIT))
        await holds.entered("closing")  # the run is closing: its last task is running the closing line's write
        await handle.signal(APPROVE_SIGNAL)  # an answer with nothing in it, to nothing: a note for the trail
        holds.release("closing")
        outcome = await asyncio.wait_for(handle.result(), 60)

    refused = [
        event
        for event in (await handle.fetch_history()).events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and event.workflow_task_failed_event_attributes.cause
        == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
    ]
    assert refused, "the signal did not land in the closing task: the test did not make the moment it is about"
    trail = agent.store.audit.entries(outcome.ticket_id)
    closing = "closed as resolved after 4 steps; refunded USD 49.00"
    assert [entry for entry in trail if entry.startswith("closed as")] == [closing]
    assert trail[-1] == closing
    assert any("malformed approval" in entry for entry in trail[:-1]), trail  # the note, before the close
    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    told = [e.text async for e in entries(agent.client, handle, follow=False) if e.kind == "audit"]
    assert told[-1] == f"audit: {closing}"  # the transcript reads the local activity's marker, as the trail


async def test_a_policy_changed_between_two_attempts_at_a_read_is_the_one_the_ticket_is_judged_and_audited_by(
    agent: Harness,
) -> None:
    changed = LOOSE.model_copy(update={"approval": LOOSE.approval.model_copy(update={"timeout_seconds": 86_400})})
    assert changed.digest() != LOOSE.digest()
    killed = await spawn_worker(
        agent.worker_env(AGENT_FAULTS="after:money_policy=kill"), command=WORKER_COMMAND
    )  # under the loose desk: it reads the policy, writes its entry, and dies before the task is committed
    try:
        handle = await agent.start(ticket(approval_limit_cents=UNDER_THE_LIMIT))
        await asyncio.wait_for(killed.wait(), 60)
    finally:
        if killed.returncode is None:
            killed.kill()
            await killed.wait()

    async def read_once() -> list[str] | None:
        entries = agent.store.audit.entries()
        return entries or None

    assert await poll(read_once, timeout=5, interval=0.05, what="the dead worker's entry") == [
        f"money policy {LOOSE.digest()} in force"
    ]
    async with agent.worker(policy=changed):  # the deploy's worker takes the task again, and reads anew
        outcome = await asyncio.wait_for(handle.result(), 90)

    assert outcome.status is Status.RESOLVED
    assert outcome.policy == changed.digest()
    trail = agent.store.audit.entries(outcome.ticket_id)
    assert trail[:2] == [f"money policy {LOOSE.digest()} in force", f"money policy {changed.digest()} in force"]
    assert [entry for entry in trail if entry.startswith("money policy")] == trail[:2]
    assert trail[-1] == "closed as resolved after 4 steps; refunded USD 49.00"
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


def test_no_activity_writes_the_policys_entry_or_the_closing_line_and_no_patch_marker_is_recorded() -> None:
    """The build's histories of a refunded ticket, without a person and with one: the only ``audit`` activities are
    the request's and its answer's; the policy's entry and the closing line are local activities' markers, and no
    marker is a patch's. The replay gate holds the code to this shape."""
    think = "think"
    shapes = {
        "resolved_without_approval": [think, "lookup_order", think, "issue_refund", think, "send_email", think],
        "approved_refund": [
            *(think, "lookup_order", think, "lookup_order", "audit", "audit", "issue_refund", think, "send_email"),
            think,
        ],  # the order looked up again before a person is asked (the ledger as it has it now)
    }
    for name, activities in shapes.items():
        events = json.loads((HISTORIES / f"{name}.json").read_text())["events"]
        markers = [
            e["markerRecordedEventAttributes"]["markerName"] for e in events if "markerRecordedEventAttributes" in e
        ]
        scheduled = [
            e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
            for e in events
            if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
        ]
        assert set(markers) == {"core_local_activity"}, name
        assert scheduled == activities, name
