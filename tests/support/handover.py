"""A ticket handed over by a newer worker: the run a rolling deploy can leave behind, whose workflow task fails
every time on an older worker. Tests of stuck tickets, alerts and the inbox make one."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio import workflow
from temporalio.client import Client

from activities.contracts.names import WORKFLOW_NAME
from tests.support.tickets import Handle, ticket

RELAY = f"relay-{uuid.uuid4()}"
"""The task queue of the relay worker that runs ``NewerWorkerHandsOver`` for ``hand_over_unreadable_state``."""
NEWER_STATE = {"steps_taken": 2, "written_by_a_newer_worker": True}
"""Continued state with a field this worker does not know."""


@workflow.defn(name="NewerWorkerHandsOver", sandboxed=False)
class NewerWorkerHandsOver:
    """Stands for a newer worker's run of a ticket: it continues as new into ``SupportAgent`` with state an
    older worker cannot read, as a rolling deploy can make happen."""

    @workflow.run
    async def run(self, task_queue: str, raw_ticket: Any, state: Any) -> None:
        workflow.continue_as_new(args=[raw_ticket, state], workflow=WORKFLOW_NAME, task_queue=task_queue)


async def hand_over_unreadable_state(client: Client, task_queue: str) -> Handle:
    """A ticket whose previous run was a newer worker's: it continues into ``SupportAgent`` on ``task_queue``
    with state this worker cannot read, so its workflow task fails every time (a relay worker must run)."""
    first = await client.start_workflow(
        "NewerWorkerHandsOver",
        args=[task_queue, ticket(), NEWER_STATE],
        id=f"ticket-{uuid.uuid4()}",
        task_queue=RELAY,
    )
    return client.get_workflow_handle(first.id)
