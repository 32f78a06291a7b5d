"""``agent-worker metrics``: the gauges read from Temporal's visibility, published by one process for the namespace.

The Temporal runtime serves ``/metrics`` itself (task latencies, slots, polls, sticky cache), on every process that
sets ``AGENT_METRICS_BIND``. The product adds its own instruments to the same meter, so one scrape sees both:
refunds paid by activities and approval answers counted in workflow code (the SDK skips metrics while replaying, so
a replay does not count an answer twice) on the workers; and here, the number of tickets waiting for a person and
of stuck tickets. Those two are a fact of the namespace, not of a worker: read from visibility, they are right
however many workers run, so one process reads them, rather than every worker twice every few seconds.
``deploy/alerts.yml`` alerts on them.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import MetricMeter

from agent_worker import tickets
from agent_worker.stuck import server_reports_problems

EVERY = timedelta(seconds=15)
"""How often the gauges are read: finer than a scrape interval is worth nothing, and each read is two queries."""


async def report_from_visibility(client: Client, meter: MetricMeter, every: timedelta = EVERY) -> None:
    """Keep the gauges read from visibility current until cancelled: ``agent_approvals_waiting`` and, where the
    server marks stuck runs (``TemporalReportedProblems``), ``agent_tickets_stuck``. Elsewhere that gauge is
    never set, so it is absent rather than a reassuring 0: finding those tickets means describing every running
    one (``agent-worker tickets --stuck``), too much to do every few seconds."""
    waiting = meter.create_gauge("agent_approvals_waiting", "Tickets waiting for a person to approve a refund", "1")
    stuck = meter.create_gauge(
        "agent_tickets_stuck", "Running tickets whose workflow task keeps failing (TemporalReportedProblems)", "1"
    )
    while True:
        with contextlib.suppress(Exception):  # a visibility hiccup must not stop the gauges
            waiting.set(await tickets.count(client, tickets.query(waiting_for="approval")))
        with contextlib.suppress(Exception):
            if await server_reports_problems(client):
                stuck.set(await tickets.count(client, tickets.STUCK_QUERY))
        await asyncio.sleep(every.total_seconds())
