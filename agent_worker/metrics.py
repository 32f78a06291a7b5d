"""Prometheus metrics: Temporal's runtime metrics and the product's own, on one endpoint.

The Temporal runtime serves ``/metrics`` itself (task latencies, slots, polls, sticky cache). The product
adds its own instruments to the same meter, so one scrape sees both: refunds paid by activities,
approval answers counted in workflow code (the SDK skips metrics while replaying, so a replay does not
count an answer twice), and the number of tickets waiting for a person, read from Temporal's visibility
so it is right however many workers run.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from activities.contracts import AWAITING_APPROVAL_ATTRIBUTE, WORKFLOW_NAME

WAITING_QUERY = (
    f"WorkflowType = '{WORKFLOW_NAME}' AND {AWAITING_APPROVAL_ATTRIBUTE} > 0 AND ExecutionStatus = 'Running'"
)


def runtime(bind_address: str | None) -> Runtime | None:
    """A runtime serving Prometheus metrics on ``bind_address``, or None for the default (no endpoint)."""
    if bind_address is None:
        return None
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address)))


async def report_waiting_approvals(client: Client, every: timedelta = timedelta(seconds=15)) -> None:
    """Keep the ``agent_approvals_waiting`` gauge current until cancelled."""
    configured = client.service_client.config.runtime
    if configured is None:
        return
    gauge = configured.metric_meter.create_gauge(
        "agent_approvals_waiting", "Tickets waiting for a person to approve a refund", "1"
    )
    while True:
        with contextlib.suppress(Exception):  # a visibility hiccup must not stop the worker
            gauge.set((await client.count_workflows(WAITING_QUERY)).count)
        await asyncio.sleep(every.total_seconds())
