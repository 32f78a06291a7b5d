"""A rollout on a real server (``docs/rollouts.md``): three builds of the product's own worker in a row, ``b1``, ``b2``
and ``b3``, each an ``agent-worker worker`` process of one Worker Deployment, as production runs them, made current
in turn with the ``temporal worker deployment`` commands (``b3`` ramped first), and then ``b2`` again, a roll-back.

A ticket is pinned to the build that started it and moves at a safe point: woken by ``agent-worker rollout move
--from OLD`` while it waits (for a person's approval, the customer's reply, an event about its order), it continues
as new onto the deployment's new target; caught mid-turn (its model step held by the local Messages API until the
test lets it go), it finishes the turn on its own build and moves at the wait that follows. Every ticket is then
finished where it landed, and has paid one refund and sent one email, asked the model each step once, and asked a
person at most once. Once their tickets are woken, the old builds drain, and a drained build's workers are stopped
with tickets still open.

Which build ran what is read from the histories: every completed workflow task records the deployment version of
the worker that completed it, and each run starts with the run it continued from.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL, CUSTOMER_MESSAGE, ORDER_EVENT_SIGNAL, WAITING_FOR_MEMO
from activities.contracts.ticket import Outcome, Status, Waiting
from activities.contracts.world import Order
from agent_worker.cli.devserver import start_dev_server
from tests.support.crashlab import Lab, WorkerProcess
from tests.support.deployments import (
    DRAINAGE_CHECKED_EVERY_SECOND,
    Drainage,
    count,
    deployment,
    drainage,
    registered,
    routed_to,
    running_on,
    runs,
)
from tests.support.processes import AGENT_WORKER, run
from tests.support.scripted_api import LOST, Hold, ScriptedAPI
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_amount, waiting_for_customer, waiting_for_event

pytestmark = pytest.mark.slow

AMOUNT = 4900
"""Every ticket's order: above the 20.00 a ticket waiting for approval asks a person for, below everyone else's."""
NO_APPROVAL_NEEDED = 10_000
DAYS_3 = 3 * 86_400
KINDS = ("approval", "reply", "event", "mid-turn")
HELD_STEP = 2
"""The mid-turn ticket's model step after it looked its order up: the one that asks for the refund. It is also the
ticket's budget of model calls a run, so the run that made it hands over mid-turn once the refund is paid, with the
target already changed: the next run must finish the turn on the same build."""


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None, extra_args=DRAINAGE_CHECKED_EVERY_SECOND)
    yield env
    await env.shutdown()


@pytest.fixture
def model() -> Iterator[ScriptedAPI]:
    with ScriptedAPI().running() as api:
        yield api


@dataclass
class Ticket:
    """One ticket of the rollout: what it is waiting for (``kind``), and its own order and customer, so that what
    it paid and mailed is counted apart from the others'."""

    kind: str
    handle: Handle
    """The ticket's latest run, whichever that is."""
    order_id: str
    email: str
    hold: Hold | None = None

    @property
    def id(self) -> str:
        return self.handle.id


