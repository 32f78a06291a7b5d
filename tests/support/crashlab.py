"""Real worker processes for crash tests and the recovery benchmark: started, killed and restarted with
real signals, against a real Temporal server, counting what was paid in the business database they share.

A worker in these tests is ``agent-worker worker`` in its own process, as in production, so SIGKILL takes
down the SDK's core, its pollers and every activity in flight together. Nothing here waits a fixed time
for correctness: every wait is a poll of the server or of a process, bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome
from tests.support import faulty_worker, tickets
from tests.support.demonstrations import Demonstration
from tests.support.processes import AGENT_WORKER, address, spawn_worker, worker_env
from tests.support.tickets import Handle, answer
from tests.support.waits import waiting_amount

POLL = 0.1
MAX_KILLS = 5


@dataclass
class WorkerProcess:
    """One ``agent-worker worker`` process; its JSON log goes to a file, so a full pipe never blocks it."""

    process: asyncio.subprocess.Process
    log_path: Path
    started_at: float
    exited_at: float | None = None
    stopped: bool = False
    """Sent SIGTERM by the test, so a clean exit is expected."""
    _reaper: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls, env: Mapping[str, str], log_path: Path, command: Sequence[str] = (AGENT_WORKER, "worker")
    ) -> WorkerProcess:
        with log_path.open("wb") as log_file:
            process = await spawn_worker(env, stdout=log_file, stderr=log_file, command=command)
        worker = cls(process, log_path, time.time())
        worker._reaper = asyncio.create_task(worker._reap())
        return worker

    async def _reap(self) -> None:
        await self.process.wait()
        self.exited_at = time.time()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def identity(self) -> str:
        """The identity the SDK gives this worker by default, as the server records it in the history."""
        return f"{self.pid}@{socket.gethostname()}"

    @property
    def alive(self) -> bool:
        return self.exited_at is None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def exited(self, timeout: float = 60) -> int:
        assert self._reaper is not None
        await asyncio.wait_for(asyncio.shield(self._reaper), timeout)
        assert self.process.returncode is not None
        return self.process.returncode

    def signal(self, signum: signal.Signals) -> None:
        if self.alive:
            self.stopped = self.stopped or signum == signal.SIGTERM
            self.process.send_signal(signum)

    def logs(self) -> list[dict[str, Any]]:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def killed_by_fault_at(self) -> float | None:
        """When a fault killed this worker: the time of its last words, logged just before SIGKILL."""
        for line in reversed(self.logs()):
            if line["event"].startswith("fault injected: killing"):
                return datetime.fromisoformat(line["timestamp"]).timestamp()
        return None

    async def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as a deploy does; SIGKILL only if it will not go."""
        self.signal(signal.SIGTERM)
        try:
            await self.exited(timeout)
        except TimeoutError:
            self.signal(signal.SIGKILL)
            await self.exited(timeout)


