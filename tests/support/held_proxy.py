"""A TCP proxy on 127.0.0.1 that can hold back what the server says: a request gets through and is acted on, its
answer waits. Put between a process and Temporal, it makes the moment a crash test needs (the server has done
the work, the process has not heard so) last until the test has killed the process, with no hook in the product.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Self

CHUNK = 65536


class HeldProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; after ``hold()``, what comes back waits until ``release()``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    def hold(self) -> None:
        self._flowing.clear()

    def release(self) -> None:
        self._flowing.set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for pipe in self._pipes:
            pipe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.target)
        for pipe in (
            self._pipe(client_reader, server_writer, held=False),
            self._pipe(server_reader, client_writer, held=True),
        ):
            task = asyncio.create_task(pipe)
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, held: bool) -> None:
        try:
            while chunk := await reader.read(CHUNK):
                if held:
                    await self._flowing.wait()
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
