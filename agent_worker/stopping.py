"""How every long-running command stops: on SIGTERM (a deploy, ``docker stop``, systemd) or SIGINT (Ctrl-C).

A process that only had Python's default handlers would die on SIGTERM mid-way, with no cleanup: a worker would
drop the activities it runs instead of giving them their grace period, a server its open connections. So the
worker, ``dev``, the approval inbox and the codec server all wait on ``stop_signals``: the signal sets an event
in the event loop, the command stops in its own order, and the handlers are taken off again on the way out, so a
second Ctrl-C during a slow shutdown is Python's default again (the process ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopping:
    """Set by a signal (or by whoever holds ``event``); ``reason`` says which."""

    def __init__(self, event: asyncio.Event) -> None:
        self.event = event
        self.reason = "stop requested"

    def signalled(self, signum: signal.Signals) -> None:
        self.reason = f"received {signum.name}"
        self.event.set()

    async def wait(self) -> str:
        """Once stopped; why."""
        await self.event.wait()
        return self.reason


@contextlib.contextmanager
def stop_signals(stop: asyncio.Event | None = None) -> Iterator[Stopping]:
    """Within the block, SIGTERM and SIGINT set ``stop`` (a new event if none is given) rather than end the
    process. Enter it before starting what the signal must stop politely, so that no signal falls in between."""
    loop = asyncio.get_running_loop()
    stopping = Stopping(stop or asyncio.Event())
    for signum in SIGNALS:
        loop.add_signal_handler(signum, stopping.signalled, signum)
    try:
        yield stopping
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)
