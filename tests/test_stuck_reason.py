"""A stuck ticket is told by its real error. When the audit trail's store refuses every write, the ``audit`` activity
fails with the database's error; ``tickets --stuck`` and ``show`` must say that error, not the server's "Failure
exceeds size limit.", which it puts on top of a failure too large to store (a whole SQLAlchemy trace was). The
ticket then recovers by itself once the store takes writes again."""

from __future__ import annotations

import asyncio
import re
import sqlite3

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent, WorkflowTaskFailedEventAttributes
from temporalio.client import Client

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker import wiring
from agent_worker.stuck import another_build
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, poll

REFUSAL = "the audit table refuses writes"
SERVERS_WORDS = "Failure exceeds size limit"


def refuse_audit_writes(agent: Harness, *, refuse: bool) -> None:
    """Make the business database's audit table refuse (or take again) every write, as a store gone read-only
    would: a trigger that aborts each insert with ``REFUSAL``."""
    with sqlite3.connect(agent.store.database.path) as db:
        if refuse:
            db.execute(
                f"CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
            )
        else:
            db.execute("DROP TRIGGER refuse_audit")


async def test_a_ticket_stuck_on_an_audit_store_that_refuses_writes_is_told_by_the_stores_error(
    agent: Harness, client: Client
) -> None:
    cli = ["--address", address(client)]
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        refuse_audit_writes(agent, refuse=True)
        await handle.signal(APPROVE_SIGNAL, answer(4900))  # its answer is written to the trail, and fails

        async def listed() -> str | None:
            said = await run(AGENT_WORKER, "tickets", "--stuck", *cli)
            return said if handle.id in said else None

        listing = await poll(listed, timeout=90, interval=1, what="tickets --stuck to list the ticket")
        shown = await run(AGENT_WORKER, "show", handle.id, *cli)
        pending = (await handle.describe()).raw_description.pending_activities
        kept = [a.last_failure for a in pending if a.activity_type.name == "audit" and a.HasField("last_failure")]
        refuse_audit_writes(agent, refuse=False)
        outcome = await asyncio.wait_for(handle.result(), 120)

    (line,) = [line for line in listing.splitlines() if line.startswith(handle.id)]
    assert "activity audit: " in line
    assert REFUSAL in line, line
    assert SERVERS_WORDS not in line
    stuck = re.search(r"\nstuck: its activity audit, retried until it succeeds, failed \d+ times .*\n", shown)
    assert stuck is not None, shown
    assert REFUSAL in stuck[0]
    assert SERVERS_WORDS not in stuck[0]
    (failure,) = kept  # what the server kept of the last attempt: the error itself, small enough to store
    assert not failure.HasField("server_failure_info"), failure.message
    assert (failure.application_failure_info.type, failure.HasField("cause")) == ("IntegrityError", False)
    assert REFUSAL in failure.message
    assert len(failure.SerializeToString()) < 4_000
    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


def _failed(cause: WorkflowTaskFailedCause.ValueType) -> HistoryEvent:
    return HistoryEvent(
        event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        workflow_task_failed_event_attributes=WorkflowTaskFailedEventAttributes(cause=cause),
    )


def test_a_history_another_release_wrote_is_named_with_what_to_do_and_nothing_else_is() -> None:
    """Only where the writers' default build ids name another release than this program's (1.x's name none) does
    the stuck line say which build must take the ticket on: the failed event names no build, so a history this
    release wrote, or one of builds named by hand, is told as what it is, a failure."""
    nondeterministic = _failed(WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR)
    ours = wiring.build_id()
    said = another_build(nondeterministic, ["agent-worker-0c350755b036c6f68b85"])
    assert said is not None
    assert said.startswith("written by agent-worker-0c350755b036c6f68b85, of another release")
    assert "keep a worker of agent-worker-0c350755b036c6f68b85 on this task queue" in said
    assert another_build(nondeterministic, ["agent-worker-1.9.0-0c350755b036c6f68b85"]) is not None
    assert another_build(nondeterministic, [ours]) is None, "this release's own: a determinism bug, not a release"
    assert another_build(nondeterministic, ["agent-worker-0c350755b036c6f68b85", ours]) is None
    assert another_build(nondeterministic, ["1.5.0"]) is None, "a build named by hand says nothing of its release"
    assert another_build(nondeterministic, []) is None
    other = _failed(WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE)
    assert another_build(other, ["agent-worker-0c350755b036c6f68b85"]) is None
    assert another_build(None, ["agent-worker-0c350755b036c6f68b85"]) is None
