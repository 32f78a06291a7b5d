"""``agent-worker rollout move --from BUILD``: wake the tickets still on a build, so each moves to its new target.

Under Worker Deployment Versioning a ticket is pinned to the build that started it, and moves to the build its
deployment now routes it to only by continuing as new while it waits (``workflows.handing_over``). A ticket waiting
weeks for a person hears of a new current build only when something wakes it, so an old build would stay up until
its last waiting ticket closed. This command lists, from visibility, the running tickets of the build, waits until
the task queue routes them elsewhere (``set-current-version`` answers before the queue learns, and a ticket woken
before then is not told its target changed), and sends each the ``wake`` signal: a waiting ticket continues as new on
its target, a ticket mid-turn finishes the turn where it is and moves at its next wait. ``docs/rollouts.md`` says how
to know the build has drained.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, DescribeWorkerDeploymentRequest
from temporalio.client import Client

from agent_worker import tickets
from agent_worker.cli.commands import settings
from agent_worker.cli.operations import operator_command
from agent_worker.config import Settings
from agent_worker.transcript.terminal import say

ROUTING_WAIT_SECONDS = 60.0
"""How long ``move`` waits for the task queue to learn the deployment's routing before it gives up (exit 1)."""
WAKING_AT_ONCE = 16
"""Signals in flight at once: a build with thousands of waiting tickets is woken in seconds, without a burst the
frontend's rate limit would refuse."""


@dataclass(frozen=True)
class Routing:
    """Where a deployment sends tickets: its current build (None: unversioned workers), and a ramp, if any."""

    current: str | None
    ramping: str | None = None
    percentage: float = 0.0

    @classmethod
    def of(cls, current: str, ramping: str, percentage: float) -> Routing:
        """From the server's fields, where "" is none; a ramp at 0% is none (``set-ramping-version --delete``
        leaves the build named at 0%, and it routes nothing)."""
        if not ramping or percentage <= 0:
            return cls(current or None)
        return cls(current or None, ramping, percentage)

    def __str__(self) -> str:
        current = self.current or "unversioned workers"
        return f"{current}, {self.percentage:g}% to {self.ramping}" if self.ramping else current

    def keeps(self, build: str) -> bool:
        """Whether every ticket's target is still ``build``: it is current, with no ramp away from it."""
        return self.current == build and self.ramping is None


def move(args: argparse.Namespace) -> int:
    """``rollout move --from BUILD [--deployment NAME]``: wake the running tickets pinned to ``BUILD``."""
    args.deployment = args.deployment or settings().versioning.deployment
    if not args.deployment:
        print("rollout move needs the deployment: --deployment NAME, or AGENT_DEPLOYMENT", file=sys.stderr)
        return 2
    if quoted := [value for value in (args.deployment, args.from_build) if "'" in value or not value.strip()]:
        print(f"not a deployment or build id: {quoted[0]!r}", file=sys.stderr)  # it goes into a visibility query
        return 2
    return _move(args)


@operator_command
async def _move(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    name, build = args.deployment, args.from_build
    wanted = await deployment_routing(client, name)
    if wanted.keeps(build):
        print(
            f"{name}.{build} is still where {name} routes every ticket: make another build current first "
            f"(temporal worker deployment set-current-version --deployment-name {name} --build-id NEW)",
            file=sys.stderr,
        )
        return 1
    if not await routed(client, settings.task_queue, wanted):
        print(
            f"task queue {settings.task_queue} did not learn {name}'s routing ({wanted}) within "
            f"{ROUTING_WAIT_SECONDS:g} s: is a worker of the new build polling it? Nothing was woken.",
            file=sys.stderr,
        )
        return 1
    query = f"{tickets.RUNNING_QUERY} AND TemporalWorkerDeploymentVersion = '{name}:{build}'"
    woken, closed = await wake_all(client, [run.workflow_id async for run in tickets.listed(client, query)])
    gone = f" ({closed} closed meanwhile)" if closed else ""
    say(f"woke {woken} tickets on {name}.{build}{gone}; {name} routes to {wanted}")
    say("each waiting ticket moves now; one mid-turn finishes its turn on its build and moves at its next wait")
    return 0


async def deployment_routing(client: Client, name: str) -> Routing:
    """The deployment's routing, as ``temporal worker deployment describe`` shows it."""
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name)
    )
    config = described.worker_deployment_info.routing_config
    return Routing.of(
        config.current_deployment_version.build_id,
        config.ramping_deployment_version.build_id,
        config.ramping_version_percentage,
    )


async def queue_routing(client: Client, task_queue: str) -> Routing:
    """The routing ``task_queue`` has learned: a woken ticket is told its target by this, not the deployment's."""
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    info = described.versioning_info
    return Routing.of(
        info.current_deployment_version.build_id,
        info.ramping_deployment_version.build_id,
        info.ramping_version_percentage,
    )


async def routed(client: Client, task_queue: str, wanted: Routing) -> bool:
    """Wait until ``task_queue`` routes as ``wanted`` (False after ``ROUTING_WAIT_SECONDS``)."""
    deadline = asyncio.get_running_loop().time() + ROUTING_WAIT_SECONDS
    while await queue_routing(client, task_queue) != wanted:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.5)
    return True


async def wake_all(client: Client, workflow_ids: list[str]) -> tuple[int, int]:
    """Send each ticket the ``wake`` signal, ``WAKING_AT_ONCE`` at a time: how many were woken, and how many had
    closed since they were listed (not an error: a closed ticket holds no build)."""
    room = asyncio.Semaphore(WAKING_AT_ONCE)

    async def wake(workflow_id: str) -> bool:
        async with room:
            return await tickets.wake(client, workflow_id)

    woken = await asyncio.gather(*(wake(workflow_id) for workflow_id in workflow_ids))
    return sum(woken), len(woken) - sum(woken)
