"""The replay gate: every stored history replays on the current code, and a breaking change is caught."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import binary
from agent_worker.cli.replay import HISTORIES, history_files, replay
from tests.support import careless_piece
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, run, spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.variants import (
    ApprovalGateRereadsThePolicy,
    AuditsMore,
    DecidesOnTheWallClock,
    DrawsRandomnessInTheSandbox,
    LooksUpBeforeThinking,
    ReadsTheClockInTheSandbox,
    ReadsTheWorldInAPassedThroughPiece,
)
from tests.support.waits import awaiting, poll

STORED = history_files([HISTORIES])


def test_the_stored_histories_cover_every_path_worth_guarding() -> None:
    names = {path.stem for path in STORED}
    assert {
        "resolved_without_approval",
        "approved_refund",
        "nobody_answered_in_time",
        "wrong_amount_then_right_amount",
        "tool_failure_handed_to_model",
        "crash_with_retried_activity",
        "max_steps_reached",
        "sla_escalation",
    } <= names


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
async def test_every_stored_history_replays_on_the_current_workflow_code(path: Path) -> None:
    (result,) = await replay([path])
    assert result.ok, result.failure


async def test_a_release_that_runs_another_activity_first_is_rejected_on_the_stored_history() -> None:
    (result,) = await replay([HISTORIES / "resolved_without_approval.json"], workflows=[LooksUpBeforeThinking])
    assert not result.ok
    assert "Nondeterminism" in str(result.failure)
    assert "LocalActivity(1)" in str(result.failure)  # what the history did first: read the desk's policy, locally


async def test_a_branch_on_the_wall_clock_takes_the_other_path_on_replay_and_the_replayer_rejects_it() -> None:
    path = HISTORIES / "sla_young_ticket_handled_by_agent.json"
    recorded = json.loads(path.read_text())["events"][0]["eventTime"]
    assert datetime.now(UTC) - datetime.fromisoformat(recorded) > timedelta(seconds=10), "replayed inside the SLA"

    (result,) = await replay([path], workflows=[DecidesOnTheWallClock], runner=UnsandboxedWorkflowRunner())
    assert not result.ok
    assert "Nondeterminism" in str(result.failure)
    assert "LocalActivity(1)" in str(result.failure)  # the history read the policy, where the replay escalated at once


async def test_a_history_whose_first_activity_was_renamed_by_hand_is_rejected(tmp_path: Path) -> None:
    history = json.loads((HISTORIES / "resolved_without_approval.json").read_text())
    first = next(e for e in history["events"] if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED")
    first["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "lookup_order"
    tampered = tmp_path / "renamed.json"
    tampered.write_text(json.dumps(history))

    (result,) = await replay([tampered])
    assert not result.ok
    assert "Nondeterminism" in str(result.failure)


async def test_the_replay_command_prints_a_line_per_file_and_exits_non_zero_on_a_failure(tmp_path: Path) -> None:
    (tmp_path / "not_a_history.json").write_text('{"events": "nope"}')
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "replay",
        str(HISTORIES / "approved_refund.json"),
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    lines = out.decode().splitlines()

    assert process.returncode == 1
    assert lines[0] == f"ok    {HISTORIES / 'approved_refund.json'}"
    assert lines[1].startswith(f"FAIL  {tmp_path / 'not_a_history.json'}: ")
    assert lines[-1] == "1 replayed, 1 failed"


async def test_the_replay_command_replays_every_stored_history_by_default() -> None:
    out = await run(AGENT_WORKER, "replay")
    assert out.splitlines()[-1] == f"{len(STORED)} replayed, 0 failed"


async def test_histories_from_temporal_workflow_show_and_from_history_export_both_replay(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    address = client.service_client.config.target_host
    outcome_handle = None
    async with agent.worker():
        outcome_handle = await agent.start(ticket(approval_limit_cents=10_000))
        await outcome_handle.result()
    shown = await run(
        binary("temporal"),
        "--address",
        address,
        "workflow",
        "show",
        "--workflow-id",
        outcome_handle.id,
        "--output",
        "json",
    )
    (tmp_path / "shown.json").write_text(shown)
    await run(
        AGENT_WORKER,
        "history",
        "export",
        "--address",
        address,
        "--workflow-id",
        outcome_handle.id,
        "--out",
        str(tmp_path / "exported.json"),
    )

    results = await replay([tmp_path])
    assert [(r.path.name, r.ok) for r in results] == [("exported.json", True), ("shown.json", True)]


@pytest.mark.parametrize(
    ("variant", "refused"),
    [(ReadsTheClockInTheSandbox, "datetime.datetime.now"), (DrawsRandomnessInTheSandbox, "random.random")],
    ids=["wall clock", "randomness"],
)
async def test_the_sandbox_stops_the_module_it_sandboxes_from_reading_the_clock_or_drawing_randomness(
    agent: Harness, variant: type, refused: str
) -> None:
    """The Python counterpart of the seed's puzzle: where a PHP worker took the other branch silently,
    the sandbox fails the workflow task, visibly, before anything is decided. In the workflow's own module only:
    see the next test."""
    async with Worker(agent.client, task_queue=agent.task_queue, workflows=[variant], activities=agent.activities()):
        handle = await agent.start(ticket())
        failed = await poll(
            lambda: events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED),
            timeout=20,
            what="the workflow task to fail",
        )
        await handle.terminate("negative control done")

    message = failed[0].workflow_task_failed_event_attributes.failure.message
    assert "Cannot access" in message
    assert refused in message
    assert await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == []
    assert agent.store.payments.refunds() == []


async def test_the_sandbox_lets_a_passed_through_piece_read_the_clock_randomness_and_the_environment(
    agent: Harness,
) -> None:
    """The limit of the check above, on this SDK: support_agent.py imports every piece passed through, and a piece
    reads the machine's clock, randomness and the environment unseen, the ticket going on to pay. What refuses
    such a change is the lint (``workflows/ruff.toml``, shown in ``tests/test_determinism.py``). Should a later
    SDK restrict passed-through modules, this fails, and the docs saying what guards what must change with it."""
    before = len(careless_piece.READ)
    async with Worker(
        agent.client,
        task_queue=agent.task_queue,
        workflows=[ReadsTheWorldInAPassedThroughPiece],
        activities=agent.activities(),
    ):
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        outcome = await handle.result()

    assert outcome.status is Status.RESOLVED
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    clock, seconds, draw, drawn_id, path = careless_piece.READ[before : before + 5]
    assert isinstance(clock, datetime)
    assert isinstance(seconds, float)
    assert isinstance(draw, float)
    assert isinstance(drawn_id, UUID)
    assert path
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


IN_FORCE = f"money policy {LOOSE.digest()} in force"
"""The first entry of every ticket's trail: the policy that judges it (the tests' loose desk)."""


def refund_key(ticket_id: str) -> str:
    """The key a ticket's first refund of A-1001 is paid under (``workflows.payouts``)."""
    return f"refund:ticket:{ticket_id}/A-1001/1"


