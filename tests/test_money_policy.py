"""The money policy is the operator's: a ticket started with looser options fails at once naming the field and
pays nothing, the policy that judged a ticket is on record, and a ticket past its model budget goes to a person.
Each runs a real ticket on a worker under the product's own default policy, not the tests' loose desk."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.contracts.conversation import Usage
from activities.contracts.policy import ApprovalPolicy, ModelPolicy, MoneyPolicy, Role
from activities.contracts.ticket import Status
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.models import PlaybackModel, calls
from tests.support.tickets import ticket
from tests.support.waits import awaiting

PRODUCT = MoneyPolicy()
"""What ``agent-worker worker`` runs with no policy file."""


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            {"approval_limit_cents": 10_000},
            "options.approval_limit_cents: 10,000 (100.00 in a two-decimal currency) is above the desk's approval",
        ),
        (
            {"approval_limit_cents": 2_147_483_647},
            "options.approval_limit_cents: 2,147,483,647 (21,474,836.47 in a two-decimal currency) is above",
        ),
        ({"approval_timeout_seconds": 7 * 86_400}, "options.approval_timeout_seconds: 604800 s is longer"),
        ({"refund_key": "none"}, "options.refund_key: Input should be 'per_order'"),
        ({"reconcile_refunds": False}, "options.reconcile_refunds: Input should be True"),
        ({"linear_history": False}, "options.linear_history: Input should be True"),
    ],
)
async def test_a_ticket_cannot_loosen_the_operators_policy_and_pays_nothing_trying(
    agent: Harness, options: dict[str, Any], says: str
) -> None:
    """Once a caller's option moved the threshold inside the ``if``: 100.00 refunded to cleo without a person."""
    raw = ticket("My parcel for order A-1003 never arrived.", email="cleo@example.com", **options)
    async with agent.worker(policy=PRODUCT):
        handle = await agent.start(raw)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    error = failure.value.cause
    assert isinstance(error, ApplicationError)
    assert error.type == "InvalidTicketInput"
    assert says in error.message
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    assert agent.store.payments.refunds() == []
    assert agent.store.mail.sent() == []


async def test_approvers_a_ticket_names_must_be_people_the_policy_allows(agent: Harness) -> None:
    policy = MoneyPolicy(approval=ApprovalPolicy(roles=[Role(name="leads", people=["ann"], max_cents=100_000)]))
    async with agent.worker(policy=policy):
        handle = await agent.start(ticket(approvers=["ann", "mallory"]))
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert "options.approvers: mallory may not approve refunds under the desk's policy (approvers: ann)" in str(
        failure.value.cause
    )


async def test_a_ticket_that_tightens_the_policy_is_held_to_what_it_asked(agent: Harness) -> None:
    """A lower limit than the desk's: 15.00 (bob's A-1002) waits for a person at a limit of 10.00."""
    async with agent.worker(policy=PRODUCT):
        handle = await agent.start(
            ticket("My parcel for order A-1002 never arrived.", email="bob@example.com", approval_limit_cents=1000)
        )
        request = await awaiting(handle, 1500)
        await handle.terminate("test over")
    assert request is not None
    assert agent.store.payments.refunds() == []


async def test_the_policy_that_judged_a_ticket_is_in_its_audit_trail_and_outcome(agent: Harness) -> None:
    async with agent.worker(policy=PRODUCT):
        outcome = await (await agent.start(ticket("Where is order A-1002?", email="bob@example.com"))).result()
    digest = MoneyPolicy().digest()
    assert outcome.policy == digest
    assert f"money policy {digest} in force" in agent.store.audit.entries(outcome.ticket_id)


async def test_a_ticket_whose_model_calls_pass_the_budget_goes_to_a_person_and_stops_calling(agent: Harness) -> None:
    """A model that would look orders up forever at 0.75 a call: the third call passes 2.00, and the ticket is
    handed over with its conversation kept, no fourth call made."""
    looping = calls(("lookup_order", {"order_id": "A-1001"})).model_copy(update={"usage": Usage(cost_usd=0.75)})
    model = PlaybackModel([looping])
    policy = MoneyPolicy(model=ModelPolicy(max_cost_usd_per_ticket=2.0))
    async with agent.worker(model, policy=policy):
        outcome = await (await agent.start(ticket(max_steps=50))).result()
    assert outcome.status is Status.HANDED_OVER
    assert outcome.model_calls == 3
    assert len(model.requests) == 3
    assert "A person from our support team will take it over" in outcome.answer
    assert "handed to a person: the model's budget is spent ($2.25 of $2.00)" in agent.store.audit.entries(
        outcome.ticket_id
    )
