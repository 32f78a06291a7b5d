"""The seed article's crash table, with real worker processes killed by SIGKILL at the moment each row names.

The provider's refund-total guard is off in these workers, so the refunds show what orchestration alone
does, as in the seed. Rows 5 and 6 live in ``test_timed_out_refunds.py`` and ``test_plain_loop.py``.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from tests.support.crashlab import Lab
from tests.support.demonstrations import Demonstration
from tests.support.harness import Harness
from tests.support.history import activity_attempts
from tests.support.tickets import answer, ticket
from tests.support.waits import poll, waiting_amount

NO_APPROVAL_NEEDED = 10_000
pytestmark = pytest.mark.slow


@pytest.fixture
async def lab(client: Client, store: Business) -> AsyncIterator[Lab]:
    """Workers whose provider pays past the charge, so a row shows what orchestration alone does; the rows that
    show a weaker key than the product's set their own ``demonstration``."""
    async with Lab(client, store, demonstration=Demonstration(refund_guard=False)) as lab:
        yield lab


def model_calls_per_step(store: Business, ticket_id: str) -> dict[int, int]:
    return dict(Counter(call.step for call in store.model_calls.of(ticket_id)))


async def test_a_worker_killed_after_the_refund_refunds_the_same_amount_again_without_asking_the_model(
    lab: Lab,
) -> None:
    lab.settings["AGENT_FAULTS"] = "after:issue_refund=kill"
    lab.demonstration = Demonstration(refund_key="none", refund_guard=False)
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)

    assert len(lab.killed()) == 1
    assert [r.amount_cents for r in lab.store.payments.refunds()] == [4900, 4900]
    assert model_calls_per_step(lab.store, outcome.ticket_id) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert await activity_attempts(handle, "issue_refund") == [2]
    assert outcome.status is Status.RESOLVED


async def test_an_idempotency_key_per_tool_call_turns_the_retry_into_a_no_op_and_the_email_is_unchanged(
    lab: Lab, client: Client, tmp_path: Path
) -> None:
    lab.settings["AGENT_FAULTS"] = "after:issue_refund=kill"
    lab.demonstration = per_tool_call = Demonstration(refund_key="per_tool_call", refund_guard=False)
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)
    without_crash = Harness(
        client, Business.sqlite(tmp_path / "no-crash.sqlite3").create(), task_queue=f"no-crash-{uuid.uuid4()}"
    )
    await without_crash.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED), demonstration=per_tool_call)

    assert len(lab.killed()) == 1
    assert [r.amount_cents for r in lab.store.payments.refunds()] == [4900]
    assert await activity_attempts(handle, "issue_refund") == [2]
    refund_call = next(c for c in outcome.tool_calls if c.name == "issue_refund")
    assert refund_call.result == "Refunded USD 49.00 on order A-1001 (refund #1)."
    [email] = lab.store.mail.sent()
    [email_without_crash] = without_crash.store.mail.sent()
    assert (email.subject, email.body) == (email_without_crash.subject, email_without_crash.body)
    assert model_calls_per_step(lab.store, outcome.ticket_id) == {1: 1, 2: 1, 3: 1, 4: 1}


async def test_a_worker_killed_while_waiting_for_approval_repeats_nothing_when_another_one_takes_over(
    lab: Lab,
) -> None:
    first = await lab.spawn()
    handle = await lab.start(ticket(approval_limit_cents=2000))
    assert await poll(lambda: waiting_amount(handle), what="the refund to wait for approval") == 4900

    first.signal(signal.SIGKILL)
    assert await first.exited() == -signal.SIGKILL
    await handle.signal(APPROVE_SIGNAL, answer(4900))
    assert not any(w.alive for w in lab.workers)
    outcome = await lab.supervise(handle, approve=False)

    assert len(lab.workers) == 2
    assert [r.amount_cents for r in lab.store.payments.refunds()] == [4900]
    assert len(lab.store.mail.sent()) == 1
    assert model_calls_per_step(lab.store, outcome.ticket_id) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert outcome.status is Status.RESOLVED
    assert [(a.decision.value, a.approver) for a in outcome.approvals] == [("approved", "ann")]


async def test_a_worker_killed_after_the_model_answered_asks_it_again_and_acts_on_the_second_answer_only(
    lab: Lab,
) -> None:
    lab.settings["AGENT_FAULTS"] = "after:think#2=kill"
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)

    assert len(lab.killed()) == 1
    assert model_calls_per_step(lab.store, outcome.ticket_id) == {1: 1, 2: 2, 3: 1, 4: 1}
    assert await activity_attempts(handle, "think") == [1, 2, 1, 1]
    assert [r.amount_cents for r in lab.store.payments.refunds()] == [3900]
    assert [r.amount_cents for r in outcome.refunds] == [3900]
    assert "39.00" in lab.store.mail.sent()[0].body
