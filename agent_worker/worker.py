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

from activities.model import LanguageModel, ModelActivities
from activities.policy import PolicyActivities
from activities.scripted_model import ScriptedModel
from activities.store import BusinessStore
from activities.tools import ToolActivities
from agent_worker.client import ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.faults import FaultInterceptor
from agent_worker.logging import LogContextInterceptor
from workflows.support_agent import SupportAgent

log = structlog.get_logger(__name__)


def choose_model(settings: Settings, store: BusinessStore) -> LanguageModel:
    """The scripted model for now; the Claude adapter plugs in here when an API key is configured."""
    return ScriptedModel(store, think_seconds=settings.scripted_think_seconds)


def build_worker(
    client: Client, settings: Settings, store: BusinessStore | None = None, model: LanguageModel | None = None
) -> Worker:
    """The worker for the settings; tests hand in a scratch store and, where a script needs it, a model."""
    store = store or settings.store().create()
    model = model or choose_model(settings, store)
    tools = ToolActivities(store)
    models = ModelActivities(model, store)
    activities: list[Callable[..., Any]] = [
        models.think,
        *tools.all(),
        PolicyActivities(settings.approvers).default_approvers,
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
    log.info("worker configured", task_queue=settings.task_queue, model=model.name, business_db=str(store.path))
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[SupportAgent],
        activities=activities,
        interceptors=interceptors,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_queue_timeout_seconds),
        max_cached_workflows=settings.max_cached_workflows,
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
    try:
        async with worker:
            log.info("worker started", task_queue=settings.task_queue, namespace=client.namespace)
            await stop.wait()
            log.info(
                "worker stopping: no new tasks, in-flight activities get a grace period",
                reason=reason,
                grace_seconds=settings.graceful_shutdown_seconds,
            )
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.info("worker stopped", reason=reason)
    return reason
