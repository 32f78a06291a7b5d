"""The worker process: the workflow and its activities on one task queue, stopping politely on a deploy.

``serve`` is the composition root of ``agent-worker worker``: everything the worker runs is built there, once, in
order, from the settings, and each setting reaches the part it configures and goes no further. The dev stack, the
demo, the evals, the benchmarks and the tests build their workers from the same builders (``wiring``'s
``build_activities``, and ``build_worker`` here) with a business and a model of their own.

A deploy sends SIGTERM. The worker then stops polling for new tasks, lets the activities it is running
finish within a grace period (a model call that finishes is recorded, so the next worker does not pay for
it again), logs why it stopped, and exits. A SIGKILL gets none of that, and is what the activities'
heartbeats and the short sticky-queue timeout are for: the server moves the dead worker's tickets to
another worker within seconds.

The worker polls and works, and does nothing an operator's process does for the whole namespace: the search
attributes are registered by ``agent-worker migrate``, and the gauges read from visibility are published by
``agent-worker metrics``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import structlog
from temporalio.client import Client, Plugin
from temporalio.worker import Plugin as WorkerPlugin
from temporalio.worker import Worker, WorkerDeploymentConfig

from activities.business import Business
from activities.language_model import LanguageModel
from agent_worker import wiring
from agent_worker.client import check_search_attributes, connect
from agent_worker.config import Settings
from agent_worker.stopping import stop_signals

log = structlog.get_logger(__name__)


async def serve(
    settings: Settings,
    address: str | None = None,
    namespace: str | None = None,
    *,
    plugins: Sequence[Plugin] = (),
    stop: asyncio.Event | None = None,
) -> str:
    """Everything ``agent-worker worker`` runs, built once, in order, then run until SIGTERM, SIGINT or ``stop``;
    returns why it stopped. Temporal is not connected to before the policy is read (``PolicyRefusedError``), the
    model chosen (``NoCredentialsError``), the business database's schema and the clients' timeouts checked
    (``ClientTimeoutError``); ``plugins`` go on the client (tracing)."""
    from agent_worker.model_choice import choose_model  # noqa: PLC0415 - the model's SDK, for workers alone

    policy = wiring.policy_in_force(settings)  # the desk's file, read once
    business = wiring.business(settings)  # Stripe's client, the mail relay, the database: nothing opened yet
    try:
        model = choose_model(settings, business.model_calls)  # one Anthropic client, or a refusal
        wiring.schema_ready(business.database)
        codec = wiring.codec(settings)  # seals payloads and blobs alike
        blobs = wiring.blob_backend(settings, business.blobs, codec)
        activities = wiring.build_activities(settings, business, model, blobs=blobs, policy=policy)
        deployment = wiring.deployment_config(settings)  # versions the worker and tags its metrics
        runtime = wiring.metrics_runtime(settings.metrics_bind, deployment)
        converter = wiring.converter(codec, wiring.payload_storage(settings))
        client = await connect(settings, address, namespace, runtime, plugins, converter=converter)
        await check_search_attributes(client)
        return await run_worker(build_worker(client, settings, activities, deployment=deployment), stop)
    finally:
        business.close()


def build_worker(
    client: Client,
    settings: Settings,
    activities: Sequence[Callable[..., Any]],
    *,
    deployment: WorkerDeploymentConfig | None = None,
    plugins: Sequence[WorkerPlugin] = (),
) -> Worker:
    """A worker running ``activities`` (``wiring.build_activities``) and the workflow (``AgentWorkerPlugin``), as the
    Worker Deployment version ``deployment`` (None: unversioned), polling as the settings say; it converts payloads
    as its client does (``AgentClientPlugin``). ``plugins`` come after the service's, and see the worker it
    configured."""
    return Worker(
        client,
        task_queue=settings.task_queue,
        plugins=[wiring.AgentWorkerPlugin(activities, deployment), *plugins],
        workflow_runner=wiring.workers_runner(),
        graceful_shutdown_timeout=wiring.grace_period(settings),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_queue_timeout_seconds),
        max_cached_workflows=settings.max_cached_workflows,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
    )


def local_worker(
    client: Client,
    settings: Settings,
    business: Business,
    model: LanguageModel,
    *,
    plugins: Sequence[WorkerPlugin] = (),
) -> Worker:
    """A worker on a ``business`` and a ``model`` of the caller's (the dev stack's demo orders, a test's scratch
    database, the evals' local Messages API), everything else built from the settings as ``serve`` builds it."""
    blobs = wiring.blob_backend(settings, business.blobs, wiring.codec(settings))
    activities = wiring.build_activities(
        settings, business, model, blobs=blobs, policy=wiring.policy_in_force(settings)
    )
    return build_worker(client, settings, activities, deployment=wiring.deployment_config(settings), plugins=plugins)


async def run_worker(worker: Worker, stop: asyncio.Event | None = None) -> str:
    """Run ``worker`` until SIGTERM, SIGINT or ``stop``; return why the worker stopped."""
    config = worker.config(active_config=True)
    grace = config.get("graceful_shutdown_timeout") or timedelta()
    with stop_signals(stop) as stopping:
        async with worker:
            versioned = config.get("deployment_config")
            log.info(
                "worker started",
                task_queue=config["task_queue"],
                namespace=worker.client.namespace,
                deployment_version=versioned.version.to_canonical_string() if versioned else None,
            )
            reason = await stopping.wait()
            log.info(
                "worker stopping: no new tasks, in-flight activities get a grace period",
                reason=reason,
                grace_seconds=grace.total_seconds(),
            )
    log.info("worker stopped", reason=stopping.reason)
    return stopping.reason