@dataclass
class Lab:
    """One ticket's world: a task queue, a business database, and the worker processes serving them."""

    client: Client
    store: Business
    task_queue: str = field(default_factory=lambda: f"crash-{uuid.uuid4()}")
    settings: dict[str, str] = field(default_factory=dict)
    """``AGENT_*`` settings for every worker this lab starts, such as ``{"AGENT_FAULTS": ...}`` (which starts
    ``tests.support.faulty_worker`` instead of ``agent-worker worker``)."""
    demonstration: Demonstration | None = None
    """What the workers show of a world without a safeguard (``tests.support.demonstrations``), for the rows that
    show what goes wrong without it; ``agent-worker worker`` as it ships otherwise."""
    workers: list[WorkerProcess] = field(default_factory=list)

    def env(self, **overrides: str) -> dict[str, str]:
        logs = {"AGENT_LOG_FORMAT": "json", "AGENT_LOG_LEVEL": "INFO"}  # what WorkerProcess.logs() reads
        server = address(self.client)
        shown = self.demonstration.env() if self.demonstration else {}
        return worker_env(
            server, self.task_queue, self.store.database.path, **{**logs, **shown, **self.settings, **overrides}
        )

    async def spawn(self, **overrides: str) -> WorkerProcess:
        log_path = self.store.database.path.with_name(f"worker-{len(self.workers) + 1}.log")
        env = self.env(**overrides)
        command: tuple[str, ...] = (AGENT_WORKER, "worker")
        if env.get("AGENT_FAULTS") or self.demonstration:  # the product knows neither: such a worker is the tests'
            command = faulty_worker.WORKER_COMMAND
        worker = await WorkerProcess.start(env, log_path, command)
        self.workers.append(worker)
        return worker

    async def start(self, raw_ticket: Any) -> Handle:
        return await tickets.start(self.client, self.task_queue, raw_ticket)

    async def supervise(self, handle: Handle, *, approve: bool = True, timeout: float = 180) -> Outcome:
        """Keep one worker running, as a process supervisor would (a dead one is replaced at once), and
        approve each amount the run waits for, until the run ends."""
        result = asyncio.ensure_future(handle.result())
        approved: set[int] = set()
        try:
            async with asyncio.timeout(timeout):
                while not result.done():
                    if not self.workers or not self.workers[-1].alive:
                        self._check_deaths()
                        await self.spawn()
                    amount = await waiting_amount(handle)
                    if approve and amount is not None and amount not in approved:
                        await handle.signal(APPROVE_SIGNAL, answer(amount))
                        approved.add(amount)
                    await asyncio.wait({result}, timeout=POLL)
        finally:
            if not result.done():
                result.cancel()
        return result.result()

    def _check_deaths(self) -> None:
        """A worker that died of anything but a SIGKILL (a bad setting, a crash at start-up) is a broken test
        or product, not a crash to recover from: say so instead of restarting it over and over."""
        for worker in self.workers:
            if worker.returncode not in (None, -signal.SIGKILL) and not (worker.stopped and worker.returncode == 0):
                tail = worker.log_path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"worker {worker.pid} exited {worker.returncode}:\n{tail}")
        if len(self.killed()) > MAX_KILLS:
            raise AssertionError(f"{len(self.killed())} workers were killed: a fault fires more often than asked")

    async def close(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers if w.alive))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        """Every worker this lab started is stopped when the test is done with it."""
        await self.close()

    def killed(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.returncode == -signal.SIGKILL]


async def recovery_seconds(handle: Handle, killed: WorkerProcess, successor: WorkerProcess) -> float | None:
    """Seconds from the SIGKILL to the ticket's next step starting on ``successor``: an activity attempt, or, where
    none follows (a kill at the closing line's local activity, the run's last work), the workflow task that does
    it again."""
    killed_at = killed.killed_by_fault_at() or killed.exited_at
    history = await handle.fetch_history()

    def started(kind: EventType.ValueType) -> list[float]:
        return [
            e.event_time.ToNanoseconds() / 1e9
            for e in history.events
            if e.event_type == kind and _started_by(e) == successor.identity
        ]

    times = started(EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) or started(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    if killed_at is None or not times:
        return None
    return min(times) - killed_at


def _started_by(event: HistoryEvent) -> str:
    """The identity of the worker that started an activity or a workflow task."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return event.activity_task_started_event_attributes.identity
    return event.workflow_task_started_event_attributes.identity


async def run_plain_loop(
    store: Business, ticket_id: str, question: str, email: str = "ann@example.com", **settings: str
) -> tuple[int, str]:
    """Run the baseline plain loop (``baseline/plain_loop.py``) for a ticket until it answers or dies, in a
    process of its own; its exit code and everything it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "baseline.plain_loop",
        "--ticket-id",
        ticket_id,
        "--email",
        email,
        "--question",
        question,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "AGENT_DB_PATH": str(store.database.path), **settings},
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode() + err.decode()