@dataclass
class Rollout:
    """The test's world: the server, the deployment, the lab whose workers serve it, the model behind them, and
    what each ticket waits for (``waits``), which must not change when it moves."""

    client: Client
    name: str
    lab: Lab
    model: ScriptedAPI
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    waited: dict[str, object] = field(default_factory=dict)

    async def start_build(self, build: str) -> None:
        self.workers[build] = await self.lab.spawn(AGENT_DEPLOYMENT=self.name, AGENT_BUILD_ID=build)
        await registered(self.client, self.name, build)

    async def make_current(self, build: str) -> None:
        await deployment(self.client, "set-current-version", *self.version(build), "--yes")
        await routed_to(self.client, self.lab.task_queue, build)

    def version(self, build: str) -> tuple[str, ...]:
        return ("--deployment-name", self.name, "--build-id", build)

    async def tickets(self, cohort: int) -> list[Ticket]:
        """A ticket of each kind, started on the current build and brought to its wait (the mid-turn one, to its
        held model step)."""
        started = []
        for k, kind in enumerate(KINDS, 1):
            order_id, email = f"R-{1000 * cohort + k}", f"{kind}-{cohort}@example.com"
            self.lab.store.orders.add(Order(order_id=order_id, amount_cents=AMOUNT, customer_email=email))
            question, options = QUESTIONS[kind]
            raw = ticket(question.format(order=order_id), email, **options)
            hold = self.model.hold(raw["ticket_id"], HELD_STEP) if kind == "mid-turn" else None
            handle = await self.lab.start(raw)
            latest = self.client.get_workflow_handle(handle.id, result_type=Outcome)
            started.append(Ticket(kind, latest, order_id, email, hold))
        for t in started:
            self.waited[t.id] = await waits(t)
        return started

    async def step(self, old: str, new: str, tickets: list[Ticket]) -> None:
        """Make ``new`` current and move ``tickets`` off ``old``: each waiting ticket continues as new onto ``new``
        once woken; a ticket held mid-turn stays in its run on ``old`` until its step is let go, finishes its turn
        there (and pays there), and moves at the wait that follows. ``old`` drains once they all have."""
        before = {t.id: await runs(self.client, t.id) for t in tickets}
        assert all(chain[-1] == (old,) for chain in before.values()), before
        await self.make_current(new)
        checked = await poll(lambda: self.checked(old), what=f"the server to check {old}'s drainage")
        assert checked.status == "draining", f"the tickets pinned to {old} do not hold it: {checked}"
        await self.move(old, expected=len(tickets))
        held = [t for t in tickets if t.hold is not None and not t.hold.released.is_set()]
        for t in tickets:
            if t not in held:
                await moves(t, new, self.waited[t.id])
                assert await runs(self.client, t.id) == [*before[t.id], (new,)], t.kind
        for t in held:
            assert t.hold is not None
            assert await runs(self.client, t.id) == before[t.id], "mid-turn, a ticket stays in its run on its build"
            assert self.lab.store.payments.refunds(t.order_id) == []
            t.hold.release()
            self.waited[t.id] = await waits(t)
            await moves(t, new, self.waited[t.id])
            turn_then_wait = [*before[t.id], (old,), (new,)]  # handed over mid-turn on old, then at its wait to new
            assert await runs(self.client, t.id) == turn_then_wait, "its turn on the old build, its wait on the new"
            assert [r.amount_cents for r in self.lab.store.payments.refunds(t.order_id)] == [AMOUNT]
        await self.drained(old)

    async def move(self, old: str, expected: int) -> str:
        """``agent-worker rollout move --from OLD``, with the settings the workers run with, once visibility lists
        the ``expected`` runs open on ``old``: what it printed."""
        await poll(
            lambda: _equals(count(self.client, running_on(self.name, old)), expected), what=f"{expected} on {old}"
        )
        said = await run(AGENT_WORKER, "rollout", "move", "--from", old, env=self.lab.env(AGENT_DEPLOYMENT=self.name))
        assert f"woke {expected} tickets on {self.name}.{old};" in said, said
        return said

    async def checked(self, build: str) -> Drainage | None:
        """The build's drainage, once the server has checked it a grace period after it stopped being current."""
        found = await drainage(self.client, self.name, build)
        return found if found.checked_after_grace() else None

    async def status(self, build: str) -> str:
        return (await drainage(self.client, self.name, build)).status

    async def drained(self, build: str) -> None:
        """``build`` drains, and visibility counts no open run on it."""
        await poll(lambda: _equals(self.status(build), "drained"), what=f"{build} to drain")
        await poll(lambda: _equals(count(self.client, running_on(self.name, build)), 0), what=f"none on {build}")

    async def finish(self, tickets: list[Ticket], newest: str) -> None:
        """End each ticket as its kind is ended; each ends on ``newest`` having paid one refund and sent one email,
        asked the model each step once, and a person at most once."""
        for t in tickets:
            outcome = await finish(t)
            assert (await runs(self.client, t.id))[-1] == (newest,), f"{t.kind} ticket finished on {newest}"
            assert outcome.status is ENDED_AS[t.kind], (t.kind, outcome.status, outcome.answer)
            assert [r.amount_cents for r in self.lab.store.payments.refunds(t.order_id)] == [AMOUNT], t.kind
            assert len(self.lab.store.mail.sent(to=t.email)) == 1, t.kind
            asked = self.model.steps_asked(outcome.ticket_id)
            assert set(asked.values()) == {1}, f"{t.kind} ticket asked the model a step twice: {asked}"
            assert len(outcome.approvals) == (1 if t.kind == "approval" else 0), outcome.approvals


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


OPEN_FOR_REPLIES = {"reply_window_seconds": DAYS_3, "approval_limit_cents": NO_APPROVAL_NEEDED}
QUESTIONS: dict[str, tuple[str, dict[str, int]]] = {
    "approval": ("My parcel for order {order} never arrived", {}),
    "reply": ("My parcel never arrived. Can I have my money back?", OPEN_FOR_REPLIES),
    "event": (
        "My parcel for order {order} is late. Is it still on its way?",
        {"approval_limit_cents": NO_APPROVAL_NEEDED},
    ),
    "mid-turn": (
        "My parcel for order {order} never arrived",
        {**OPEN_FOR_REPLIES, "continue_as_new_after_steps": HELD_STEP},
    ),
}
"""Each kind of ticket as its customer asks it. ``reply`` names no order, so its first turn asks which one."""


