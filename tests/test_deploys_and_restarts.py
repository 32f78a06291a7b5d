"""A deploy is a pause, and so is a restart of the Temporal server itself: nothing is repeated or lost.

The deploy sends SIGTERM to a worker process while a model call runs in it; the server restart SIGKILLs
a dev server that keeps its state in a file, and starts it again on the same file and port.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from activities.business import Business
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import SEARCH_ATTRIBUTE_ARGS, binary, free_port
from agent_worker.config import DATA_CONVERTER
from tests.support.crashlab import Lab
from tests.support.history import activity_attempts
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import poll, waiting_amount

pytestmark = pytest.mark.slow
NO_APPROVAL_NEEDED = 10_000


async def model_call_in_flight(handle: Handle) -> bool:
    description = await handle.describe()
    return any(
        a.activity_type.name == "think" and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in description.raw_description.pending_activities
    )


@pytest.fixture
async def lab(client: Client, store: Business) -> AsyncIterator[Lab]:
    async with Lab(client, store, settings={"AGENT_SCRIPTED_THINK_SECONDS": "2"}) as lab:
        yield lab


async def test_a_deploy_lets_the_model_call_in_flight_finish_and_the_next_worker_does_not_repeat_it(lab: Lab) -> None:
    first = await lab.spawn()
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    await poll(lambda: model_call_in_flight(handle), what="a model call to be in flight")

    first.signal(signal.SIGTERM)
    assert await first.exited() == 0
    outcome = await lab.supervise(handle)

    events = [line["event"] for line in first.logs()]
    stopping = events.index("worker stopping: no new tasks, in-flight activities get a grace period")
    assert "model answered" in events[stopping:], "the call in flight at SIGTERM did not finish on that worker"
    assert first.logs()[-1] | {"timestamp": None} == {
        "event": "worker stopped",
        "reason": "received SIGTERM",
        "level": "info",
        "timestamp": None,
    }
    assert outcome.status is Status.RESOLVED
    assert Counter(c.step for c in lab.store.model_calls.of(outcome.ticket_id)) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert await activity_attempts(handle, "think") == [1, 1, 1, 1]
    assert len(lab.workers) == 2


async def test_a_deploy_waits_for_a_model_call_longer_than_the_old_30_second_grace_period(
    client: Client, store: Business
) -> None:
    """The grace period used to be 30 s while a model call may take two minutes: a SIGTERM cut such a call,
    and the next worker made it again, and paid for it again. It now defaults to the longest attempt (with
    ``AGENT_GRACEFUL_SHUTDOWN_SECONDS=30`` this test fails: the call is cut short)."""
    lab = Lab(client, store, settings={"AGENT_SCRIPTED_THINK_SECONDS": "35"})
    try:
        first = await lab.spawn()
        raw = ticket(approval_limit_cents=NO_APPROVAL_NEEDED, max_steps=1)
        handle = await lab.start(raw)
        await poll(lambda: model_call_in_flight(handle), what="a model call to be in flight")
        first.signal(signal.SIGTERM)
        assert await first.exited(timeout=120) == 0
        events = [line["event"] for line in first.logs()]
        stopping = events.index("worker stopping: no new tasks, in-flight activities get a grace period")
        assert "model answered" in events[stopping:], "the 35 s call in flight at SIGTERM was cut short"
        assert await activity_attempts(handle, "think") == [1]
        assert [c.step for c in lab.store.model_calls.of(raw["ticket_id"])] == [1]
    finally:
        await lab.close()


@dataclass
class TemporalServer:
    """``temporal server start-dev`` as a process of our own, so it can be SIGKILLed and started again."""

    db_file: Path
    port: int
    process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        log = (self.db_file.parent / "temporal.log").open("ab")
        self.process = await asyncio.create_subprocess_exec(
            binary("temporal"),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--db-filename",
            str(self.db_file),
            *SEARCH_ATTRIBUTE_ARGS,
            "--log-level",
            "warn",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        await poll(self.serving, timeout=30, what="the Temporal server to serve")

    async def serving(self) -> bool:
        try:
            client = await Client.connect(f"127.0.0.1:{self.port}", data_converter=DATA_CONVERTER)
            await client.count_workflows()
        except RuntimeError:  # refused while it starts
            return False
        return True

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), 30)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[TemporalServer]:
    server = TemporalServer(tmp_path / "temporal.sqlite3", free_port())
    await server.start()
    try:
        yield server
    finally:
        if server.process is not None and server.process.returncode is None:
            await server.kill()


async def test_a_temporal_server_killed_twice_mid_ticket_loses_nothing_and_the_ticket_refunds_once(
    server: TemporalServer, store: Business
) -> None:
    client = await Client.connect(f"127.0.0.1:{server.port}", data_converter=DATA_CONVERTER)
    lab = Lab(client, store, settings={"AGENT_SCRIPTED_THINK_SECONDS": "2"})
    try:
        await lab.spawn()
        handle = await lab.start(ticket(approval_limit_cents=2000))
        assert await poll(lambda: waiting_amount(handle), what="the refund to wait for approval") == 4900

        await server.kill()  # while the ticket waits for a person
        await server.start()
        await poll(lambda: waiting_amount(handle), what="the waiting ticket after the restart")
        await handle.signal("approve", answer(4900))
        await poll(lambda: model_call_in_flight(handle), what="a model call after the refund")

        await server.kill()  # while a model call runs on the worker
        await server.start()
        outcome = await lab.supervise(handle, approve=False)
    finally:
        await lab.close()

    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in store.payments.refunds()] == [4900]
    assert len(store.mail.sent()) == 1
    assert [(a.decision.value, a.approver) for a in outcome.approvals] == [("approved", "ann")]
    assert len(store.model_calls.of(outcome.ticket_id)) <= 5  # the call the server missed may be asked again
    assert len(lab.workers) == 1, "the worker rode out both restarts"
