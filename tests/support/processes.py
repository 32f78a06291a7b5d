"""The product's own processes, started as its users start them: ``agent-worker worker`` with its settings in the
environment, any other command with its output read back, and a wait for a server to start listening.

One place says what a worker process needs (the server, the task queue, the business database, the scripted
model), so every test, benchmark and script starts its workers the same way, and a new setting is added once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import pytest
from temporalio.client import Client

from tests.support.desk import LOOSE_FILE
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
    developer's ANTHROPIC_API_KEY must never bill the suite's tickets; and under the tests' loose desk
    (``tests.support.desk``) unless they name another policy file."""
    return {
        "TEMPORAL_ADDRESS": server,
        "AGENT_TASK_QUEUE": task_queue,
        **({"AGENT_DB_PATH": str(db_path)} if db_path is not None else {}),
        "AGENT_MODEL_BACKEND": "scripted",
        "AGENT_POLICY_FILE": str(LOOSE_FILE),
        **settings,
    }


async def spawn_worker(
    settings: Mapping[str, str],
    *,
    stdout: Output = asyncio.subprocess.DEVNULL,
    stderr: Output = asyncio.subprocess.DEVNULL,
    environ: Mapping[str, str] | None = None,
    command: Sequence[str] = (AGENT_WORKER, "worker"),
) -> asyncio.subprocess.Process:
    """Start ``agent-worker worker`` (or another worker ``command``: ``faulty_worker.WORKER_COMMAND``) with
    ``settings`` over ``environ`` (this process's environment by default)."""
    return await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env={**(os.environ if environ is None else environ), **settings},
    )


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


async def exited(*command: str, env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, str, str]:
    """Run a command whose exit code the test reads (a refusal is not a failure here); its code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


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


@contextlib.asynccontextmanager
async def agent_worker_dev(cwd: Path, port: int, ui_port: int, env: Mapping[str, str]) -> AsyncIterator[list[str]]:
    """``agent-worker dev`` as a person runs it, up until its banner ("Temporal dev server on ..."): yields what it
    has said on stderr so far (and goes on collecting), and stops it with Ctrl-C afterwards. Fails the test with
    its last words if it does not come up within 90 s."""
    dev = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "dev",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    said: list[str] = []
    started = asyncio.Event()

    async def read_stderr() -> None:  # all of it, so a full pipe never stalls the process
        assert dev.stderr is not None
        async for raw in dev.stderr:
            said.append(raw.decode())
            if said[-1].startswith("Temporal dev server on"):
                started.set()

    reader = asyncio.create_task(read_stderr())
    try:
        try:
            async with asyncio.timeout(90):  # a bound on a dev server that never comes up
                await started.wait()
        except TimeoutError:
            pytest.fail(f"agent-worker dev did not come up; it said: {''.join(said)[-3000:]}")
        yield said
    finally:
        dev.send_signal(signal.SIGINT)
        await asyncio.wait_for(dev.wait(), 60)
        await reader
