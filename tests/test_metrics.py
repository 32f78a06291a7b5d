"""The worker's Prometheus endpoint carries Temporal's runtime metrics and the product's own; the gauges read from
visibility, a fact of the namespace, come from one ``agent-worker metrics`` process, not from every worker."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
from temporalio.client import Client

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker import tickets
from agent_worker.cli.devserver import free_port
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, exited, spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, poll


async def scrape(bind: str) -> list[str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
        return (await response.text()).splitlines()


async def test_the_metrics_endpoint_counts_refunds_and_approvals_beside_temporals_own_and_reads_no_visibility(
    agent: Harness, client: Client
) -> None:
    """A worker polls and works: the tickets waiting in the namespace are no gauge of its own, which every worker
    once read from visibility every 15 s (N workers, two queries each)."""
    bind = f"127.0.0.1:{free_port()}"
    worker = await spawn_worker(agent.worker_env(AGENT_METRICS_BIND=bind))
    try:
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        waiting = await scrape(bind)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        assert (await asyncio.wait_for(handle.result(), 60)).status is Status.RESOLVED
        lines: list[str] = []

        async def completed() -> bool:  # the worker counts the completion once its task is done, not before
            lines[:] = await scrape(bind)
            return any(line.startswith("temporal_workflow_completed") for line in lines)

        await poll(completed, timeout=30, what="the worker to count the completed workflow")
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    assert any(line.startswith("agent_refunds_paid{") and line.endswith(" 1") for line in lines)
    assert any(line.startswith("agent_refunded_cents{") and line.endswith(" 4900") for line in lines)
    assert any('decision="approved"' in line and line.startswith("agent_approvals{") for line in lines)
    assert any(
        line.startswith("agent_model_calls{") and 'model="scripted"' in line and line.endswith(" 4") for line in lines
    )
    for scraped in (waiting, lines):
        assert not [line for line in scraped if line.startswith(("agent_approvals_waiting", "agent_tickets_stuck"))]


def gauge(lines: list[str], name: str) -> float | None:
    values = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith((f"{name} ", f"{name}{{"))]
    return values[0] if values else None


async def test_agent_worker_metrics_publishes_the_tickets_waiting_for_a_person_in_the_namespace(
    agent: Harness, client: Client
) -> None:
    """One process reads visibility for the namespace, as the alerts need (``deploy/alerts.yml``)."""
    query = tickets.query(waiting_for="approval")
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)

        async def listed() -> bool:
            return await tickets.count(client, query) >= 1

        await poll(listed, timeout=30, what="the waiting ticket to show in visibility")
        bind = f"127.0.0.1:{free_port()}"
        process = await spawn_worker(
            {"TEMPORAL_ADDRESS": address(client), "AGENT_METRICS_BIND": bind}, command=(AGENT_WORKER, "metrics")
        )
        try:

            async def published() -> bool:
                try:
                    value = gauge(await scrape(bind), "agent_approvals_waiting")
                except aiohttp.ClientError:
                    return False
                return value is not None

            await poll(published, timeout=30, what="agent-worker metrics to publish the gauge")
            value = gauge(await scrape(bind), "agent_approvals_waiting")
            assert value is not None
            assert value >= 1, "our ticket waits for a person"
            assert value == await tickets.count(client, query)
        finally:
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 60) == 0
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        assert (await asyncio.wait_for(handle.result(), 60)).status is Status.RESOLVED


async def test_agent_worker_metrics_without_an_address_to_serve_on_says_so() -> None:
    code, _, err = await exited(AGENT_WORKER, "metrics", env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert code == 2
    assert "agent-worker metrics needs AGENT_METRICS_BIND" in err
    assert "Traceback" not in err
