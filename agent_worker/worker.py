"""The worker process: the workflow and its activities on one task queue, stopping politely on a deploy.

A deploy sends SIGTERM. The worker then stops polling for new tasks, lets the activities it is running
finish within a grace period (a model call that finishes is recorded, so the next worker does not pay for
it again), logs why it stopped, and exits. A SIGKILL gets none of that, and is what the activities'
heartbeats and the short sticky-queue timeout are for: the server moves the dead worker's tickets to
another worker within seconds.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import structlog
from temporalio.client import Client
from temporalio.worker import Worker

from activities.business import Business
from activities.contracts.policy import PolicyInForce
from activities.model import LanguageModel
from agent_worker.client import ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.metrics import report_from_visibility
from agent_worker.stopping import stop_signals
from agent_worker.wiring import AgentPlugin

log = structlog.get_logger(__name__)


def build_worker(
    client: Client,
    settings: Settings,
    business: Business | None = None,
    model: LanguageModel | None = None,
    policy: PolicyInForce | None = None,
) -> Worker:
    """The worker for the settings: what it runs comes from ``AgentPlugin`` (the client's, if it was connected
    with one; otherwise one made here, with what the dev stack or a test hands in); what is left here is how it
    polls and how it stops."""
    carried = any(isinstance(plugin, AgentPlugin) for plugin in client.config()["plugins"])
    handed_in = business is not None or model is not None or policy is not None
    return Worker(
        client,
        task_queue=settings.task_queue,
        plugins=[] if carried and not handed_in else [AgentPlugin(settings, business, model, policy)],
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
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
                log.info(
                    "worker started", task_queue=settings.task_queue, namespace=client.namespace,
                    metrics=f"http://{settings.metrics_bind}/metrics" if settings.metrics_bind else None,
                )  # fmt: skip
                reason = await stopping.wait()
                log.info(
                    "worker stopping: no new tasks, in-flight activities get a grace period",
                    reason=reason,
                    grace_seconds=settings.graceful_shutdown_seconds,
                )
        finally:
            gauge.cancel()
    log.info("worker stopped", reason=stopping.reason)
    return stopping.reason
