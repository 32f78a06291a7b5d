"""The product's own processes, started as its users start them: ``agent-worker worker`` with its settings in the
environment, any other command with its output read back, and a wait for a server to start listening.

One place says what a worker process needs (the server, the task queue, the business database, the scripted
model), so every test, benchmark and script starts its workers the same way, and a new setting is added once.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from temporalio.client import Client

from tests.support.waits import poll

AGENT_WORKER = str(Path(sys.executable).parent / "agent-worker")
"""The ``agent-worker`` command of the environment the tests run in."""

Output = int | IO[bytes] | None
"""Where a child's stdout or stderr goes: ``asyncio.subprocess.PIPE``, ``DEVNULL``, or an open file."""


def address(client: Client) -> str:
    """The ``host:port`` of the server ``client`` talks to, for ``TEMPORAL_ADDRESS`` or ``--address``."""
    return client.service_client.config.target_host


def worker_env(server: str, task_queue: str, db_path: Path | None, **settings: str) -> dict[str, str]:
    """The settings of a worker process on ``task_queue`` (``db_path`` None: the settings name the database), on
    the scripted model unless ``settings`` say otherwise: counted calls and changes of mind are the script's, and a
    developer's ANTHROPIC_API_KEY must never bill the suite's tickets."""
    return {
        "TEMPORAL_ADDRESS": server,
        "AGENT_TASK_QUEUE": task_queue,
        **({"AGENT_DB_PATH": str(db_path)} if db_path is not None else {}),
        "AGENT_MODEL_BACKEND": "scripted",
        **settings,
    }


async def spawn_worker(
    settings: Mapping[str, str],
    *,
    stdout: Output = asyncio.subprocess.DEVNULL,
    stderr: Output = asyncio.subprocess.DEVNULL,
    environ: Mapping[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``agent-worker worker`` with ``settings`` over ``environ`` (this process's environment by default)."""
    return await asyncio.create_subprocess_exec(
        AGENT_WORKER, "worker", stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        env={**(os.environ if environ is None else environ), **settings},
    )  # fmt: skip


async def run(*command: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a command without blocking the event loop (an in-process worker shares it); return stdout."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, f"{command} exited {process.returncode}: {err.decode()}"
    return out.decode()


async def listening(host: str, port: int, timeout: float = 30) -> None:
    """Wait until something accepts connections on ``host:port``: a process that has just been started says
    nothing when it is ready."""

    async def accepts() -> bool:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            return False
        writer.close()
        await writer.wait_closed()
        return True

    await poll(accepts, timeout=timeout, interval=0.05, what=f"something to listen on {host}:{port}")
