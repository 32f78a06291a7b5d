"""What a worker tells of each activity attempt beyond its logs: that it is a retry, in a metric every way of failing
reaches, and why it failed, in a failure small enough for the server to keep.

**Retries, counted.** An activity retried until it succeeds (``workflows.timeouts`` gives it no maximum) never fails
its ticket: the ticket waits on it, doing nothing. The SDK's ``temporal_activity_execution_failed`` counts only the
attempts that raise in the worker; an attempt the server times out (start-to-close, heartbeat: a store that hangs,
a worker whose loop is stuck) raises nothing there, so an alert on it never fires for a store that hangs. Every
attempt after the first began because the one before failed, in whatever way: ``agent_activity_retries`` counts
them as they begin, which is what ``AgentActivitiesRetriedForeverFailing`` reads.

**Failures the server keeps.** An error the SDK reports carries its message, its type, its stack trace and its
causes'. A database driver's can pass what the server stores whole (SQLAlchemy's, with the statement, parameters
and trace), and the server then keeps its own "Failure exceeds size limit." in its place, the real error only as a
cut cause. An error that is not already a Temporal failure is reported as one ``ApplicationError`` of its type and
message (cut to ``FAILURE_MESSAGE_CHARS``), without the trace: the worker's log has that.
"""

from __future__ import annotations

from typing import Any

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

FAILURE_MESSAGE_CHARS = 1_000
"""How much of an error's message an attempt's failure carries: the first lines a person acts on."""
RETRIES = "agent_activity_retries"
log = structlog.get_logger(__name__)


class AttemptsTold(ActivityInboundInterceptor):
    """Counts each attempt that retries a failed one (``RETRIES``), and reports an error that is not a Temporal
    failure as a small ``ApplicationError`` of its type (retryable, as the error was)."""

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002 - the SDK's name
        if activity.info().attempt > 1:
            retries = activity.metric_meter().create_counter(
                RETRIES, "Activity attempts begun because the attempt before failed: an error or a timeout", "1"
            )
            retries.add(1)
        try:
            return await self.next.execute_activity(input)
        except FailureError:  # already Temporal's: an ApplicationError with the type and message a caller chose
            raise
        except Exception as error:  # every error an attempt raises is reported, made small
            log.warning("activity attempt failed", error_type=type(error).__name__, exc_info=error)  # the whole trace
            raise small(error) from None


def small(error: Exception) -> ApplicationError:
    """``error`` as a failure the server keeps whole: its type, and its message cut to ``FAILURE_MESSAGE_CHARS``."""
    message = str(error) or type(error).__name__
    if len(message) > FAILURE_MESSAGE_CHARS:
        message = f"{message[:FAILURE_MESSAGE_CHARS]}… [{len(message)} characters in all]"
    return ApplicationError(message, type=type(error).__name__)
