"""Structured JSON logs for the worker, with the workflow id, run id, activity and attempt on every line.

Temporal's own loggers (``workflow.logger``, ``activity.logger``) are stdlib loggers that put the run's
identity in an ``extra`` dict; they are routed through structlog here and that dict is flattened, so a
line from workflow code and a line from an activity carry the same keys. Workflow code logs through
``workflow.logger`` because it knows about replay: a replaying worker does not log the same step again.
Activities additionally get those keys bound as structlog context by an interceptor, so any structlog
logger used below an activity (the store, the model client) carries them too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import structlog
from temporalio import activity, workflow
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agent_worker.attempts import AttemptsTold

_TEMPORAL_EXTRAS = {
    "temporal_workflow": {"workflow_id": "workflow_id", "run_id": "run_id", "workflow_type": "workflow_type"},
    "temporal_activity": {
        "workflow_id": "workflow_id",
        "workflow_run_id": "run_id",
        "activity_type": "activity",
        "attempt": "attempt",
    },
}


def _flatten_temporal(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for extra, keys in _TEMPORAL_EXTRAS.items():
        values = event.pop(extra, None)
        if isinstance(values, dict):
            for source, target in keys.items():
                if source in values:
                    event.setdefault(target, values[source])
    return event


def configure(level: str = "INFO", fmt: str = "json") -> None:
    """Send structlog and stdlib logging (Temporal's included) to stderr in one format."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.ExtraAdder(),
        _flatten_temporal,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    # The run's identity goes into the event's keys (flattened above), not into the message text.
    workflow.logger.workflow_info_on_message = False
    activity.logger.activity_info_on_message = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic (1.18) announces each of its built-in plugins at INFO as it is imported: seven lines at every worker's
    # start that read like trouble. The revisions a migration runs, also INFO, are its other loggers', and stay.
    logging.getLogger("alembic.runtime.plugins").setLevel(max(logging.WARNING, root.level))


@contextmanager
def bound_to_activity() -> Iterator[None]:
    info = activity.info()
    with structlog.contextvars.bound_contextvars(
        workflow_id=info.workflow_id,
        run_id=info.workflow_run_id,
        activity=info.activity_type,
        attempt=info.attempt,
    ):
        yield


class _BindActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002 - the SDK's name
        with bound_to_activity():
            return await self.next.execute_activity(input)


class LogContextInterceptor(Interceptor):
    """Binds the running activity's identity to structlog's context for the activity's duration; and, since every
    worker installs this one, tells of each attempt what ``agent_worker.attempts`` says (a retry counted, a failure
    kept small)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:  # noqa: A002
        return _BindActivity(AttemptsTold(next))
