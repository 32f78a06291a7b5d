"""Worker Deployment Versioning from the operator's side: the ``temporal worker deployment`` commands the docs
print, run against a test's server as an operator types them."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from agent_worker.cli.devserver import binary
from tests.support.processes import address
from tests.support.waits import poll


async def temporal(client: Client, *args: str) -> tuple[int, str]:
    """``temporal ARGS`` against ``client``'s server, as an operator types it: its exit code and what it printed."""
    process = await asyncio.create_subprocess_exec(
        binary("temporal"),
        *args,
        "--address",
        address(client),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def deployment(client: Client, *args: str) -> Any:
    """``temporal worker deployment ARGS -o json``, which must succeed; its JSON answer (None for a bare message)."""
    code, out = await temporal(client, "worker", "deployment", *args, "-o", "json")
    assert code == 0, f"temporal worker deployment {' '.join(args)} exited {code}: {out}"
    return json.loads(out) if out.lstrip().startswith("{") else None


async def registered(client: Client, name: str, build: str) -> None:
    """Wait until a worker of ``build`` has polled, so the server knows the version (``set-current-version`` refuses
    a version without pollers)."""

    async def known() -> bool:
        code, out = await temporal(client, "worker", "deployment", "describe", "--name", name, "-o", "json")
        return code == 0 and build in {v["BuildID"] for v in json.loads(out).get("versionSummaries", [])}

    await poll(known, timeout=30, interval=0.5, what=f"version {name}.{build} to be registered")


async def routed_to(client: Client, task_queue: str, build: str) -> None:
    """Wait until ``task_queue`` itself routes to ``build``: ``set-current-version`` answers once the deployment has
    the new routing, and its task queues learn it a moment later. Until then, a run woken on them is not told that
    its target changed."""

    async def there() -> bool:
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        return bool(described.versioning_info.current_deployment_version.build_id == build)

    await poll(there, timeout=30, interval=0.2, what=f"{task_queue} to route to {build}")


DRAINAGE_GRACE = timedelta(seconds=1)
DRAINAGE_CHECKED_EVERY_SECOND = [
    "--dynamic-config-value",
    f'matching.wv.VersionDrainageStatusVisibilityGracePeriod="{DRAINAGE_GRACE.seconds}s"',
    "--dynamic-config-value",
    'matching.wv.VersionDrainageStatusRefreshInterval="1s"',
]
"""Dev-server arguments: the server says a version no longer current is ``drained`` once no pinned run is open on
it, as of a check made a grace period after it stopped being current, and again every refresh interval: 3 min and
3 min by default, one second each here, so a test waits seconds, not minutes."""


@dataclass(frozen=True)
class Drainage:
    """What ``describe-version`` says of a version's drainage: ``status`` is ``draining``, ``drained``, or ``""``
    while the version is current or ramping (or was never either); when it last changed, and was last checked."""

    status: str
    changed: datetime | None
    checked: datetime | None

    def checked_after_grace(self) -> bool:
        """Whether the server has checked the version a grace period after it began draining: a status it reports
        then counts the runs pinned to it."""
        return self.changed is not None and self.checked is not None and self.checked - self.changed > DRAINAGE_GRACE


async def drainage(client: Client, name: str, build: str) -> Drainage:
    """``temporal worker deployment describe-version``'s drainage of ``name``'s ``build``."""
    described = await deployment(client, "describe-version", "--deployment-name", name, "--build-id", build)
    info = described.get("drainageInfo", {})
    moment = {
        key: datetime.fromisoformat(info[key]) if info.get(key) else None
        for key in ("lastChangedTime", "lastCheckedTime")
    }
    return Drainage(str(info.get("drainageStatus", "")), moment["lastChangedTime"], moment["lastCheckedTime"])


async def count(client: Client, query: str) -> int:
    """``temporal workflow count --query QUERY``: how many runs match."""
    code, out = await temporal(client, "workflow", "count", "--query", query, "-o", "json")
    assert code == 0, out
    return int(json.loads(out).get("count", 0))


def running_on(name: str, build: str) -> str:
    """The visibility query of the runs open on a version, as ``docs/rollouts.md`` prints it."""
    return f"TemporalWorkerDeploymentVersion='{name}:{build}' AND ExecutionStatus='Running'"


async def runs(client: Client, workflow_id: str) -> list[tuple[str, ...]]:
    """Each run of a workflow, oldest first, as the builds that completed its workflow tasks, in order, a build
    once for each stretch of tasks it completed in a row. Read from the histories, following each run back to the
    one it continued from: no visibility, so no lag."""
    chain: list[tuple[str, ...]] = []
    run_id: str | None = (await client.get_workflow_handle(workflow_id).describe()).run_id
    while run_id:
        history = [e async for e in client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events()]
        completed = [
            e.workflow_task_completed_event_attributes.deployment_version.build_id
            for e in history
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ]
        chain.append(tuple(build for build, _ in itertools.groupby(completed)))
        run_id = history[0].workflow_execution_started_event_attributes.continued_execution_run_id or None
    return chain[::-1]