def emailed(ticket_id: str, step: int = 3) -> str:
    """The entry the outbox writes for the scripted model's email after a refund of 49.00 (``record_email``)."""
    key = f"email:ticket:{ticket_id}/{step}/0"
    return f'email #1 to ann@example.com, "Your refund for A-1001", sent under key {key}'


async def test_a_ticket_older_than_its_sla_goes_to_a_person_and_the_model_is_not_asked(agent: Harness) -> None:
    opened = datetime.now(UTC) - timedelta(days=2)
    outcome = await agent.run({**ticket(sla_seconds=86_400), "opened_at": opened.isoformat()})

    assert outcome.status is Status.ESCALATED
    assert outcome.model_calls == 0
    assert agent.store.model_calls.of(outcome.ticket_id) == []
    (policy, entry) = agent.store.audit.entries(outcome.ticket_id)
    assert policy == IN_FORCE
    assert entry.startswith("escalated to a person: opened 2 days")


async def test_a_ticket_inside_its_sla_goes_to_the_agent(agent: Harness) -> None:
    opened = datetime.now(UTC) - timedelta(hours=1)
    outcome = await agent.run({**ticket(approval_limit_cents=10_000), "opened_at": opened.isoformat()})
    assert outcome.status is Status.RESOLVED
    assert outcome.model_calls == 4
    assert agent.store.audit.entries(outcome.ticket_id) == [
        IN_FORCE,
        f"refund #1 of USD 49.00 on order A-1001 made under key {refund_key(outcome.ticket_id)}",  # by the booking
        emailed(outcome.ticket_id),  # by the outbox, as it records the email
        "closed as resolved after 4 steps; refunded USD 49.00",
    ]


