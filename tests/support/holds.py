"""Activities held at their start until the test lets them go: to land a signal or an update at a precise moment
of a run (while a run continuing as new writes its audit trail, say), on a worker in the test's own process.

``Holds("archive_records")`` makes a plugin for ``Harness.worker(plugins=...)``: the first time the activity
starts, ``entered`` is set and the attempt waits for ``release``; later times run at once. ``NextRunStumbles``
does the same for a moment no activity marks: a continued run's first workflow task, made slow and then failed
once, so that what is sent meanwhile arrives with the run's start.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from temporalio import activity
from temporalio import workflow as temporal_workflow
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkerConfig,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)


class Holds(SimplePlugin):
    def __init__(self, *names: str) -> None:
        super().__init__("tests-holds")
        self._entered = {name: asyncio.Event() for name in names}
        self._released = {name: asyncio.Event() for name in names}

    async def entered(self, name: str, timeout: float = 30) -> None:
        """Wait until ``name`` has started, and is held."""
        await asyncio.wait_for(self._entered[name].wait(), timeout)

    def release(self, name: str) -> None:
        self._released[name].set()

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        config["interceptors"] = [*config.get("interceptors", []), _Interceptor(self)]
        return config

    async def hold(self, name: str) -> None:
        entered = self._entered.get(name)
        if entered is None or entered.is_set():
            return
        entered.set()
        await self._released[name].wait()


class _Interceptor(Interceptor):
    def __init__(self, holds: Holds) -> None:
        self.holds = holds

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:  # noqa: A002
        return _Inbound(next, self.holds)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, holds: Holds) -> None:  # noqa: A002
        super().__init__(next)
        self.holds = holds

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002
        await self.holds.hold(activity.info().activity_type)
        return await super().execute_activity(input)


class NextRunStumbles(SimplePlugin):
    """A worker on which the first workflow task of a ticket's continued run takes ``seconds`` of wall time (below
    the SDK's two-second deadlock detector) and then fails, once, as a worker that dies mid-task does. What is
    sent to the ticket meanwhile reaches the run's next attempt of that task, in one activation with the run's
    start: before the run has taken over what the last run handed it. ``stumbling`` is set, from the workflow's
    thread, when the pause begins."""

    def __init__(self, seconds: float = 1.0) -> None:
        super().__init__("tests-next-run-stumbles")
        self.seconds = seconds
        self.stumbling = threading.Event()

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        plugin = self

        class Stumble(Interceptor):
            def workflow_interceptor_class(
                self,
                input: WorkflowInterceptorClassInput,  # noqa: A002, ARG002 - the SDK's signature
            ) -> type[WorkflowInboundInterceptor]:
                class Inbound(WorkflowInboundInterceptor):
                    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:  # noqa: A002
                        if temporal_workflow.info().continued_run_id and not plugin.stumbling.is_set():
                            plugin.stumbling.set()
                            time.sleep(plugin.seconds)  # the workflow's thread, on purpose: the task takes this long
                            raise RuntimeError("the worker stumbled in the continued run's first task (a test's)")
                        return await super().execute_workflow(input)

                return Inbound

        config["interceptors"] = [*config.get("interceptors", []), Stumble()]
        return config
