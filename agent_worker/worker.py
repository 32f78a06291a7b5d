"""The worker process: the workflow and its activities on one task queue, stopping politely on a deploy.

A deploy sends SIGTERM. The worker then stops polling for new tasks, lets the activities it is running
finish within a grace period (a model call that finishes is recorded, so the next worker does not pay for
it again), logs why it stopped, and exits. A SIGKILL gets none of that, and is what the activities'
heartbeats and the short sticky-queue timeout are for: the server moves the dead worker's tickets to
another worker within seconds.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import structlog
from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from activities.business import Business
from activities.business.model_calls import ModelCalls
from activities.content_store import ContentActivities, ContentStore
from activities.model import LanguageModel, ModelActivities
from activities.policy import PolicyActivities
from activities.scripted_model import ScriptedModel
from activities.tools import ToolActivities
from agent_worker.client import ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.faults import FaultInterceptor
from agent_worker.logs import LogContextInterceptor
from agent_worker.metrics import report_from_visibility
from workflows.support_agent import SupportAgent

log = structlog.get_logger(__name__)


class NoCredentialsError(RuntimeError):
    pass


def choose_model(settings: Settings, model_calls: ModelCalls) -> LanguageModel:
    """Claude when the ``anthropic`` SDK finds credentials (or ``AGENT_MODEL_BACKEND=claude`` demands it),
    the scripted stand-in otherwise; the log says which, and why."""
    if settings.model_backend == "scripted":
        log.info("model: the scripted stand-in", reason="AGENT_MODEL_BACKEND=scripted")
        return ScriptedModel(model_calls, think_seconds=settings.scripted_think_seconds)
    # Importing the SDK takes seconds on a small machine; a worker that runs the script never pays for it.
    import anthropic  # noqa: PLC0415

    from activities.claude_model import ClaudeModel  # noqa: PLC0415

    # One client per worker process, with the SDK's retries off: Temporal's retry policy is the only one.
    # Credentials and the base URL come from the SDK's own environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).
    try:
        client = anthropic.AsyncAnthropic(max_retries=0, timeout=settings.anthropic_timeout_seconds)
    except anthropic.CredentialsError as error:
        # Credentials were configured (a profile, a config directory) but are broken: running the script
        # instead would hide that, and the script refunds for real.
        raise NoCredentialsError(f"Anthropic credentials are configured but cannot be used: {error}") from error
    if not (client.api_key or client.auth_token or client.credentials):
        if settings.model_backend == "claude":
            raise NoCredentialsError("AGENT_MODEL_BACKEND=claude, but no ANTHROPIC_API_KEY (or other credential)")
        log.warning(
            "model: the scripted stand-in, because no Anthropic API key is configured; "
            "set ANTHROPIC_API_KEY to run the agent on Claude"
        )
        return ScriptedModel(model_calls, think_seconds=settings.scripted_think_seconds)
    if settings.anthropic_model not in settings.anthropic_prices:
        log.warning("no price for this model: its cost is reported as 0", model=settings.anthropic_model)
    log.info("model: Claude", model=settings.anthropic_model, base_url=str(client.base_url))
    return ClaudeModel(
        client,
        model=settings.anthropic_model,
        max_tokens=settings.anthropic_max_tokens,
        temperature=settings.anthropic_temperature,
        system_prompt=settings.anthropic_system_prompt,
        prices=settings.anthropic_prices,
    )


def build_worker(
    client: Client, settings: Settings, business: Business | None = None, model: LanguageModel | None = None
) -> Worker:
    """The worker for the settings, each activity handed the ports it uses; tests hand in a scratch business
    and, where a script needs it, a model."""
    business = business or settings.business().create()
    model = model or choose_model(settings, business.model_calls)
    blobs = settings.blob_backend(business.blobs)
    content = ContentStore(blobs)
    tools = ToolActivities(
        orders=business.orders,
        payments=business.payments,
        mail=business.mail,
        audit=business.audit,
        content=content,
        inline_max_bytes=settings.inline_result_max_bytes,
    )
    models = ModelActivities(model, business.model_calls, content)
    activities: list[Callable[..., Any]] = [
        models.think,
        models.summarize,
        ContentActivities(content).archive_records,
        *tools.all(),
        *PolicyActivities(settings.approvers, settings.web_approval_key_bytes()).all(),
    ]
    interceptors: list[Interceptor] = [LogContextInterceptor()]
    faults = settings.fault_injector()
    if faults is not None:
        faults.check({fn.__name__ for fn in activities})  # each activity is registered under its method's name
        log.warning(
            "FAULT INJECTION IS ON: this worker will kill or hang itself on purpose. It is for crash tests; "
            "unset AGENT_FAULTS anywhere else.",
            faults=[str(f) for f in faults.faults],
            markers=str(faults.markers),
        )
        interceptors.append(FaultInterceptor(faults))
    bucket = f"s3://{settings.s3_bucket}/{settings.s3_prefix}" if settings.s3_bucket else None
    log.info(
        "worker configured",
        task_queue=settings.task_queue,
        model=model.name,
        business_db=str(business),
        content_store=str(blobs),
        large_payloads=bucket,
    )
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[SupportAgent],
        activities=activities,
        interceptors=interceptors,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_queue_timeout_seconds),
        max_cached_workflows=settings.max_cached_workflows,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
    )


async def run_worker(client: Client, settings: Settings, stop: asyncio.Event | None = None) -> str:
    """Run until SIGTERM, SIGINT or ``stop``; return why the worker stopped."""
    await ensure_search_attributes(client)
    worker = build_worker(client, settings)
    stop = stop or asyncio.Event()
    reason = "stop requested"

    def on_signal(signum: signal.Signals) -> None:
        nonlocal reason
        reason = f"received {signum.name}"
        stop.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    gauge = asyncio.create_task(report_from_visibility(client))
    try:
        async with worker:
            log.info(
                "worker started", task_queue=settings.task_queue, namespace=client.namespace,
                metrics=f"http://{settings.metrics_bind}/metrics" if settings.metrics_bind else None,
            )  # fmt: skip
            await stop.wait()
            log.info(
                "worker stopping: no new tasks, in-flight activities get a grace period",
                reason=reason,
                grace_seconds=settings.graceful_shutdown_seconds,
            )
    finally:
        gauge.cancel()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.info("worker stopped", reason=reason)
    return reason