@pytest.mark.slow
async def test_an_audit_written_through_an_activity_is_written_once_when_a_new_worker_replays_the_ticket(
    agent: Harness, client: Client
) -> None:
    worker = await spawn_worker(agent.worker_env())
    handle = await agent.start(ticket())
    try:
        await awaiting(handle, 4900)

        async def audited() -> bool:
            return bool(agent.store.audit.entries())

        await poll(audited, timeout=20, interval=0.05, what="the audit entry")
    finally:
        worker.send_signal(signal.SIGKILL)
        await worker.wait()

    async with agent.worker():
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()

    (policy, waits, approved, paid, mailed, closed) = agent.store.audit.entries(outcome.ticket_id)
    assert policy == IN_FORCE
    assert waits.startswith("refund of USD 49.00 waits for approval (request R1, answer by ")
    assert (approved, paid, mailed, closed) == (
        "request R1: refund of USD 49.00 approved by ann",
        f"refund #1 of USD 49.00 on order A-1001 made under key {refund_key(outcome.ticket_id)}",
        emailed(outcome.ticket_id),
        "closed as resolved after 4 steps; refunded USD 49.00",
    )
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_code_that_writes_one_more_audit_entry_fails_the_gate_until_its_histories_are_recorded_anew() -> None:
    history = HISTORIES / "approved_refund.json"
    (changed,) = await replay([history], workflows=[AuditsMore])
    assert not changed.ok
    assert "Nondeterminism" in str(changed.failure)
    assert all(r.ok for r in await replay([history]))


async def test_lookups_of_one_response_run_in_one_workflow_task_and_of_two_responses_in_two() -> None:
    """Read-only calls the model asks for at once run at once: the same activities as one by one, in fewer
    workflow tasks."""
    old, new = HISTORIES / "two_lookups_one_by_one.json", HISTORIES / "two_lookups_at_once.json"
    assert _lookups_per_workflow_task(old) == [1, 1]
    assert _lookups_per_workflow_task(new) == [2]
    assert all(r.ok for r in await replay([old, new]))


def _lookups_per_workflow_task(path: Path) -> list[int]:
    counts: dict[str, int] = {}
    for event in json.loads(path.read_text())["events"]:
        attributes = event.get("activityTaskScheduledEventAttributes")
        if attributes and attributes["activityType"]["name"] == "lookup_order":
            task = attributes["workflowTaskCompletedEventId"]
            counts[task] = counts.get(task, 0) + 1
    return list(counts.values())


def patches(path: Path) -> set[str]:
    """The patch ids a history's markers record (they are base64 inside the JSON, not plain text)."""
    found = set()
    for event in json.loads(path.read_text())["events"]:
        marker = event.get("markerRecordedEventAttributes", {})
        if marker.get("markerName") == "core_patch":  # not a local activity's result, which is a marker too
            for payload in marker["details"]["patch-data"]["payloads"]:
                found.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return found


async def test_code_that_changes_what_a_waiting_refund_does_fails_the_gate_on_the_histories_that_waited() -> None:
    history = HISTORIES / "approval_answered_twice_the_first_decides.json"
    (changed,) = await replay([history], workflows=[ApprovalGateRereadsThePolicy])
    assert not changed.ok
    assert "Nondeterminism" in str(changed.failure)
    assert "UpsertWorkflowSearchAttributes" in str(changed.failure)  # where the history made the request visible
    assert all(r.ok for r in await replay([history]))


def test_the_builds_own_histories_hold_no_patch_marker_and_no_change_version_upsert() -> None:
    """The gate's histories are this build's, recorded on its one path: none asked ``workflow.patched``, so none
    holds a patch marker, nor the ``TemporalChangeVersion`` search attribute sdk-core upserts beside one. The
    1.x histories (``tests/handed_over/gate-1.x/``) hold them, which is what this would find."""
    for path in STORED:
        assert patches(path) == set(), path.name
        assert not change_version_upserts(path), path.name
    older = Path("tests/handed_over/gate-1.x/approved_refund.json")  # 1.0.0: no marker either
    marked = Path("tests/handed_over/gate-1.x/policy_read_locally_approved.json")
    assert patches(older) == set()
    assert patches(marked) == {"1.1.0/policy-local-activity"}
    assert change_version_upserts(marked)


def change_version_upserts(path: Path) -> list[dict[str, object]]:
    """The upserts of ``TemporalChangeVersion`` a history holds: sdk-core's, beside each patch marker."""
    found = []
    for event in json.loads(path.read_text())["events"]:
        upsert = event.get("upsertWorkflowSearchAttributesEventAttributes")
        if upsert and "TemporalChangeVersion" in upsert.get("searchAttributes", {}).get("indexedFields", {}):
            found.append(upsert)
    return found


def test_the_inbox_update_refused_by_its_validator_never_reached_the_history() -> None:
    """The refused answer is not in the history; the forged and the signed ones are."""
    inbox = json.loads((HISTORIES / "approved_in_the_inbox.json").read_text())["events"]
    assert [e["eventType"] for e in inbox].count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == 2
