"""A stuck ticket is told by its real error. When the audit trail's store refuses every write, the ``audit`` activity
fails with the database's error; ``tickets --stuck`` and ``show`` must say that error, not the server's "Failure
exceeds size limit.", which it puts on top of a failure too large to store (a whole SQLAlchemy trace was). The
ticket then recovers by itself once the store takes writes again."""

from __future__ import annotations

import asyncio
import re
import sqlite3

from temporalio.client import Client

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
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