async def waits(t: Ticket) -> object:
    """Wait until the ticket waits for what its kind waits for, and return what it waits for, which must be the
    same after each move: the same approval request and deadline, the same wait until the same moment."""
    if t.kind == "approval":
        assert await poll(lambda: waiting_amount(t.handle), what=f"{t.id} to wait for a person") == AMOUNT
        request = await awaiting(t.handle, AMOUNT)
        assert request is not None
        return (request.request_id, request.deadline)
    if t.kind == "event":
        waiting = await waiting_for_event(t.handle)
        return (waiting.order_id, waiting.until)
    if t.kind == "mid-turn" and t.hold is not None and not t.hold.released.is_set():
        await t.hold.reached()
        return None
    await waiting_for_customer(t.handle, turns=1)
    memo: Waiting = await (await t.handle.describe()).memo_value(WAITING_FOR_MEMO, type_hint=Waiting)
    return (memo.state, memo.until)


async def on(t: Ticket, build: str) -> bool:
    """Whether the ticket's latest run is on ``build``, pinned there, as ``describe`` says."""
    info = (await t.handle.describe()).raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id == build and info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED


async def moves(t: Ticket, build: str, waited: object) -> None:
    """The woken ticket lands on ``build`` and waits there for what it waited for before."""
    await poll(lambda: on(t, build), what=f"{t.kind} ticket {t.id} to move to {build}")
    assert await waits(t) == waited, f"{t.kind} ticket {t.id} waits for something else on {build}"


async def finish(t: Ticket) -> Outcome:
    """What ends the ticket as its kind would be ended: a person's approval, the event, the customer's reply (and
    then the desk closes the ticket, which would otherwise wait on for more)."""
    if t.kind == "approval":
        await t.handle.signal(APPROVE_SIGNAL, answer(AMOUNT))
    elif t.kind == "event":
        await t.handle.signal(ORDER_EVENT_SIGNAL, {"order_id": t.order_id, "event": LOST})
    else:
        reply = f"It is order {t.order_id}." if t.kind == "reply" else "Thanks!"
        await t.handle.execute_update(CUSTOMER_MESSAGE, {"text": reply})
        await waiting_for_customer(t.handle, turns=2)
        await t.handle.cancel(reason="the desk closes the ticket")
    return await asyncio.wait_for(t.handle.result(), 60)


ENDED_AS = {
    "approval": Status.RESOLVED,
    "event": Status.RESOLVED,
    "reply": Status.CANCELLED,
    "mid-turn": Status.CANCELLED,
}


async def test_tickets_of_three_builds_move_at_safe_points_pay_once_and_the_old_builds_drain_and_a_rollback_moves_back(
    server: WorkflowEnvironment, store: Business, model: ScriptedAPI
) -> None:
    client = server.client
    name = f"support-agent-{uuid.uuid4().hex[:8]}"
    claude = {"AGENT_MODEL_BACKEND": "claude", "ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": model.url}
    async with Lab(client, store, settings=claude) as lab:
        world = Rollout(client, name, lab, model)
        await world.start_build("b1")
        await world.make_current("b1")
        first = await world.tickets(cohort=1)
        assert [await runs(client, t.id) for t in first] == [[("b1",)]] * len(KINDS)

        await world.start_build("b2")
        await world.step("b1", "b2", first)

        second = await world.tickets(cohort=2)
        await world.start_build("b3")
        await deployment(client, "set-ramping-version", *world.version("b3"), "--percentage", "50", "--yes")
        routes = (await deployment(client, "describe", "--name", name))["routingConfig"]
        assert (routes["currentVersionBuildID"], routes["rampingVersionBuildID"]) == ("b2", "b3")
        assert routes["rampingVersionPercentage"] == 50
        await world.step("b2", "b3", [*first, *second])

        # b1 has drained: its workers go, with tickets it started still open, and every ticket ends on b3.
        await world.workers["b1"].stop()
        assert await world.workers["b1"].exited() == 0
        await world.finish([*first, *second], newest="b3")

        # A roll-back: b2 is current again, and the tickets started on b3 move back to it at their safe points.
        third = await world.tickets(cohort=3)
        await world.step("b3", "b2", third)
        await world.finish(third, newest="b2")
