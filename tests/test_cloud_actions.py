"""What a ticket costs on Temporal Cloud, counted from its history by Temporal's published rules for Actions
(``tests/support/actions.py``, which ``bench.peers`` reports per ticket): recorded tickets counted by hand event by
event, and a Signal-With-Start read back from a real server."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from tests.support.actions import billable_actions

HISTORIES = Path(__file__).resolve().parents[1] / "replay_histories"
EARLIER = Path(__file__).resolve().parent / "handed_over" / "gate-1.x"
"""Histories the 1.x releases recorded: the only ones with a patch marker and its upsert."""


def recorded(name: str, folder: Path = HISTORIES) -> WorkflowHistory:
    return WorkflowHistory.from_json(name, (folder / f"{name}.json").read_text())


def test_local_activities_of_one_workflow_task_are_one_action() -> None:
    """resolved_without_approval: its start; 7 activities scheduled, none retried; a local activity in two workflow
    tasks (the policy's read as the run starts, the closing line as it closes). 1 + 7 + 2 = 10."""
    assert billable_actions(recorded("resolved_without_approval").events) == {
        "Start Workflow": 1,
        "Schedule Activity": 7,
        "Record Activity Markers": 2,
    }


def test_a_patch_marker_beside_a_local_activity_and_its_upsert_are_no_action_of_their_own() -> None:
    """1.1.0's policy_read_locally_resolved: its start; 9 activities scheduled, none retried; markers in two workflow
    tasks (task 4: a patch and the policy's local activity; task 31: a local activity); one upsert, of
    TemporalChangeVersion only. 1 + 9 + 2 = 12."""
    assert billable_actions(recorded("policy_read_locally_resolved", EARLIER).events) == {
        "Start Workflow": 1,
        "Schedule Activity": 9,
        "Record Activity Markers": 2,
    }


def test_a_signal_a_timer_and_each_search_attribute_upsert_are_an_action_and_a_memo_change_is_none() -> None:
    """approved_refund: its start; 10 activities scheduled, none retried; local activities in three workflow tasks
    (the policy read as the run starts and again before the request is opened, the closing line); the approval
    wait's timer (the answer came once the run waited); the approve signal; two upserts of AwaitingApprovalCents
    (each with a memo change, which the page does not bill, as is the memo of the settlement).
    1 + 10 + 3 + 1 + 1 + 2 = 18."""
    assert billable_actions(recorded("approved_refund").events) == {
        "Start Workflow": 1,
        "Schedule Activity": 10,
        "Record Activity Markers": 3,
        "Start Timer": 1,
        "Signal Workflow": 1,
        "Upsert Workflow Search Attributes": 2,
    }


def test_every_retry_of_an_activity_is_an_action_of_its_own() -> None:
    """refund_timed_out_reconciled: its start; 8 activities scheduled, issue_refund's last start at attempt 5 (4
    retries); local activities in workflow tasks 4 and 53. 1 + 8 + 4 + 2 = 15."""
    assert billable_actions(recorded("refund_timed_out_reconciled").events) == {
        "Start Workflow": 1,
        "Schedule Activity": 8,
        "Retry Activity": 4,
        "Record Activity Markers": 2,
    }


def test_a_run_continued_as_new_is_billed_one_start_per_run() -> None:
    """The first run's Continue-As-New event is not counted again: the new run's start is the Action."""
    first = billable_actions(recorded("continued_as_new_while_awaiting_approval_first_run").events)
    second = billable_actions(recorded("continued_as_new_while_awaiting_approval").events)
    assert first["Start Workflow"] == second["Start Workflow"] == 1


async def actions_of_a_start_and_a_signal(client: Client, *, signal_with_start: bool) -> Counter[str]:
    """A workflow started and signalled "nudge", in one call or two, on a task queue nothing polls: its history
    holds only what the server wrote for the client's calls."""
    workflow_id = f"actions-{uuid.uuid4()}"
    handle = await client.start_workflow(
        "NoWorkerRunsThis", id=workflow_id, task_queue=workflow_id, start_signal="nudge" if signal_with_start else None
    )
    try:
        if not signal_with_start:
            await handle.signal("nudge")
        events = [e async for e in handle.fetch_history_events()]
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in [e.event_type for e in events]
        return billable_actions(events)
    finally:
        await handle.terminate()


async def test_a_signal_with_start_is_one_action(client: Client) -> None:
    assert await actions_of_a_start_and_a_signal(client, signal_with_start=True) == {"Start Workflow": 1}


async def test_a_start_then_a_signal_are_two_actions(client: Client) -> None:
    assert await actions_of_a_start_and_a_signal(client, signal_with_start=False) == {
        "Start Workflow": 1,
        "Signal Workflow": 1,
    }
