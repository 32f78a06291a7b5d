"""Heartbeats from a background task, so the server notices a dead worker in seconds.

Without a heartbeat the server learns that a worker died only when the attempt's start-to-close timeout
runs out; a model call needs minutes of start-to-close, so a crash would stall the ticket for minutes.
With a heartbeat timeout of a few seconds and a task that beats while the work is in flight, a killed
worker's activity is retried elsewhere after the heartbeat timeout instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio import activity

DEFAULT_INTERVAL = timedelta(seconds=1)


@contextlib.asynccontextmanager
async def heartbeating(interval: timedelta | None = None) -> AsyncIterator[None]:
    """Heartbeat every ``interval`` (a third of the heartbeat timeout by default) until the block exits."""
    timeout = activity.info().heartbeat_timeout
    if interval is None:
        interval = timeout / 3 if timeout else DEFAULT_INTERVAL

    async def beat() -> None:
        # Sleep first: most activities finish in milliseconds, and a heartbeat they never needed would be
        # one more call to the server for every tool call.
        while True:
            await asyncio.sleep(interval.total_seconds())
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
