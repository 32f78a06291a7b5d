"""The worker's Prometheus endpoint carries Temporal's runtime metrics and the product's own."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
from temporalio.client import Client

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import free_port
from tests.support.harness import Harness
from tests.support.processes import spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting


async def test_the_metrics_endpoint_counts_refunds_and_approvals_beside_temporals_own(
    agent: Harness, client: Client
) -> None:
    bind = f"127.0.0.1:{free_port()}"
    worker = await spawn_worker(agent.worker_env(AGENT_METRICS_BIND=bind))
    try:
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        assert (await asyncio.wait_for(handle.result(), 60)).status is Status.RESOLVED
        async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
            text = await response.text()
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    lines = text.splitlines()
    assert any(line.startswith("agent_refunds_paid{") and line.endswith(" 1") for line in lines)
    assert any(line.startswith("agent_refunded_cents{") and line.endswith(" 4900") for line in lines)
    assert any('decision="approved"' in line and line.startswith("agent_approvals{") for line in lines)
    assert any(line.startswith("agent_approvals_waiting") for line in lines)
    assert any(
        line.startswith("agent_model_calls{") and 'model="scripted"' in line and line.endswith(" 4") for line in lines
    )
    assert any(line.startswith("temporal_workflow_completed") for line in lines)
