"""Prometheus metrics: Temporal's runtime metrics and the product's own, on one endpoint.

The Temporal runtime serves ``/metrics`` itself (task latencies, slots, polls, sticky cache). The product
adds its own instruments to the same meter, so one scrape sees both: refunds paid by activities,
approval answers counted in workflow code (the SDK skips metrics while replaying, so a replay does not
count an answer twice), and the number of tickets waiting for a person and of stuck tickets, read from
Temporal's visibility so they are right however many workers run. ``deploy/alerts.yml`` alerts on them.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import WorkerDeploymentConfig

from agent_worker import tickets
from agent_worker.stuck import server_reports_problems


def runtime(bind_address: str | None, versioned: WorkerDeploymentConfig | None = None) -> Runtime | None:
    """A runtime serving Prometheus metrics on ``bind_address``, or None for the default (no endpoint). A worker of a
    Worker Deployment (``versioned``) tags every metric with its deployment and build, which the SDK's own metrics do
    not carry, so a rollout's dashboard compares the two versions side by side (``docs/rollouts.md``)."""
    if bind_address is None:
        return None
    return Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address), global_tags=tags(versioned))
    )


def tags(versioned: WorkerDeploymentConfig | None) -> dict[str, str]:
    """``worker_deployment_name`` and ``worker_build_id`` for a versioned worker; none for an unversioned one."""
    if versioned is None:
        return {}
    return {"worker_deployment_name": versioned.version.deployment_name, "worker_build_id": versioned.version.build_id}


async def report_from_visibility(client: Client, every: timedelta = timedelta(seconds=15)) -> None:
    """Keep the gauges read from visibility current until cancelled: ``agent_approvals_waiting`` and, where the
    server marks stuck runs (``TemporalReportedProblems``), ``agent_tickets_stuck``. Elsewhere that gauge is
    never set, so it is absent rather than a reassuring 0: finding those tickets means describing every running
    one (``agent-worker tickets --stuck``), too much to do every few seconds in every worker."""
    configured = client.service_client.config.runtime
    if configured is None:
        return
    waiting = configured.metric_meter.create_gauge(
        "agent_approvals_waiting", "Tickets waiting for a person to approve a refund", "1"
    )
    stuck = configured.metric_meter.create_gauge(
        "agent_tickets_stuck", "Running tickets whose workflow task keeps failing (TemporalReportedProblems)", "1"
    )
    while True:
        with contextlib.suppress(Exception):  # a visibility hiccup must not stop the worker
            waiting.set(await tickets.count(client, tickets.query(waiting_for="approval")))
        with contextlib.suppress(Exception):
            if await server_reports_problems(client):
                stuck.set(await tickets.count(client, tickets.STUCK_QUERY))
        await asyncio.sleep(every.total_seconds())
