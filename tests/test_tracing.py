"""With AGENT_TRACING on, the worker exports a ticket's spans over OTLP to the configured collector."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.client import Client

from activities.contracts.ticket import Status
from agent_worker.cli.devserver import free_port
from tests.support.harness import Harness
from tests.support.processes import spawn_worker
from tests.support.tickets import ticket


@pytest.fixture
async def collector() -> AsyncIterator[tuple[str, list[ExportTraceServiceRequest]]]:
    """A stand-in OpenTelemetry collector on 127.0.0.1 that keeps what it is sent."""
    received: list[ExportTraceServiceRequest] = []

    async def traces(request: web.Request) -> web.Response:
        received.append(ExportTraceServiceRequest.FromString(await request.read()))
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}", received
    await runner.cleanup()


async def test_a_traced_ticket_sends_spans_for_the_workflow_and_every_activity(
    agent: Harness, client: Client, collector: tuple[str, list[ExportTraceServiceRequest]]
) -> None:
    endpoint, received = collector
    worker = await spawn_worker(
        agent.worker_env(AGENT_TRACING="true", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
    )
    try:
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        assert (await asyncio.wait_for(handle.result(), 60)).status is Status.RESOLVED
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    spans = [
        span
        for export in received
        for resource in export.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = {span.name for span in spans}
    assert {"RunActivity:think", "RunActivity:lookup_order", "RunActivity:issue_refund"} <= names
    assert "RunWorkflow:SupportAgent" in names
    assert len({span.trace_id for span in spans if span.name.startswith("RunActivity")}) == 1
