"""Tracing through Temporal's OpenTelemetry plugin, switched on with ``AGENT_TRACING=true``.

Spans cover starting a ticket, each workflow task, and each activity (the model call, every tool), and
the trace context travels with the ticket, so one trace follows it across workers and crashes. The
provider is Temporal's replay-safe one: a replaying worker does not emit the same spans again. Spans go out
over OTLP/HTTP to wherever the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` points (a collector, Jaeger,
Tempo, Honeycomb ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.client import Plugin
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider


def plugins(*, enabled: bool, service_name: str = "agent-worker") -> Sequence[Plugin]:
    """The client plugins that trace the worker and the clients it makes; none when tracing is off."""
    if not enabled:
        return []
    provider = create_tracer_provider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return [OpenTelemetryPlugin(add_temporal_spans=True)]


def flush() -> None:
    """Send the spans still buffered; called when the worker stops."""
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if callable(shutdown):
        shutdown()
