"""What 2.0's tickets will stand on, shown on this machine's server (the CLI's dev server, 1.32.0): a run pinned to
the build that started it hears that the deployment's target has moved when it next wakes, and moves to the new
build by continuing as new, but only when it asks to (``initial_versioning_behavior=AUTO_UPGRADE``); continued
without asking, the new run inherits the old pin. A run never woken stays where it is.

The workflow is the smallest that does it (``tests/support/upgrading.py``); the workers are two builds of one Worker
Deployment whose runs are pinned by the worker's default behaviour, and the operator's steps are the ``temporal
worker deployment`` commands ``docs/rollouts.md`` prints."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerDeploymentConfig

from agent_worker.cli.devserver import start_dev_server
from tests.support.deployments import deployment, registered, routed_to
from tests.support.upgrading import Seen, UpgradesOnContinue

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None)
    yield env
    await env.shutdown()


def build(client: Client, queue: str, name: str, build_id: str) -> Worker:
    """A worker of build ``build_id`` of deployment ``name``, whose runs are pinned to it unless they move."""
    return Worker(
        client,
        task_queue=queue,
        workflows=[UpgradesOnContinue],
        deployment_config=WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(name, build_id),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        ),
    )


@pytest.mark.parametrize(("move", "second_run_on"), [(True, "b2"), (False, "b1")], ids=["asks to move", "does not"])
async def test_a_pinned_run_moves_to_the_new_build_at_continue_as_new_only_when_it_asks_to(
    server: WorkflowEnvironment,
    move: bool,  # noqa: FBT001 - a parameter of the test
    second_run_on: str,
) -> None:
    client = server.client
    name, queue = f"upgrade-{uuid.uuid4().hex[:8]}", f"upgrade-{uuid.uuid4().hex[:8]}"
    async with build(client, queue, name, "b1"):
        await registered(client, name, "b1")
        await deployment(client, "set-current-version", "--deployment-name", name, "--build-id", "b1", "--yes")
        handle = await client.start_workflow(UpgradesOnContinue.run, move, id=f"wf-{name}", task_queue=queue)
        unwoken = await client.start_workflow(UpgradesOnContinue.run, move, id=f"idle-{name}", task_queue=queue)
        async with build(client, queue, name, "b2"):
            await registered(client, name, "b2")
            await deployment(client, "set-current-version", "--deployment-name", name, "--build-id", "b2", "--yes")
            await routed_to(client, queue, "b2")
            await handle.signal(UpgradesOnContinue.wake)
            seen = await handle.result()

            assert seen[0] == Seen("b1", target_changed=True, run=1)  # pinned, and told at its next task
            assert (seen[1].build, seen[1].run) == (second_run_on, 2)
            described = await client.get_workflow_handle(unwoken.id).describe()
            assert described.raw_description.workflow_execution_info.versioning_info.deployment_version.build_id == "b1"
            await unwoken.terminate("a run never woken stays on its build: shown")
