"""Row 5 of the seed's crash table, and the reconciliation that closes it.

A refund that pays and then hangs through all its attempts fails with a timeout although the money went
out. Told "the tool failed", the model asks for the refund again: a key per tool call pays twice, the
product's key (per order and part) pays once. Asking the provider what it recorded under the key before
telling the model anything, as the product does, tells the model the truth. The first two rows are
demonstrations (``tests.support.demonstrations``): the activities beneath the product's workflow keyed per
call, or the lookup refused; the others are the product as it ships.

Each scenario sits through five heartbeat timeouts and their backoff (about 40 s of real time), so they run
side by side, each with its own worker process, database and task queue, and each test awaits its own. The
provider's refund-total guard is off, so the figures show what orchestration alone does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.replay import HISTORIES, replay
from tests.support.crashlab import Lab
from tests.support.demonstrations import NOT_RECONCILED, Demonstration
from tests.support.history import activity_attempts
from tests.support.tickets import Handle, ticket
from tests.support.waits import poll

pytestmark = pytest.mark.slow

PAYS_THEN_HANGS = "after:issue_refund=hang*5"
HANGS_BEFORE_PAYING = "before:issue_refund=hang*5"
PAYS_LATE = "before:issue_refund=hang*4,before:issue_refund#5=stall"
"""Four attempts hang without paying; the fifth sits past its timeout, then pays all the same."""
NO_APPROVAL_NEEDED = 10_000


@dataclass
class Scenario:
    lab: Lab
    handle: Handle
    outcome: Outcome

    def refunds(self) -> list[int]:
        return [r.amount_cents for r in self.lab.store.payments.refunds()]

    def model_calls(self) -> int:
        return len(self.lab.store.model_calls.of(self.outcome.ticket_id))

    def refund_results(self) -> list[tuple[bool, str]]:
        return [(c.is_error, c.result) for c in self.outcome.tool_calls if c.name == "issue_refund"]


GUARD_OFF = Demonstration(refund_guard=False)
SCENARIOS: dict[str, tuple[str, Demonstration]] = {
    "per_tool_call, not reconciled": (PAYS_THEN_HANGS, Demonstration(refund_key="per_tool_call", refund_guard=False)),
    "per_order, not reconciled": (PAYS_THEN_HANGS, Demonstration(reconcile=False, refund_guard=False)),
    "reconciled": (PAYS_THEN_HANGS, GUARD_OFF),
    "never paid, reconciled": (HANGS_BEFORE_PAYING, GUARD_OFF),
    "paid late, after reconciled": (PAYS_LATE, GUARD_OFF),
}


@pytest.fixture(scope="module")
async def scenarios(
    dev_server: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, asyncio.Task[Scenario]]]:
    labs: list[Lab] = []

    async def run(faults: str, demonstration: Demonstration) -> Scenario:
        store = Business.sqlite(tmp_path_factory.mktemp("timed-out") / "business.sqlite3").create()
        settings = {"AGENT_FAULTS": faults, "AGENT_GRACEFUL_SHUTDOWN_SECONDS": "1"}
        queue = f"timed-out-{uuid.uuid4()}"
        lab = Lab(dev_server.client, store, task_queue=queue, settings=settings, demonstration=demonstration)
        labs.append(lab)
        handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        return Scenario(lab, handle, await lab.supervise(handle, timeout=240))

    tasks = {name: asyncio.create_task(run(*scenario)) for name, scenario in SCENARIOS.items()}
    try:
        yield tasks
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        await asyncio.gather(*(lab.close() for lab in labs))


async def test_a_refund_that_timed_out_is_asked_for_again_by_the_model_and_a_key_per_tool_call_pays_twice(
    scenarios: dict[str, asyncio.Task[Scenario]],
) -> None:
    run = await scenarios["per_tool_call, not reconciled"]

    assert run.refunds() == [4900, 4900]
    assert await activity_attempts(run.handle, "issue_refund") == [5, 1]
    (first_failed, first), (second_failed, second) = run.refund_results()
    assert first_failed
    assert NOT_RECONCILED in first  # what a workflow that never asked would have had to say
    assert (second_failed, second) == (False, "Refunded USD 49.00 on order A-1001 (refund #2).")
    assert run.model_calls() == 5
    assert run.lab.workers[0].alive  # a hang, not a crash: the same worker carried on


async def test_a_key_per_order_pays_once_however_often_the_refund_is_asked_for(
    scenarios: dict[str, asyncio.Task[Scenario]],
) -> None:
    run = await scenarios["per_order, not reconciled"]

    assert run.refunds() == [4900]
    assert await activity_attempts(run.handle, "issue_refund") == [5, 1]
    (first_failed, _), second = run.refund_results()
    assert first_failed
    # The second ask is the same part under the same key: the provider's first result comes back, and the
    # model hears it for what it is, counted once.
    replayed = (
        "Refunded USD 49.00 on order A-1001 (refund #1): an earlier request whose answer was lost had made it; "
        "nothing more was paid."
    )
    assert second == (False, replayed)
    assert [r.amount_cents for r in run.outcome.refunds] == [4900]
    assert run.outcome.status is Status.RESOLVED


async def test_a_timed_out_refund_is_looked_up_before_the_model_hears_of_it_so_a_key_per_tool_call_pays_once(
    scenarios: dict[str, asyncio.Task[Scenario]],
) -> None:
    run = await scenarios["reconciled"]

    assert run.refunds() == [4900]
    assert await activity_attempts(run.handle, "issue_refund") == [5]
    assert await activity_attempts(run.handle, "find_refund") == [1]
    assert run.refund_results() == [(False, "Refunded USD 49.00 on order A-1001 (refund #1).")]
    assert [r.amount_cents for r in run.outcome.refunds] == [4900]
    assert run.model_calls() == 4


async def test_a_timed_out_refund_that_never_paid_is_reported_as_not_made_and_is_paid_once_when_asked_again(
    scenarios: dict[str, asyncio.Task[Scenario]],
) -> None:
    run = await scenarios["never paid, reconciled"]

    assert run.refunds() == [4900]
    (first_failed, first), second = run.refund_results()
    assert first_failed
    assert "The refund of USD 49.00 on order A-1001 was not made" in first
    assert second == (False, "Refunded USD 49.00 on order A-1001 (refund #1).")
    assert run.model_calls() == 5


async def test_the_stored_history_of_a_timed_out_refund_replays_with_its_lookup() -> None:
    """Reconciliation asks the provider (``find_refund``) before the model hears: that path is in the replay gate."""
    reconciled = HISTORIES / "refund_timed_out_reconciled.json"
    assert all(r.ok for r in await replay([reconciled]))
    assert '"find_refund"' in reconciled.read_text()


async def test_an_attempt_that_pays_after_reconciliation_said_not_made_is_refused(
    scenarios: dict[str, asyncio.Task[Scenario]],
) -> None:
    """Issue 13, case 7: the fifth attempt's thread outlives its timeout and reaches the provider after the
    workflow was told "not made" and the model asked again. The key was closed by the reconciliation, so the
    late attempt is refused: one refund, the one the model's second ask made."""
    run = await scenarios["paid late, after reconciled"]

    assert run.refunds() == [4900]
    (first_failed, not_made), second = run.refund_results()
    assert first_failed
    assert "was not made" in not_made
    assert second == (False, "Refunded USD 49.00 on order A-1001 (refund #1).")

    async def refusals() -> list[dict[str, Any]]:
        return [e for w in run.lab.workers for e in w.logs() if e.get("event") == "refused"]

    # the stalled attempt wakes some 30 s after its timeout
    refused = await poll(refusals, timeout=60, interval=0.5, what="the late attempt to be refused")
    (late,) = refused
    assert late["refusal"] == "IdempotencyKeyClosed"
    assert run.refunds() == [4900]
