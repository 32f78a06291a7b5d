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
from activities.tools import ISSUE_REFUND, LOOKUP_ORDER, SEND_EMAIL
from agent_worker.cli.metrics import report_from_visibility
from agent_worker.client import ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.stopping import stop_signals
from agent_worker.wiring import AgentWorkerPlugin
from workflows import timeouts

log = structlog.get_logger(__name__)


class ClientTimeoutError(SystemExit):
    """A client's timeout at or above the attempt of the activity it runs in: the worker does not start, and says
    which (a ``SystemExit``, so every entry point stops with the sentence, as ``connect`` refuses)."""


def check_client_timeouts(settings: Settings) -> None:
    """Every outside system's client gives up before the attempt of each activity it runs in: a slow answer then
    ends the attempt with a retryable error the activity reports, not an attempt Temporal gave up on while the call
    went on (a refund or an email that may still land). Every client is checked, in use or not, as any setting is;
    ``ClientTimeoutError`` names the setting, its value, the activity and its attempt."""
    refund = ISSUE_REFUND.payout
    assert refund is not None, "a paying tool declares the activity that settles it"
    stripe = (LOOKUP_ORDER.name, ISSUE_REFUND.name, refund.settled_by)  # every activity that calls Stripe
    clients = (
        ("AGENT_ANTHROPIC_TIMEOUT_SECONDS", settings.claude.timeout_seconds, ("think", "summarize")),
        ("AGENT_STRIPE_TIMEOUT_SECONDS", settings.stripe.timeout_seconds, stripe),
        ("AGENT_SMTP_TIMEOUT_SECONDS", settings.smtp.timeout_seconds, (SEND_EMAIL.name,)),
    )
    for name, seconds, activities in clients:
        for activity in activities:
            attempt = timeouts.attempt(activity).get("start_to_close_timeout") or timeouts.LONGEST_ATTEMPT
            if seconds >= attempt.total_seconds():
                raise ClientTimeoutError(
                    f"agent-worker cannot start: {name}={seconds:g} is not below the {activity} activity's attempt "
                    f"(start_to_close_timeout {attempt.total_seconds():g} s): a call that slow would outlive the "
                    "attempt it runs in"
                )


def grace_period(settings: Settings) -> timedelta:
    """How long a worker told to stop gives its activities in flight: ``AGENT_GRACEFUL_SHUTDOWN_SECONDS`` if set, else
    the longest attempt of any activity, so that a deploy never cuts a call short that the next worker would then
    make, and pay for, again."""
    if settings.graceful_shutdown_seconds is not None:
        return timedelta(seconds=settings.graceful_shutdown_seconds)
    return timeouts.LONGEST_ATTEMPT


def build_worker(  # noqa: PLR0913 - what the dev stack or a test hands in, each optional
    client: Client,
    settings: Settings,
    business: Business | None = None,
    model: LanguageModel | None = None,
    policy: PolicyInForce | None = None,
    *,
    plugins: Sequence[Plugin] = (),
) -> Worker:
    """The worker for the settings: what it runs comes from ``AgentWorkerPlugin`` (with what the dev stack or a test
    hands in), how it converts payloads from its client (``AgentClientPlugin``); what is left here is how it polls
    and how it stops. ``plugins`` come after the service's, and see the worker it configured. It refuses to
    build with a client timeout that would outlive its activity's attempt (``check_client_timeouts``)."""
    check_client_timeouts(settings)
    return Worker(
        client,
        task_queue=settings.task_queue,
        plugins=[AgentWorkerPlugin(settings, business, model, policy), *plugins],
        graceful_shutdown_timeout=grace_period(settings),
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
