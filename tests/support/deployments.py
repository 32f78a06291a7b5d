"""Worker Deployment Versioning from the operator's side: the ``temporal worker deployment`` commands the docs
print, run against a test's server as an operator types them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
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
