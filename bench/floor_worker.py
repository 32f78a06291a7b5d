"""The floor's worker (``bench/floor.py``): a workflow of as many empty activities as a ticket runs, in a process of
its own, on the SDK, data converter and worker settings a ticket's worker uses, and nothing of this project's.

Two workflow types: one in Temporal's sandbox, as ``SupportAgent`` runs, and one outside it, so the sandbox's share
of the floor shows. Imported from this module, never run as ``__main__``, so the sandbox imports it again for every
run, as it does ``workflows.support_agent``; it imports only the SDK and the standard library.
"""

from __future__ import annotations

import os
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

TASK_QUEUE = "FLOOR_TASK_QUEUE"
"""The environment variable naming the task queue the worker polls."""


@activity.defn(name="floor_empty")
async def empty() -> None:
    """Nothing: what is left of an activity's cost is the SDK's and the server's."""


@workflow.defn(name="FloorSandboxed")
class Sandboxed:
    @workflow.run
    async def run(self, count: int) -> None:
        for _ in range(count):
            await workflow.execute_activity(empty, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn(name="FloorUnsandboxed", sandboxed=False)
class Unsandboxed:
    @workflow.run
    async def run(self, count: int) -> None:
        for _ in range(count):
            await workflow.execute_activity(empty, start_to_close_timeout=timedelta(seconds=10))


async def main() -> None:
    """Poll until killed, with the converter ``agent_worker.config.DATA_CONVERTER`` is (pydantic's, no codec) and
    the cache, task slots and sticky timeout of ``agent_worker.config.Settings``' defaults."""
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], data_converter=pydantic_data_converter)
    worker = Worker(
        client,
        task_queue=os.environ[TASK_QUEUE],
        workflows=[Sandboxed, Unsandboxed],
        activities=[empty],
        max_cached_workflows=300,
        max_concurrent_workflow_tasks=20,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
    )
    await worker.run()
