"""Serving a Starlette app with uvicorn inside the caller's event loop: the approval inbox, the codec server and the
evals' stand-in Messages API, one web stack for the three.

Each runs beside something else (a worker, the dev server, a suite of tickets), so uvicorn installs no signal
handlers of its own: the process's signals belong to the worker or the CLI, which stop the server when they stop.
The socket is bound here, before uvicorn starts, so that a port in use is an error the caller sees (``OSError``)
rather than uvicorn's exit, and so that port 0 tells the caller which port it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import uvicorn
from starlette.types import ASGIApp

STARTUP_TIMEOUT = timedelta(seconds=10)
SHUTDOWN_GRACE_SECONDS = 2
"""How long requests under way may hold a server up when it stops."""


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handlers (see the module's docstring)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class Serving:
    """An app being served on ``host``:``port`` until ``cleanup``."""

    host: str
    port: int
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def cleanup(self) -> None:
        """Stop taking connections, let requests under way finish (``SHUTDOWN_GRACE_SECONDS`` at most), return."""
        self.server.should_exit = True
        await self.task


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (the first address ``host`` resolves to; port 0 for any free one).
    Raises ``OSError`` if it cannot listen there."""
    found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(app: ASGIApp, sock: socket.socket, name: str) -> Serving:
    """Serve ``app`` on the bound ``sock`` (closed if it does not start) once it listens; what stopped it if it
    stopped while starting."""
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=name)
    try:
        await started(server, task)
    except BaseException:
        server.should_exit = True
        if not task.done():
            task.cancel()
        sock.close()
        raise
    host, port = sock.getsockname()[:2]
    return Serving(host, port, server, task)


async def started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """Once ``server`` listens; what stopped it if it stops first."""
    async with asyncio.timeout(STARTUP_TIMEOUT.total_seconds()):
        while not server.started:
            if task.done():
                await task  # raises what stopped it
                raise RuntimeError(f"{task.get_name()} stopped while starting")
            await asyncio.sleep(0.01)
