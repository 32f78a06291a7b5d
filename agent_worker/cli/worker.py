"""The worker process: the workflow and its activities on one task queue, stopping politely on a deploy.

A deploy sends SIGTERM. The worker then stops polling for new tasks, lets the activities it is running
finish within a grace period (a model call that finishes is recorded, so the next worker does not pay for
it again), logs why it stopped, and exits. A SIGKILL gets none of that, and is what the activities'
heartbeats and the short sticky-queue timeout are for: the server moves the dead worker's tickets to
another worker within seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

import structlog
from temporalio.client import Client
from temporalio.worker import Plugin, Worker

from activities.business import Business
from activities.contracts.policy import PolicyInForce
from activities.language_model import LanguageModel
from agent_worker.cli.metrics import report_from_visibility
from agent_worker.client import ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.stopping import stop_signals
from agent_worker.wiring import AgentWorkerPlugin, grace_period, worker_parts, workers_runner

log = structlog.get_logger(__name__)


def build_worker(  # noqa: PLR0913 - what the dev stack or a test hands in, each optional
    client: Client,
    settings: Settings,
    business: Business | None = None,
    model: LanguageModel | None = None,
    policy: PolicyInForce | None = None,
    *,
    plugins: Sequence[Plugin] = (),
) -> Worker:
    """The worker for the settings: its parts, built once from them, come from the wiring (``wiring.worker_parts``,
    with what the dev stack or a test hands in, applied by ``AgentWorkerPlugin``; it refuses a client timeout that
    would outlive its activity's attempt), how it converts payloads from its client (``AgentClientPlugin``); what
    is left here is how it polls. ``plugins`` come after the service's, and see the worker it configured."""
    parts = worker_parts(settings, business, model, policy)
    return Worker(
        client,
        task_queue=settings.task_queue,
        plugins=[AgentWorkerPlugin(parts), *plugins],
        workflow_runner=workers_runner(),
        graceful_shutdown_timeout=parts.grace,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_queue_timeout_seconds),
        max_cached_workflows=settings.max_cached_workflows,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
    )


async def run_worker(
    client: Client, settings: Settings, stop: asyncio.Event | None = None, *, worker: Worker | None = None
) -> str:
    """Run ``worker`` (by default ``build_worker(client, settings)``) until SIGTERM, SIGINT or ``stop``; return why
    the worker stopped."""
    await ensure_search_attributes(client)
    worker = worker or build_worker(client, settings)
    with stop_signals(stop) as stopping:
        gauge = asyncio.create_task(report_from_visibility(client))
        try:
            async with worker:
                versioned = worker.config(active_config=True).get("deployment_config")
                log.info(
                    "worker started",
                    task_queue=settings.task_queue,
                    namespace=client.namespace,
                    metrics=f"http://{settings.metrics_bind}/metrics" if settings.metrics_bind else None,
                    deployment_version=versioned.version.to_canonical_string() if versioned else None,
                )
                reason = await stopping.wait()
                log.info(
                    "worker stopping: no new tasks, in-flight activities get a grace period",
                    reason=reason,
                    grace_seconds=grace_period(settings).total_seconds(),
                )
        finally:
            gauge.cancel()
    log.info("worker stopped", reason=stopping.reason)
    return stopping.reason
